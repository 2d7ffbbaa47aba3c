"""Plays and clicks as the KKBox and TalkingData Kaggle notebooks write them: lookups and counts.

Spellings followed: KKBox kernels look member and song attributes up by id with
``df["msno"].map(members["bd"])`` and encode the ``source_*`` strings with a dict of codes,
stacking the columns into a numpy array for LightGBM; a linear variant one-hot encodes the
sources in a ``ColumnTransformer`` after ``.assign``-ing log play counts. TalkingData kernels take
the hour from ``pd.to_datetime(df.click_time).dt.hour``, count clicks per ip and per (ip, app) on
past data (``groupby().size()``, merged back or looked up), and call LightGBM or
``HistGradientBoostingClassifier`` through a ``featurize(df)`` helper.

Data: ``kkbox/`` (the first 40% of ``train.csv``'s plays, in file order, only feed the play
counts; the rest are split) and ``talkingdata/train_sample.csv`` (the first 40% of the clicks, by
time, only feed the click counts).
"""

import numpy as np
import pandas as pd
from lightgbm import LGBMClassifier
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, cap_rows, split
from benchmarks.zoo.common import Entry, FittedModels

HISTORY_FRACTION = 0.4
SOURCES = ["source_system_tab", "source_screen_name", "source_type"]
LGBM = dict(n_estimators=100, random_state=0, verbose=-1, deterministic=True, force_row_wise=True)


def _history_and_rest(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    cut = int(len(frame) * HISTORY_FRACTION)
    return frame.iloc[:cut], frame.iloc[cut:].reset_index(drop=True)


def kkbox_map_lightgbm(data, history, members, songs, fitted) -> Entry:
    """Attributes of the member and the song by ``.map``, sources by dict codes, into a numpy array."""
    member_city, member_age = members["city"], members["bd"]
    song_length, song_language = songs["song_length"], songs["language"]
    user_plays, song_plays = history["msno"].value_counts(), history["song_id"].value_counts()
    tab_codes = {tab: code for code, tab in enumerate(sorted(history["source_system_tab"].dropna().unique()))}
    type_codes = {kind: code for code, kind in enumerate(sorted(history["source_type"].dropna().unique()))}
    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        X = np.column_stack([
            df["msno"].map(member_city).fillna(-1),
            df["msno"].map(member_age).fillna(-1),
            df["song_id"].map(song_length).fillna(-1),
            df["song_id"].map(song_language).fillna(-1),
            df["msno"].map(user_plays).fillna(0),
            df["song_id"].map(song_plays).fillna(0),
            df["source_system_tab"].map(tab_codes).fillna(-1),
            df["source_type"].map(type_codes).fillna(-1),
        ])
        return model.predict_proba(X)[:, 1]

    model = fitted("kkbox_map_lightgbm", lambda: LGBMClassifier(**LGBM).fit(predict(data.train_inputs), data.y_train))
    return Entry("kkbox_map_lightgbm", "kkbox", "tree-ensemble", "binary",
                 "np.column_stack of .map(series), .map(value_counts), .map(dict) with fillna; LGBMClassifier "
                 "on the array", predict, data)


def kkbox_onehot_logistic(data, history, fitted) -> Entry:
    """Log play counts assigned by ``.map``, then one-hot sources and scaled counts, logistic regression."""
    user_plays, song_plays = history["msno"].value_counts(), history["song_id"].value_counts()
    pipe = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        df = df.assign(
            user_plays=np.log1p(df["msno"].map(user_plays).fillna(0)),
            song_plays=np.log1p(df["song_id"].map(song_plays).fillna(0)),
        )
        return pipe.predict_proba(df)[:, 1]

    pipe = fitted("kkbox_onehot_logistic", lambda: make_pipeline(
        make_column_transformer(
            (OneHotEncoder(handle_unknown="ignore"), SOURCES),
            (StandardScaler(), ["user_plays", "song_plays"]),
        ),
        LogisticRegression(max_iter=1000),
    ).fit(predict(data.train_inputs), data.y_train))
    return Entry("kkbox_onehot_logistic", "kkbox", "linear", "binary",
                 "df.assign(log1p(.map(value_counts))); make_pipeline(make_column_transformer(OneHotEncoder, "
                 "StandardScaler), LogisticRegression)", predict, data)


def talkingdata_merge_lightgbm(data, history, fitted) -> Entry:
    """The hour of the click, clicks per ip and per (ip, app) merged back, LightGBM."""
    ip_count = history.groupby("ip").size().rename("ip_count").reset_index()
    ip_app_count = history.groupby(["ip", "app"]).size().rename("ip_app_count").reset_index()
    model = FeatureCapture()  # the function returns its features while the model is trained

    def predict(df):
        df = df.merge(ip_count, on="ip", how="left")
        df = df.merge(ip_app_count, on=["ip", "app"], how="left")
        df["hour"] = pd.to_datetime(df["click_time"]).dt.hour.astype("uint8")
        df["ip_count"] = df["ip_count"].fillna(0).astype("uint16")
        df["ip_app_count"] = df["ip_app_count"].fillna(0).astype("uint16")
        X = df[["app", "device", "os", "channel", "hour", "ip_count", "ip_app_count"]]
        return model.predict_proba(X)[:, 1]

    model = fitted("talkingdata_merge_lightgbm", lambda: LGBMClassifier(**LGBM).fit(
        predict(data.train_inputs), data.y_train))
    return Entry("talkingdata_merge_lightgbm", "talkingdata", "tree-ensemble", "binary",
                 "merge(groupby().size()) counts, pd.to_datetime(...).dt.hour, fillna().astype('uint16'); "
                 "LGBMClassifier", predict, data)


def talkingdata_helper_gradient_boosting(data, history, fitted) -> Entry:
    """Counts looked up by ``.map`` in a helper of the user's, HistGradientBoosting."""
    clicks_per_ip = history["ip"].value_counts()
    clicks_per_app = history["app"].value_counts()
    clicks_per_channel = history["channel"].value_counts()

    def featurize(df):
        X = df[["app", "device", "os", "channel"]].copy()
        X["hour"] = pd.to_datetime(df["click_time"]).dt.hour
        X["ip_clicks"] = df["ip"].map(clicks_per_ip).fillna(0)
        X["app_clicks"] = df["app"].map(clicks_per_app).fillna(0)
        X["channel_clicks"] = df["channel"].map(clicks_per_channel).fillna(0)
        return X

    model = fitted("talkingdata_hist_gradient_boosting", lambda: HistGradientBoostingClassifier(
        random_state=0).fit(featurize(data.train_inputs), data.y_train))

    def predict(df):
        X = featurize(df)
        return model.predict_proba(X)[:, 1]

    return Entry("talkingdata_helper_gradient_boosting", "talkingdata", "tree-ensemble", "binary",
                 "X = featurize(df): .dt.hour, .map(value_counts).fillna(0); HistGradientBoostingClassifier",
                 predict, data)


def build(rows: int | None = None, random_state: int = 0) -> list[Entry]:
    fitted = FittedModels(__file__, rows, random_state)
    plays = cap_rows(pd.read_csv(require("kkbox/train.csv")), rows, random_state)
    play_history, plays = _history_and_rest(plays)
    members = pd.read_csv(require("kkbox/members.csv")).drop_duplicates("msno").set_index("msno")
    songs = pd.read_csv(require("kkbox/songs.csv")).drop_duplicates("song_id").set_index("song_id")
    play_data = split(plays.drop(columns="target"), plays["target"], random_state)

    clicks = pd.read_csv(require("talkingdata/train_sample.csv")).sort_values("click_time", kind="stable")
    clicks = cap_rows(clicks, rows, random_state)
    click_history, clicks = _history_and_rest(clicks)
    click_data = split(clicks.drop(columns=["attributed_time", "is_attributed"]), clicks["is_attributed"], random_state)
    return [
        kkbox_map_lightgbm(play_data, play_history, members, songs, fitted),
        kkbox_onehot_logistic(play_data, play_history, fitted),
        talkingdata_merge_lightgbm(click_data, click_history, fitted),
        talkingdata_helper_gradient_boosting(click_data, click_history, fitted),
    ]
