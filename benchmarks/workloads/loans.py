"""Loans: will an applicant default? Side tables summarised with ``groupby().agg()`` and merged, LightGBM.

Written the way a data scientist outside the project writes it (issue 28): named aggregations per
applicant of the credit-bureau records, previous applications and instalment payments, left-merged
onto the application row, a few ratio columns, the categorical columns as pandas ``category``
dtype for LightGBM. Data: Home Credit Default Risk sample (``home_credit_sample/``, 1,000
applicants, label ``DEFAULTED``).

Spelling changed for willump, in two places: the ratio columns are added with ``.assign(...)`` on
the selected columns (written as ``df["credit_income"] = ...`` after the merges, willump reads the
whole body as one feature vector, no IFVs to filter or cascade on, without a warning), and the
categorical columns are integer codes (as pandas ``category`` columns, ``fit`` fails converting
them to floats: "could not convert string to float").
"""

import pandas as pd
from lightgbm import LGBMClassifier

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, split

TASK = "classification"
DESCRIPTION = (
    "Binary classification of loan applicants (defaulted or not), pandas style: per-applicant "
    "named aggregations (groupby().agg()) of bureau records, previous applications and instalment "
    "payments, left-merged onto the application, ratio columns via assign, category codes, "
    "LightGBM; returns the probability of default."
)

NUMERIC = ["AMT_INCOME_TOTAL", "AMT_CREDIT", "AMT_ANNUITY", "AMT_GOODS_PRICE", "DAYS_BIRTH", "DAYS_EMPLOYED",
           "DAYS_REGISTRATION", "DAYS_ID_PUBLISH", "OWN_CAR_AGE", "CNT_CHILDREN", "CNT_FAM_MEMBERS",
           "REGION_POPULATION_RELATIVE", "REGION_RATING_CLIENT", "EXT_SOURCE_1", "EXT_SOURCE_2", "EXT_SOURCE_3"]
CATEGORICAL = ["NAME_CONTRACT_TYPE", "CODE_GENDER", "NAME_INCOME_TYPE", "NAME_EDUCATION_TYPE",
               "NAME_FAMILY_STATUS", "OCCUPATION_TYPE", "ORGANIZATION_TYPE"]


def read_table(name):
    return pd.read_csv(require(f"home_credit_sample/{name}.csv"), encoding="utf-8-sig")


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    app = read_table("application")
    for column in CATEGORICAL:
        app[column] = app[column].astype("category").cat.codes
    app = cap_rows(app, rows, random_state)
    data = split(app.drop(columns=["DEFAULTED"]), app["DEFAULTED"], random_state)

    bureau = read_table("bureau")
    bureau_agg = bureau.groupby("SK_ID_CURR").agg(
        bureau_loans=("SK_ID_BUREAU", "count"),
        bureau_active=("CREDIT_ACTIVE", lambda s: (s == "Active").sum()),
        bureau_debt=("AMT_CREDIT_SUM_DEBT", "sum"),
        bureau_overdue_max=("AMT_CREDIT_SUM_OVERDUE", "max"),
        bureau_days_credit=("DAYS_CREDIT", "mean"),
    ).reset_index()
    previous = read_table("previous_application")
    previous_agg = previous.groupby("SK_ID_CURR").agg(
        prev_applications=("SK_ID_PREV", "count"),
        prev_refused_share=("NAME_CONTRACT_STATUS", lambda s: (s == "Refused").mean()),
        prev_amount_mean=("AMT_APPLICATION", "mean"),
        prev_credit_max=("AMT_CREDIT", "max"),
        prev_days_decision=("DAYS_DECISION", "max"),
    ).reset_index()
    installments = read_table("installments_payments")
    installments["late"] = installments["DAYS_ENTRY_PAYMENT"] > installments["DAYS_INSTALMENT"]
    installments["missing"] = installments["AMT_INSTALMENT"] - installments["AMT_PAYMENT"]
    installments_agg = installments.groupby("SK_ID_CURR").agg(
        late_share=("late", "mean"),
        missing_sum=("missing", "sum"),
        payments=("AMT_PAYMENT", "count"),
    ).reset_index()
    AGGREGATES = [c for t in (bureau_agg, previous_agg, installments_agg) for c in t.columns if c != "SK_ID_CURR"]

    def predict(df):
        df = df.merge(bureau_agg, on="SK_ID_CURR", how="left")
        df = df.merge(previous_agg, on="SK_ID_CURR", how="left")
        df = df.merge(installments_agg, on="SK_ID_CURR", how="left")
        X = df[NUMERIC + CATEGORICAL + AGGREGATES].assign(
            credit_income=df["AMT_CREDIT"] / df["AMT_INCOME_TOTAL"],
            annuity_income=df["AMT_ANNUITY"] / df["AMT_INCOME_TOTAL"],
            credit_goods=df["AMT_CREDIT"] / df["AMT_GOODS_PRICE"],
        )
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    classifier = LGBMClassifier(n_estimators=100, learning_rate=0.05, num_leaves=15, random_state=random_state,
                                verbose=-1, deterministic=True, force_row_wise=True)
    return fit_workload("loans", predict, classifier, data, TASK, DESCRIPTION)
