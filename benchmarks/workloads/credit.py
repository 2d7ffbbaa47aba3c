"""Credit: will a loan applicant default? Application row joined with side-table aggregates, LightGBM.

Data: Home Credit Default Risk sample (``home_credit_sample/``): ``application.csv``
(1,000 applicants, label ``DEFAULTED``) and the applicants' rows of ``bureau.csv``,
``previous_application.csv`` and ``installments_payments.csv``, aggregated per
``SK_ID_CURR`` at build time (counts and means, columns prefixed by their table).
The application's string columns are encoded as integer codes at build time.
"""

import pandas as pd

from benchmarks.data import require
from benchmarks.workloads.common import (
    FeatureCapture,
    Workload,
    cap_rows,
    encode_categories,
    fit_workload,
    gbdt_classifier,
    split,
)

TASK = "classification"
DESCRIPTION = (
    "Binary classification of loan applicants (defaulted or not): the "
    "application row left-joined with per-applicant aggregates of credit-bureau records, "
    "previous applications and instalment payments, then LightGBM on the selected "
    "columns; returns the probability of default."
)

KEY = "SK_ID_CURR"
LABEL = "DEFAULTED"

# side table -> (prefix of its aggregate columns, numeric columns averaged per applicant)
_SIDE_TABLES = {
    "bureau": (
        "BUREAU",
        ["DAYS_CREDIT", "CREDIT_DAY_OVERDUE", "DAYS_CREDIT_ENDDATE", "AMT_CREDIT_MAX_OVERDUE",
         "AMT_CREDIT_SUM", "AMT_CREDIT_SUM_DEBT", "AMT_CREDIT_SUM_OVERDUE", "DAYS_CREDIT_UPDATE"],
    ),
    "previous_application": (
        "PREV",
        ["AMT_ANNUITY", "AMT_APPLICATION", "AMT_CREDIT", "AMT_DOWN_PAYMENT", "RATE_DOWN_PAYMENT",
         "DAYS_DECISION", "CNT_PAYMENT"],
    ),
    "installments_payments": (
        "INSTAL",
        ["NUM_INSTALMENT_NUMBER", "DAYS_INSTALMENT", "DAYS_ENTRY_PAYMENT", "AMT_INSTALMENT", "AMT_PAYMENT"],
    ),
}


def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(require(f"home_credit_sample/{name}.csv"), encoding="utf-8-sig")


def _aggregate(table: pd.DataFrame, prefix: str, columns: list[str]) -> pd.DataFrame:
    """One row per applicant: the number of rows and the mean of ``columns``, prefixed."""
    grouped = table.groupby(KEY)
    aggregates = grouped[columns].mean().add_prefix(f"{prefix}_MEAN_")
    aggregates.insert(0, f"{prefix}_COUNT", grouped.size())
    return aggregates.reset_index()


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    applications = cap_rows(encode_categories(_read("application")), rows, random_state)
    data = split(applications.drop(columns=LABEL), applications[LABEL], random_state)
    bureau, previous, installments = (
        _aggregate(_read(name), prefix, columns) for name, (prefix, columns) in _SIDE_TABLES.items()
    )
    FEATURES = [c for c in data.train_inputs.columns if c != KEY]
    FEATURES += [c for table in (bureau, previous, installments) for c in table.columns if c != KEY]

    def predict(app):
        df = app.merge(bureau, on="SK_ID_CURR", how="left")
        df = df.merge(previous, on="SK_ID_CURR", how="left")
        df = df.merge(installments, on="SK_ID_CURR", how="left")
        X = df[FEATURES]
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("credit", predict, gbdt_classifier(random_state), data, TASK, DESCRIPTION)
