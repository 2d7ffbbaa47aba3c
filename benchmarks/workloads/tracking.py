"""Tracking: will an ad click lead to an app download? Click-count lookups, LightGBM.

Data: TalkingData AdTracking fraud detection, the official 100,000-row sample
(``talkingdata/train_sample.csv``, label ``is_attributed``, 227 positives). Rows are
sorted by ``click_time``; the first 70% are the history from which the count tables are
built (clicks per ip, app, device, os, channel, per (ip, app), (ip, os), (app, channel)
pair, and distinct apps and channels per ip), the remaining clicks are split into training and
test rows. A click whose key is not in the history gets NaN counts.
"""

import pandas as pd

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, gbdt_classifier, split

TASK = "classification"
DESCRIPTION = (
    "Binary classification of ad clicks (app downloaded or not): left joins "
    "with ten click-count tables built from earlier clicks (per ip, app, device, os, "
    "channel, ip-app, ip-os, app-channel, distinct apps and channels per ip), then "
    "LightGBM on the raw categorical ids and the counts; returns the download probability."
)

HISTORY_SHARE = 0.7
INPUT_COLUMNS = ["ip", "app", "device", "os", "channel", "click_time"]


def _clicks(history: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Number of clicks per value of ``keys``: columns keys + ``<keys>_clicks``."""
    return history.groupby(keys).size().rename("_".join(keys) + "_clicks").reset_index()


def _distinct(history: pd.DataFrame, key: str, column: str) -> pd.DataFrame:
    """Number of distinct ``column`` values per ``key``: columns key, ``<key>_distinct_<column>s``."""
    return history.groupby(key)[column].nunique().rename(f"{key}_distinct_{column}s").reset_index()


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    clicks = pd.read_csv(require("talkingdata/train_sample.csv"))
    clicks = cap_rows(clicks, rows, random_state).sort_values("click_time", kind="stable")
    cut = int(len(clicks) * HISTORY_SHARE)
    history, recent = clicks.iloc[:cut], clicks.iloc[cut:]
    data = split(recent[INPUT_COLUMNS], recent["is_attributed"], random_state)

    ip_clicks = _clicks(history, ["ip"])
    app_clicks = _clicks(history, ["app"])
    device_clicks = _clicks(history, ["device"])
    os_clicks = _clicks(history, ["os"])
    channel_clicks = _clicks(history, ["channel"])
    ip_app_clicks = _clicks(history, ["ip", "app"])
    ip_os_clicks = _clicks(history, ["ip", "os"])
    app_channel_clicks = _clicks(history, ["app", "channel"])
    ip_apps = _distinct(history, "ip", "app")
    ip_channels = _distinct(history, "ip", "channel")
    tables = [ip_clicks, app_clicks, device_clicks, os_clicks, channel_clicks,
              ip_app_clicks, ip_os_clicks, app_channel_clicks, ip_apps, ip_channels]
    FEATURES = ["app", "device", "os", "channel"] + [table.columns[-1] for table in tables]

    def predict(df):
        df = df.merge(ip_clicks, on="ip", how="left")
        df = df.merge(app_clicks, on="app", how="left")
        df = df.merge(device_clicks, on="device", how="left")
        df = df.merge(os_clicks, on="os", how="left")
        df = df.merge(channel_clicks, on="channel", how="left")
        df = df.merge(ip_app_clicks, on=["ip", "app"], how="left")
        df = df.merge(ip_os_clicks, on=["ip", "os"], how="left")
        df = df.merge(app_channel_clicks, on=["app", "channel"], how="left")
        df = df.merge(ip_apps, on="ip", how="left")
        df = df.merge(ip_channels, on="ip", how="left")
        X = df[FEATURES]
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("tracking", predict, gbdt_classifier(random_state), data, TASK, DESCRIPTION)
