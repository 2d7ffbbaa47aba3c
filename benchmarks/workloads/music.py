"""Music: will a user listen to a song again? Lookups into user, song and artist tables, LightGBM.

Data: WSDM 2018 KKBox (``kkbox/``): ``train.csv`` plays with their ``target``, joined
with ``members.csv``, ``songs.csv`` and ``song_extra_info.csv``. Only about 14% of the
played songs are in ``songs.csv`` (8% in ``song_extra_info.csv``): missing lookups give
NaN features, which LightGBM takes as they are.

Per-user, per-song and per-artist play counts and target means are computed from the first
40% of the plays (in file order), which are not used otherwise. String columns are encoded
as integer codes at build time, in the side tables and in the input frames (the
``source_*`` columns), so the pipeline itself only joins and selects columns.
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
    "Binary classification of KKBox plays (replayed within a month or not): "
    "left joins with member, song, song-extra, user, song and artist tables, then "
    "LightGBM on the selected columns; returns the probability of a replay."
)

HISTORY_FRACTION = 0.4  # the first plays, in file order, only feed the statistics tables
SOURCE_COLUMNS = ["source_system_tab", "source_screen_name", "source_type"]


def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(require(f"kkbox/{name}"), encoding="utf-8-sig")


def _target_statistics(plays: pd.DataFrame, key: str, prefix: str) -> pd.DataFrame:
    """Plays and mean target per value of ``key``: columns key, <prefix>_plays, <prefix>_target_mean."""
    grouped = plays.groupby(key)["target"]
    return pd.DataFrame(
        {f"{prefix}_plays": grouped.size(), f"{prefix}_target_mean": grouped.mean()}
    ).reset_index()


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    plays = cap_rows(_read("train.csv"), rows, random_state)
    plays = encode_categories(plays, SOURCE_COLUMNS)
    # The per-user/song/artist statistics come from earlier plays than those the model learns
    # from: computed on its own training rows, they would leak each row's label into its features.
    history = plays.iloc[: int(len(plays) * HISTORY_FRACTION)]
    plays = plays.iloc[len(history):]
    data = split(plays[["msno", "song_id"] + SOURCE_COLUMNS], plays["target"], random_state)

    members = encode_categories(_read("members.csv").drop_duplicates("msno"), ["gender"])
    songs = _read("songs.csv").drop_duplicates("song_id")
    songs = encode_categories(songs, ["genre_ids", "composer", "lyricist"])
    extra = _read("song_extra_info.csv").drop_duplicates("song_id")
    isrc = extra["isrc"]
    song_extra = encode_categories(
        pd.DataFrame(
            {
                "song_id": extra["song_id"],
                "isrc_country": isrc.str[:2],
                "isrc_year": pd.to_numeric(isrc.str[5:7], errors="coerce"),
            }
        ),
        ["isrc_country"],
    )

    user_stats = _target_statistics(history, "msno", "user")
    song_stats = _target_statistics(history, "song_id", "song")
    artist_plays = history.merge(songs[["song_id", "artist_name"]], on="song_id", how="inner")
    artist_stats = _target_statistics(artist_plays, "artist_name", "artist")

    FEATURES = SOURCE_COLUMNS + [
        "city", "bd", "gender", "registered_via", "registration_init_time", "expiration_date",
        "song_length", "genre_ids", "composer", "lyricist", "language",
        "isrc_country", "isrc_year",
        "user_plays", "user_target_mean",
        "song_plays", "song_target_mean",
        "artist_plays", "artist_target_mean",
    ]

    def predict(df):
        df = df.merge(members, on="msno", how="left")
        df = df.merge(songs, on="song_id", how="left")
        df = df.merge(song_extra, on="song_id", how="left")
        df = df.merge(user_stats, on="msno", how="left")
        df = df.merge(song_stats, on="song_id", how="left")
        df = df.merge(artist_stats, on="artist_name", how="left")
        X = df[FEATURES]
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("music", predict, gbdt_classifier(random_state), data, TASK, DESCRIPTION)
