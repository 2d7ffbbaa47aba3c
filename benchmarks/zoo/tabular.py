"""Credit applications as scikit-learn's examples and Kaggle's Home Credit notebooks write them.

Spellings followed: "Column Transformer with Mixed Types" (a numeric ``Pipeline`` of
``SimpleImputer(strategy="median")`` and ``StandardScaler``, ``OneHotEncoder(handle_unknown="ignore")``
on the categories, ``LogisticRegression``), "Categorical Feature Support in Gradient Boosting"
(``make_column_transformer`` of an ``OrdinalEncoder``, ``remainder="passthrough"``,
``HistGradientBoostingClassifier``), and the Home Credit kernels' pandas features: the
``DAYS_EMPLOYED`` anomaly (365243) by ``np.where``, credit/income/annuity ratios, the mean of the
``EXT_SOURCE`` columns by ``df[[...]].mean(axis=1)``, document flags by ``.sum(axis=1)``, ``.clip``,
``.fillna``, ``.astype`` (``"category"`` in a loop, for LightGBM), ``pd.concat(axis=1)``, ``pd.get_dummies`` reindexed to the training columns; bureau records summarised per applicant and looked
up with ``.map(series)``.

Data: ``home_credit_sample/application_train_random5000.csv`` (5,000 random applicants, ``TARGET``;
``AMT_ANNUITY`` for the regressions, without that column among the inputs) and the 1,000
applicants of ``application.csv`` with their ``bureau.csv`` records (``DEFAULTED``).
"""

import lightgbm as lgb
import numpy as np
import pandas as pd
from lightgbm import LGBMClassifier, LGBMRegressor
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, cap_rows, split
from benchmarks.zoo.common import Entry, FittedModels

NUMERIC = ["AMT_INCOME_TOTAL", "AMT_CREDIT", "AMT_ANNUITY", "AMT_GOODS_PRICE", "DAYS_BIRTH", "DAYS_EMPLOYED",
           "DAYS_REGISTRATION", "DAYS_ID_PUBLISH", "OWN_CAR_AGE", "CNT_FAM_MEMBERS", "CNT_CHILDREN",
           "REGION_POPULATION_RELATIVE", "EXT_SOURCE_1", "EXT_SOURCE_2", "EXT_SOURCE_3"]
CATEGORICAL = ["NAME_CONTRACT_TYPE", "CODE_GENDER", "FLAG_OWN_CAR", "NAME_INCOME_TYPE", "NAME_EDUCATION_TYPE",
               "NAME_FAMILY_STATUS", "NAME_HOUSING_TYPE", "OCCUPATION_TYPE"]
ANNUITY_FREE = [c for c in NUMERIC if c != "AMT_ANNUITY"]
DOCUMENTS = [f"FLAG_DOCUMENT_{i}" for i in range(2, 22)]
LGBM = dict(n_estimators=100, random_state=0, verbose=-1, deterministic=True, force_row_wise=True)


def _applications(rows, random_state) -> pd.DataFrame:
    applications = pd.read_csv(require("home_credit_sample/application_train_random5000.csv"))
    return cap_rows(applications, rows, random_state).reset_index(drop=True)


def mixed_types_logistic(data, fitted) -> Entry:
    """The scikit-learn example, on credit applications."""
    numeric_transformer = Pipeline(steps=[("imputer", SimpleImputer(strategy="median")), ("scaler", StandardScaler())])
    categorical_transformer = OneHotEncoder(handle_unknown="ignore")
    preprocessor = ColumnTransformer(transformers=[
        ("num", numeric_transformer, NUMERIC), ("cat", categorical_transformer, CATEGORICAL),
    ])
    return positive_class_pipeline(
        "credit_mixed_types_lr", "linear", [("preprocessor", preprocessor), ("classifier", LogisticRegression(max_iter=1000))],
        "Pipeline(ColumnTransformer(imputer+scaler numbers, OneHotEncoder categories), "
        "LogisticRegression).predict_proba(df)[:, 1]", data, fitted)


def positive_class_pipeline(name: str, model: str, steps: list, style: str, data, fitted) -> Entry:
    """An entry on credit applications whose function is ``clf.predict_proba(df)[:, 1]`` of a
    ``Pipeline`` of ``steps`` fitted on the training rows."""
    clf = fitted(name, lambda: Pipeline(steps=steps).fit(data.train_inputs, data.y_train))

    def predict(df):
        return clf.predict_proba(df)[:, 1]

    return Entry(name, "credit", model, "binary", style, predict, data)


def categorical_gradient_boosting(data, fitted) -> Entry:
    """Ordinal-encoded categories passed to HistGradientBoosting as categorical features."""
    ordinal_encoder = make_column_transformer(
        (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), CATEGORICAL),
        remainder="passthrough",
    )
    columns = CATEGORICAL + NUMERIC
    model = fitted("credit_hist_gradient_boosting", lambda: make_pipeline(
        ordinal_encoder,
        HistGradientBoostingClassifier(categorical_features=list(range(len(CATEGORICAL))), random_state=42),
    ).fit(data.train_inputs[columns], data.y_train))

    def predict(df):
        return model.predict_proba(df[columns])[:, 1]

    return Entry("credit_hist_gradient_boosting", "credit", "tree-ensemble", "binary",
                 "make_pipeline(make_column_transformer(OrdinalEncoder, remainder='passthrough'), "
                 "HistGradientBoostingClassifier)", predict, data)


def kaggle_features_lightgbm(data, fitted) -> Entry:
    """A Home Credit kernel's feature cell, column by column, for LightGBM."""
    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = df[NUMERIC].copy()
        X["DAYS_EMPLOYED_ANOM"] = (X["DAYS_EMPLOYED"] == 365243).astype(int)
        X["DAYS_EMPLOYED"] = np.where(X["DAYS_EMPLOYED"] == 365243, np.nan, X["DAYS_EMPLOYED"])
        X["CREDIT_INCOME_PERCENT"] = X["AMT_CREDIT"] / X["AMT_INCOME_TOTAL"]
        X["ANNUITY_INCOME_PERCENT"] = X["AMT_ANNUITY"] / X["AMT_INCOME_TOTAL"]
        X["CREDIT_TERM"] = X["AMT_ANNUITY"] / X["AMT_CREDIT"]
        X["DAYS_EMPLOYED_PERCENT"] = X["DAYS_EMPLOYED"] / X["DAYS_BIRTH"]
        X["EXT_SOURCES_MEAN"] = X[["EXT_SOURCE_1", "EXT_SOURCE_2", "EXT_SOURCE_3"]].mean(axis=1)
        X["DOCUMENT_COUNT"] = df[DOCUMENTS].sum(axis=1)
        X["AGE_YEARS"] = (-X["DAYS_BIRTH"] / 365).clip(18, 70)
        return model.predict_proba(X)[:, 1]

    model = fitted("credit_kaggle_lightgbm", lambda: LGBMClassifier(**LGBM).fit(predict(data.train_inputs), data.y_train))
    return Entry("credit_kaggle_lightgbm", "credit", "tree-ensemble", "binary",
                 "Kaggle feature cell: X[col] = ratios, np.where anomaly, mean/sum(axis=1), clip; LGBMClassifier",
                 predict, data)


def category_lightgbm(data, fitted) -> Entry:
    """LightGBM's own categorical support as its docs and Kaggle kernels use it: the text columns cast
    to pandas' category dtype in a loop, the frame given to ``LGBMClassifier`` (which gives a column's
    categories their codes in the training categories)."""
    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = df[NUMERIC + CATEGORICAL].copy()
        for column in CATEGORICAL:
            X[column] = X[column].astype("category")
        return model.predict_proba(X)[:, 1]

    model = fitted("credit_category_lightgbm", lambda: LGBMClassifier(**LGBM).fit(
        predict(data.train_inputs), data.y_train))
    return Entry("credit_category_lightgbm", "credit", "tree-ensemble", "binary",
                 "for column in text columns: X[column] = X[column].astype('category'); LGBMClassifier",
                 predict, data)


def attribute_columns_gradient_boosting(data, fitted) -> Entry:
    """A notebook's features with the columns read as attributes (``df.AMT_CREDIT``), HistGradientBoosting."""
    model = FeatureCapture()

    def predict(df):
        credit_income = df.AMT_CREDIT / df.AMT_INCOME_TOTAL
        annuity_income = df.AMT_ANNUITY / df.AMT_INCOME_TOTAL
        age_years = -df.DAYS_BIRTH / 365
        anomaly = (df.DAYS_EMPLOYED == 365243).astype(int)
        external = df.EXT_SOURCE_2.fillna(0.5) * df.EXT_SOURCE_3.fillna(0.5)
        cash = (df.NAME_CONTRACT_TYPE == "Cash loans").astype(int)
        X = pd.DataFrame({"credit_income": credit_income, "annuity_income": annuity_income, "age_years": age_years,
                          "anomaly": anomaly, "external": external, "cash": cash})
        return model.predict_proba(X)[:, 1]

    model = fitted("credit_attribute_hgb", lambda: HistGradientBoostingClassifier(random_state=0).fit(
        predict(data.train_inputs), data.y_train))
    return Entry("credit_attribute_hgb", "credit", "tree-ensemble", "binary",
                 "columns read as df.NAME: ratios, == literal, fillna, astype(int) into pd.DataFrame({...}); "
                 "HistGradientBoostingClassifier", predict, data)


def booster_assign_lightgbm(data, fitted) -> Entry:
    """Kaggle's ``lgb.train`` notebooks: ratio columns by ``assign``, a column dropped, the Booster at
    its best iteration (early stopping on the last quarter of the training rows, all trees kept)."""
    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = df[NUMERIC].assign(
            CREDIT_INCOME_PERCENT=df["AMT_CREDIT"] / df["AMT_INCOME_TOTAL"],
            ANNUITY_INCOME_PERCENT=df["AMT_ANNUITY"] / df["AMT_INCOME_TOTAL"],
            CREDIT_TERM=df["AMT_ANNUITY"] / df["AMT_CREDIT"],
            DAYS_EMPLOYED_PERCENT=df["DAYS_EMPLOYED"] / df["DAYS_BIRTH"],
        )
        return model.predict(X.drop(columns=["OWN_CAR_AGE"]), num_iteration=model.best_iteration)

    def train():
        features, labels = predict(data.train_inputs), np.asarray(data.y_train)
        fit = len(features) * 3 // 4
        parameters = {"objective": "binary", "learning_rate": 0.05, "verbose": -1, "seed": 0, "deterministic": True,
                      "force_row_wise": True}
        return lgb.train(parameters, lgb.Dataset(features[:fit], labels[:fit]), 500,
                         valid_sets=[lgb.Dataset(features[fit:], labels[fit:])],
                         callbacks=[lgb.early_stopping(30, verbose=False)], keep_training_booster=True)

    model = fitted("credit_booster_assign", train)
    return Entry("credit_booster_assign", "credit", "tree-ensemble", "binary",
                 "df[cols].assign(ratios), .drop(columns=...); lgb.train Booster.predict(num_iteration=best_iteration)",
                 predict, data)


def concat_features_logistic(data, fitted) -> Entry:
    """Ratios and flags gathered by pd.concat(axis=1), gaps filled with training medians, scaled, logistic."""
    medians = data.train_inputs[NUMERIC].median()

    pipe = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        ratios = pd.concat([
            df["AMT_CREDIT"] / df["AMT_INCOME_TOTAL"],
            df["AMT_ANNUITY"] / df["AMT_INCOME_TOTAL"],
            df["AMT_ANNUITY"] / df["AMT_CREDIT"],
        ], axis=1, keys=["credit_income", "annuity_income", "credit_term"])
        flags = pd.concat([
            (df["FLAG_OWN_CAR"] == "Y").astype(int),
            (df["CODE_GENDER"] == "M").astype(int),
            df[DOCUMENTS].sum(axis=1),
        ], axis=1, keys=["own_car", "male", "documents"])
        X = pd.concat([df[NUMERIC].fillna(medians), ratios.fillna(0), flags], axis=1)
        return pipe.predict_proba(X)[:, 1]

    pipe = fitted("credit_concat_lr", lambda: make_pipeline(
        StandardScaler(), LogisticRegression(max_iter=1000)).fit(predict(data.train_inputs), data.y_train))
    return Entry("credit_concat_lr", "credit", "linear", "binary",
                 "pd.concat(axis=1) of ratios, (col == 'Y').astype(int), sum(axis=1), fillna(medians); "
                 "make_pipeline(StandardScaler, LogisticRegression)", predict, data)


def dummies_logistic(data, fitted) -> Entry:
    """Kaggle's one-hot spelling: pd.get_dummies of the text columns, reindexed to the training columns
    (a row has one level of each), gaps filled with training medians, logistic."""
    medians = data.train_inputs[NUMERIC].median()
    columns = list(pd.get_dummies(data.train_inputs[NUMERIC + CATEGORICAL], columns=CATEGORICAL).columns)

    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = pd.get_dummies(df[NUMERIC + CATEGORICAL], columns=CATEGORICAL)
        X = X.reindex(columns=columns, fill_value=0)
        X = X.fillna(medians)
        return model.predict_proba(X)[:, 1]

    model = fitted("credit_dummies_lr", lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(
        predict(data.train_inputs), data.y_train))
    return Entry("credit_dummies_lr", "credit", "linear", "binary",
                 "pd.get_dummies(df[cols], columns=text columns), reindex(columns=training columns, fill_value=0), "
                 "fillna(medians); make_pipeline(StandardScaler, LogisticRegression)", predict, data)


def annuity_ridge(data, fitted) -> Entry:
    """Regression of the annuity: a DataFrame of log amounts and clipped counts, Ridge on a log target."""
    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = pd.DataFrame({
            "log_credit": np.log1p(df["AMT_CREDIT"]),
            "log_income": np.log1p(df["AMT_INCOME_TOTAL"]),
            "log_goods": np.log1p(df["AMT_GOODS_PRICE"].fillna(df["AMT_CREDIT"])),
            "cash_loan": (df["NAME_CONTRACT_TYPE"] == "Cash loans").astype(float),
            "age": -df["DAYS_BIRTH"] / 365.25,
            "children": df["CNT_CHILDREN"].clip(upper=5),
        })
        return model.predict(X)

    model = fitted("annuity_ridge", lambda: TransformedTargetRegressor(
        regressor=Ridge(alpha=1.0), func=np.log1p, inverse_func=np.expm1).fit(predict(data.train_inputs), data.y_train))
    return Entry("annuity_ridge", "credit", "linear", "regression",
                 "pd.DataFrame({log1p amounts, fillna, (col == ...).astype, clip}); Ridge on log1p(AMT_ANNUITY)",
                 predict, data)


def annuity_helper_lightgbm(data, fitted) -> Entry:
    """Regression of the annuity through a helper of the user's, with an organisation frequency by .map."""
    organisation_share = data.train_inputs["ORGANIZATION_TYPE"].value_counts(normalize=True)

    def featurize(df):
        X = df[ANNUITY_FREE].copy()
        X["credit_to_goods"] = df["AMT_CREDIT"] / df["AMT_GOODS_PRICE"]
        X["income_per_person"] = df["AMT_INCOME_TOTAL"] / df["CNT_FAM_MEMBERS"]
        X["organisation_share"] = df["ORGANIZATION_TYPE"].map(organisation_share)
        return X

    model = fitted("annuity_lightgbm", lambda: LGBMRegressor(**LGBM).fit(featurize(data.train_inputs), data.y_train))

    def predict(df):
        X = featurize(df)
        return model.predict(X)

    return Entry("annuity_helper_lightgbm", "credit", "tree-ensemble", "regression",
                 "X = featurize(df): ratio columns, .map(value_counts(normalize=True)); LGBMRegressor",
                 predict, data)


def bureau_lookups_forest(rows, random_state, fitted) -> Entry:
    """Bureau records summarised per applicant, looked up by ``.map`` into a numpy array, random forest."""
    applications = pd.read_csv(require("home_credit_sample/application.csv"), encoding="utf-8-sig")
    applications = cap_rows(applications, rows, random_state).reset_index(drop=True)
    data = split(applications.drop(columns="DEFAULTED"), applications["DEFAULTED"], random_state)
    bureau = pd.read_csv(require("home_credit_sample/bureau.csv"), encoding="utf-8-sig")
    grouped = bureau.groupby("SK_ID_CURR")
    bureau_count = grouped.size()
    active_loans = bureau[bureau["CREDIT_ACTIVE"] == "Active"].groupby("SK_ID_CURR").size()
    total_debt = grouped["AMT_CREDIT_SUM_DEBT"].sum()
    days_overdue = grouped["CREDIT_DAY_OVERDUE"].max()

    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = np.column_stack([
            df["AMT_INCOME_TOTAL"], df["AMT_CREDIT"], df["EXT_SOURCE_2"].fillna(0.5), df["DAYS_BIRTH"],
            df["SK_ID_CURR"].map(bureau_count).fillna(0),
            df["SK_ID_CURR"].map(active_loans).fillna(0),
            df["SK_ID_CURR"].map(total_debt).fillna(0),
            df["SK_ID_CURR"].map(days_overdue).fillna(0),
        ])
        return model.predict_proba(X)[:, 1]

    model = fitted("credit_bureau_forest", lambda: RandomForestClassifier(
        n_estimators=100, min_samples_leaf=5, random_state=0, n_jobs=1).fit(predict(data.train_inputs), data.y_train))
    return Entry("credit_bureau_forest", "credit", "tree-ensemble", "binary",
                 "np.column_stack of columns and .map(groupby series).fillna(0); RandomForestClassifier",
                 predict, data)


def build(rows: int | None = None, random_state: int = 0) -> list[Entry]:
    fitted = FittedModels(__file__, rows, random_state)
    applications = _applications(rows, random_state)
    default = split(applications.drop(columns="TARGET"), applications["TARGET"], random_state)
    annuity = split(applications.drop(columns=["TARGET", "AMT_ANNUITY"]), applications["AMT_ANNUITY"], random_state)
    return [
        mixed_types_logistic(default, fitted),
        categorical_gradient_boosting(default, fitted),
        kaggle_features_lightgbm(default, fitted),
        category_lightgbm(default, fitted),
        attribute_columns_gradient_boosting(default, fitted),
        booster_assign_lightgbm(default, fitted),
        concat_features_logistic(default, fitted),
        dummies_logistic(default, fitted),
        annuity_ridge(annuity, fitted),
        annuity_helper_lightgbm(annuity, fitted),
        bureau_lookups_forest(rows, random_state, fitted),
    ]
