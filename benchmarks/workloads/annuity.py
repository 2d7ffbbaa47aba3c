"""Annuity: how large will a loan's annuity be? Application columns and merged group means, LightGBM.

Written the way a data scientist outside the project writes it (issue 28): statistics per
organisation type and per occupation computed from the training rows with ``groupby().agg()``,
left-merged onto the application, an income-per-person column via ``assign``, ``LGBMRegressor``.
Data: Home Credit Default Risk, ``home_credit_sample/application_train_random5000.csv`` (5,000
random applicants); the target is ``AMT_ANNUITY`` (rows without it are dropped), ``AMT_CREDIT``
is not a feature.
"""

import pandas as pd
from lightgbm import LGBMRegressor

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, split

TASK = "regression"
DESCRIPTION = (
    "Regression of the loan annuity of Home Credit applicants: application columns, per-organisation "
    "and per-occupation means of the training rows (groupby().agg()) left-merged, income per family "
    "member via assign, LightGBM regressor; returns the predicted annuity."
)

COLUMNS = ["AMT_INCOME_TOTAL", "AMT_GOODS_PRICE", "CNT_CHILDREN", "CNT_FAM_MEMBERS", "DAYS_BIRTH",
           "DAYS_EMPLOYED", "DAYS_REGISTRATION", "OWN_CAR_AGE", "REGION_POPULATION_RELATIVE",
           "REGION_RATING_CLIENT", "EXT_SOURCE_2", "EXT_SOURCE_3", "HOUR_APPR_PROCESS_START"]


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    applications = pd.read_csv(require("home_credit_sample/application_train_random5000.csv"))
    applications = cap_rows(applications.dropna(subset=["AMT_ANNUITY"]), rows, random_state)
    inputs = applications.drop(columns=["TARGET", "AMT_ANNUITY", "AMT_CREDIT"])
    data = split(inputs, applications["AMT_ANNUITY"], random_state)

    train = data.train_inputs[["ORGANIZATION_TYPE", "OCCUPATION_TYPE", "AMT_INCOME_TOTAL", "AMT_GOODS_PRICE"]]
    train = train.assign(annuity=data.y_train)
    by_organisation = train.groupby("ORGANIZATION_TYPE").agg(
        org_annuity=("annuity", "mean"), org_income=("AMT_INCOME_TOTAL", "median"), org_size=("annuity", "size"),
    ).reset_index()
    by_occupation = train.groupby("OCCUPATION_TYPE").agg(
        occupation_annuity=("annuity", "mean"), occupation_goods=("AMT_GOODS_PRICE", "mean"),
    ).reset_index()

    def predict(df):
        df = df.merge(by_organisation, on="ORGANIZATION_TYPE", how="left")
        df = df.merge(by_occupation, on="OCCUPATION_TYPE", how="left")
        X = df[COLUMNS + ["org_annuity", "org_income", "org_size", "occupation_annuity", "occupation_goods"]].assign(
            income_per_person=df["AMT_INCOME_TOTAL"] / df["CNT_FAM_MEMBERS"],
        )
        return model.predict(X)

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    regressor = LGBMRegressor(n_estimators=100, learning_rate=0.05, random_state=random_state, verbose=-1,
                              deterministic=True, force_row_wise=True)
    return fit_workload("annuity", predict, regressor, data, TASK, DESCRIPTION)
