"""Remote feature tables: music and tracking with their tables in a redis-server (issue 6).

``python -m benchmarks.remote [--rows N] [--out DIR]``

Each workload's tables (the same rows its in-memory version joins) are written to a
redis-server started here on a free loopback port, persistence off. The pipeline is
written with ``RedisTable.lookup``, one lookup per table, and a LightGBM model is
trained on its features. Over the test split, one row per call, the rows in order,
these run side by side (each call of a row by every configuration, the order
rotating from row to row):

- ``python``: the undecorated function;
- ``willump``: optimized, no cache (lookups of different IFVs side by side);
- ``willump-prediction``: end-to-end caching of whole results (``cache="prediction"``);
- ``willump-features``: feature-level caching (``cache_size``);
- ``willump-features-fit``: feature-level caching after ``fit`` (cascades).

``music-stream`` runs music's pipeline over KKBox's own test set (``test.csv``, unlabelled,
in file order): the labelled test split is too short and shuffled for keys to come again
as they do in serving (see :func:`music_stream`). ``--only NAME`` runs one of the three.

Reported: remote keys fetched and the reduction against ``python``; mean, p50 and p99
latency and the mean's ratio. Every configuration first answers 20 training rows (its
first calls load compiled code); then its caches are emptied: they start empty, as in the paper.
"""

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import redis
from sklearn.metrics import roc_auc_score

import willump
from benchmarks.workloads import WORKLOADS
from benchmarks.workloads.common import gbdt_classifier
from benchmarks.workloads.music import SOURCE_COLUMNS
from benchmarks.workloads.music import _read as read_kkbox

CACHE_SIZE = 100_000


def start_redis() -> tuple[subprocess.Popen, int]:
    """A redis-server on a free loopback port, persistence off: (process, port)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server not found (Debian: apt-get install -y redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--loglevel", "warning"], stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return process, port
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"redis-server did not start on port {port}")


def _closure(function) -> dict:
    """The in-memory workload's tables and constants, as its ``predict`` holds them."""
    return {n: c.cell_contents for n, c in zip(function.__code__.co_freevars, function.__closure__)}


def _remote(client, frame: pd.DataFrame, name: str, key: str) -> willump.RedisTable:
    table = willump.RedisTable(client, name, key=key)
    table.put(frame)
    return table


def music(client, rows):
    workload = WORKLOADS["music"].build(rows)
    held = _closure(workload.predict)
    songs_frame = held["songs"][["song_id", "song_length", "genre_ids", "composer", "lyricist", "language",
                                 "artist_name"]]
    members = _remote(client, held["members"], "members", "msno")
    songs = _remote(client, songs_frame, "songs", "song_id")
    song_extra = _remote(client, held["song_extra"], "song_extra", "song_id")
    user_stats = _remote(client, held["user_stats"], "user_stats", "msno")
    song_stats = _remote(client, held["song_stats"], "song_stats", "song_id")
    artist_stats = _remote(client, held["artist_stats"], "artist_stats", "artist_name")
    song_numbers = ["song_length", "genre_ids", "composer", "lyricist", "language"]
    sources = ["source_system_tab", "source_screen_name", "source_type"]

    def predict(df):
        member = members.lookup(df["msno"])
        user = user_stats.lookup(df["msno"])
        song = songs.lookup(df["song_id"])
        extra = song_extra.lookup(df["song_id"])
        plays = song_stats.lookup(df["song_id"])
        artist = artist_stats.lookup(song["artist_name"])
        X = np.hstack([
            df[sources].to_numpy(dtype=float),
            member.to_numpy(dtype=float),
            user.to_numpy(dtype=float),
            song[song_numbers].to_numpy(dtype=float),
            artist.to_numpy(dtype=float),
            extra.to_numpy(dtype=float),
            plays.to_numpy(dtype=float),
        ])
        return model.predict_proba(X)[:, 1]

    model = None
    return workload, predict, lambda fitted: _set_model(predict, fitted)


def tracking(client, rows):
    workload = WORKLOADS["tracking"].build(rows)
    held = _closure(workload.predict)

    def paired(frame, first, second, name):
        keyed = frame.assign(**{name: frame[first] * 1000 + frame[second]})
        return keyed.drop(columns=[first, second])

    ip = _remote(client, held["ip_clicks"], "ip", "ip")
    app = _remote(client, held["app_clicks"], "app", "app")
    device = _remote(client, held["device_clicks"], "device", "device")
    os_ = _remote(client, held["os_clicks"], "os", "os")
    channel = _remote(client, held["channel_clicks"], "channel", "channel")
    ip_app = _remote(client, paired(held["ip_app_clicks"], "ip", "app", "ip_app"), "ip_app", "ip_app")
    ip_os = _remote(client, paired(held["ip_os_clicks"], "ip", "os", "ip_os"), "ip_os", "ip_os")
    app_channel = _remote(client, paired(held["app_channel_clicks"], "app", "channel", "app_channel"),
                          "app_channel", "app_channel")
    ip_apps = _remote(client, held["ip_apps"], "ip_apps", "ip")
    ip_channels = _remote(client, held["ip_channels"], "ip_channels", "ip")

    def predict(df):
        clicks = ip.lookup(df["ip"])
        apps = app.lookup(df["app"])
        devices = device.lookup(df["device"])
        systems = os_.lookup(df["os"])
        channels = channel.lookup(df["channel"])
        ip_app_clicks = ip_app.lookup(df["ip"] * 1000 + df["app"])
        ip_os_clicks = ip_os.lookup(df["ip"] * 1000 + df["os"])
        app_channel_clicks = app_channel.lookup(df["app"] * 1000 + df["channel"])
        distinct_apps = ip_apps.lookup(df["ip"])
        distinct_channels = ip_channels.lookup(df["ip"])
        X = np.hstack([
            df[["app", "device", "os", "channel"]].to_numpy(dtype=float),
            clicks.to_numpy(dtype=float), apps.to_numpy(dtype=float), devices.to_numpy(dtype=float),
            systems.to_numpy(dtype=float), channels.to_numpy(dtype=float),
            ip_app_clicks.to_numpy(dtype=float), ip_os_clicks.to_numpy(dtype=float),
            app_channel_clicks.to_numpy(dtype=float), distinct_apps.to_numpy(dtype=float),
            distinct_channels.to_numpy(dtype=float),
        ])
        return model.predict_proba(X)[:, 1]

    model = None
    return workload, predict, lambda fitted: _set_model(predict, fitted)


def _set_model(predict, model) -> None:
    predict.__closure__[predict.__code__.co_freevars.index("model")].cell_contents = model


class _Capture:
    """Stands for the model while the training features are computed."""

    def predict_proba(self, X):
        self.X = X
        return np.zeros((len(X), 2))


def _trained(build, client, rows):
    """The workload, its Redis pipeline with a LightGBM model trained on its features, and its tables."""
    workload, predict, set_model = build(client, rows)
    capture = _Capture()
    set_model(capture)
    predict(workload.train_inputs)
    set_model(gbdt_classifier(0).fit(capture.X, workload.y_train))
    tables = [v for v in _closure(predict).values() if isinstance(v, willump.RedisTable)]
    return workload, predict, tables


def _side_by_side(configurations: dict, inputs: pd.DataFrame, warm_up: pd.DataFrame, tables) -> dict:
    """Each configuration (``python`` the undecorated one) called on each row of ``inputs`` in turn.

    Each first answers 20 rows of ``warm_up`` (its first calls load compiled code), then its
    caches are emptied: they start empty, as in the paper. The order rotates from row to row.
    """
    python = configurations["python"]
    for function in configurations.values():
        for position in range(20):
            function(warm_up.iloc[[position]])
        if function is not python:
            function.clear_cache()
            function.reset_stats()
    before = sum(t.remote_keys for t in tables)
    names = list(configurations)
    seconds = {n: [] for n in names}
    outputs = {n: [] for n in names}
    for position in range(len(inputs)):
        row = inputs.iloc[[position]]
        shift = position % len(names)
        for n in names[shift:] + names[:shift]:
            started = time.perf_counter()
            outputs[n].append(configurations[n](row)[0])
            seconds[n].append(time.perf_counter() - started)
    fetched = {n: f.stats["remote_keys"] for n, f in configurations.items() if f is not python}
    fetched["python"] = sum(t.remote_keys for t in tables) - before - sum(fetched.values())
    return {"seconds": seconds, "outputs": outputs, "fetched": fetched}


def _report(configurations: dict, run: dict, y=None) -> dict:
    """Per configuration: remote keys and their reduction, latency and its ratio, same answers, ROC AUC."""
    seconds, outputs, fetched = run["seconds"], run["outputs"], run["fetched"]
    exact = np.asarray(outputs["python"])
    report = {}
    for n, function in configurations.items():
        times = np.asarray(seconds[n]) * 1e3
        report[n] = {
            "remote_keys": int(fetched[n]),
            "remote_keys_reduction": 1 - fetched[n] / fetched["python"],
            "mean_ms": float(times.mean()), "p50_ms": float(np.median(times)), "p99_ms": float(np.percentile(times, 99)),
            "mean_ratio": float(np.mean(seconds["python"]) / np.mean(seconds[n])),
            "p99_ratio": float(np.percentile(seconds["python"], 99) / np.percentile(seconds[n], 99)),
            "same_answers": bool(np.array_equal(np.asarray(outputs[n]), exact)),
            "test_roc_auc": float(roc_auc_score(y, outputs[n])) if y is not None else None,
            "stats": function.stats if n != "python" else None,
        }
    return report


def measure(name: str, build, client, rows) -> dict:
    workload, predict, tables = _trained(build, client, rows)
    fitted = willump.optimize(predict, cache_size=CACHE_SIZE)
    fitted.fit(workload.train_inputs, y=workload.y_train,
               validation=(workload.valid_inputs, workload.y_valid), progress=False)
    configurations = {
        "python": predict,
        "willump": willump.optimize(predict),
        "willump-prediction": willump.optimize(predict, cache_size=CACHE_SIZE, cache="prediction"),
        "willump-features": willump.optimize(predict, cache_size=CACHE_SIZE),
        "willump-features-fit": fitted,
    }
    run = _side_by_side(configurations, workload.test_inputs, workload.train_inputs, tables)
    summary = fitted.explain().attrs["summary"]
    return {"workload": name, "rows": len(workload.test_inputs),
            "cascades": summary["cascades"],
            "cascade_attempts": summary.get("cascade_attempts"),
            "positives": {"train": int(np.sum(workload.y_train)), "validation": int(np.sum(workload.y_valid)),
                          "test": int(np.sum(workload.y_test))},
            "configurations": _report(configurations, run, workload.y_test)}


def music_stream(client, rows: int | None) -> dict:
    """Caching over KKBox's own test set (``test.csv``, no labels), one play per call in file order.

    The labelled test split is a shuffled quarter of 12,000 plays, where most users and songs
    come once; a serving stream is longer and in time order, as in the paper's runs. The
    model and tables are the labelled workload's; ``source_*`` codes use its categories.
    With ``CACHE_SIZE`` above the distinct keys, the feature caches' misses are those distinct
    keys: the fewest any cache can fetch from this stream.
    """
    workload, predict, tables = _trained(music, client, None)
    plays, served = read_kkbox("train.csv"), read_kkbox("test.csv")
    served = served[served["id"].notna()]  # the sample's file pads its 4,999 plays with empty rows
    if rows is not None:
        served = served.head(rows)
    inputs = served[["msno", "song_id"]].copy()
    for column in SOURCE_COLUMNS:
        categories = pd.Index(plays[column].dropna().unique()).sort_values()
        inputs[column] = categories.get_indexer(served[column]).astype("int64")  # -1: missing or unseen
    configurations = {
        "python": predict,
        "willump-prediction": willump.optimize(predict, cache_size=CACHE_SIZE, cache="prediction"),
        "willump-features": willump.optimize(predict, cache_size=CACHE_SIZE),
    }
    run = _side_by_side(configurations, inputs.reset_index(drop=True), workload.train_inputs, tables)
    return {"workload": "music-stream", "rows": len(inputs), "cascades": "not used (no labels)",
            "positives": None, "configurations": _report(configurations, run)}


RUNS = {
    "music": lambda client, args: measure("music", music, client, args.rows),
    "tracking": lambda client, args: measure("tracking", tracking, client, args.rows),
    "music-stream": lambda client, args: music_stream(client, args.stream_rows),
}


def table(result: dict) -> str:
    lines = [f"== {result['workload']} (Redis on loopback, {result['rows']} single-row calls; cascades {result['cascades']})",
             f"{'config':22} {'remote keys':>11} {'reduction':>9} {'mean ms':>8} {'p50 ms':>7} {'p99 ms':>7} "
             f"{'mean x':>7} {'p99 x':>6} {'test AUC':>8} exact"]
    for n, c in result["configurations"].items():
        lines.append(f"{n:22} {c['remote_keys']:>11,} {c['remote_keys_reduction']:>9.1%} {c['mean_ms']:>8.3f} "
                     f"{c['p50_ms']:>7.3f} {c['p99_ms']:>7.3f} {c['mean_ratio']:>6.2f}x {c['p99_ratio']:>5.2f}x "
                     f"{'-' if c['test_roc_auc'] is None else format(c['test_roc_auc'], '.4f'):>8} {c['same_answers']}")
    lines.append(f"positives (label 1): {result['positives']}")
    for attempt in result.get("cascade_attempts") or []:
        lines.append(f"cascade tried on {attempt['ifvs']}: {attempt['outcome']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.remote", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows of each data set to use (default: the workload's)")
    parser.add_argument("--stream-rows", type=int, default=None,
                        help="plays of KKBox's test.csv for the music-stream run (default: all 4,999)")
    parser.add_argument("--only", choices=sorted(RUNS), action="append", help="run only these (repeatable)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    process, port = start_redis()
    try:
        client = redis.Redis(port=port)
        for name in args.only or RUNS:
            client.flushdb()
            result = RUNS[name](client, args)
            print(table(result), flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"remote_{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    finally:
        process.terminate()
        process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
