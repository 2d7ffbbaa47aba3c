"""What every zoo entry shares: the :class:`Entry` record, the cache of fitted models, and the
comparison that says whether two answers are the same to the bit."""

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from benchmarks.workloads.common import Split

MODELS = ("linear", "naive-bayes", "tree-ensemble")
TASKS = ("binary", "multiclass", "regression")
CACHE_VARIABLE = "WILLUMP_ZOO_CACHE"


@dataclass
class Entry:
    """One pipeline of the zoo: the plain inference function and the rows it runs on.

    ``predict`` takes a DataFrame of raw rows and is written as a user writes it; the runner
    decorates it (``willump.optimize(predict)``), so both share one source. ``by_hand`` is the same
    steps written out with the pipeline's parts (``pipe[0]``, ``pipe[-1]``), for the Pipeline text
    entries only: the speed willump should reach on the Pipeline as written.
    """

    name: str
    family: str  # the data set: tweets, sms, bbc, credit, kkbox, talkingdata
    model: str  # one of MODELS: tree ensembles are reported apart
    task: str  # one of TASKS
    style: str  # how it is written, in a few words
    predict: Callable
    data: Split
    by_hand: Callable | None = None

    def __post_init__(self):
        if self.model not in MODELS or self.task not in TASKS:
            raise ValueError(f"{self.name}: model must be one of {MODELS} and task one of {TASKS}")


class FittedModels:
    """Fitted models kept on disk between runs, so that a second run of the zoo does not train again.

    A model is stored under ``$WILLUMP_ZOO_CACHE`` (default: the temporary directory's
    ``willump-zoo``) by its name, the rows and seed of the run, the source of the module that
    trains it and the library versions: editing the module or upgrading a library trains afresh.
    """

    def __init__(self, module_file: str, rows: int | None, random_state: int):
        import lightgbm
        import sklearn

        source = Path(module_file).read_bytes()
        key = repr((rows, random_state, sklearn.__version__, lightgbm.__version__, pd.__version__, np.__version__))
        self.digest = hashlib.sha256(source + key.encode()).hexdigest()[:16]
        self.directory = Path(os.environ.get(CACHE_VARIABLE) or Path(tempfile.gettempdir()) / "willump-zoo")

    def __call__(self, name: str, train: Callable):
        """The model ``train()`` returns, from the cache when this run's inputs trained it before."""
        path = self.directory / f"{name}-{self.digest}.pkl"
        if path.is_file():
            with path.open("rb") as stored:
                return pickle.load(stored)
        model = train()
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        with partial.open("wb") as stored:
            pickle.dump(model, stored)
        partial.replace(path)
        return model


def difference(actual, expected) -> str | None:
    """Why ``actual`` is not ``expected`` to the bit (type, dtype, shape, index, values); None when it is."""
    if type(actual) is not type(expected):
        return f"type {type(actual).__name__}, expected {type(expected).__name__}"
    if isinstance(expected, (pd.Series, pd.DataFrame)):
        return _frame_difference(actual, expected)
    if sp.issparse(expected):
        if actual.format != expected.format or actual.shape != expected.shape or actual.dtype != expected.dtype:
            return f"sparse {actual.format} {actual.shape} {actual.dtype}, expected {expected.format} {expected.shape} {expected.dtype}"
        actual, expected = actual.tocsr(), expected.tocsr()
        parts = [(actual.indptr, expected.indptr), (actual.indices, expected.indices), (actual.data, expected.data)]
        return next(("sparse values differ" for a, e in parts if _array_difference(a, e)), None)
    if isinstance(expected, np.ndarray):
        return _array_difference(actual, expected)
    return None if repr(actual) == repr(expected) else f"{actual!r}, expected {expected!r}"


def _array_difference(actual: np.ndarray, expected: np.ndarray) -> str | None:
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return f"array {actual.dtype} {actual.shape}, expected {expected.dtype} {expected.shape}"
    if expected.dtype.kind == "O":
        same = all(a == e or (a != a and e != e) for a, e in zip(actual.ravel().tolist(), expected.ravel().tolist()))
    else:
        same = np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes()
    if same:
        return None
    unequal = int(np.sum(actual != expected)) if expected.dtype.kind != "O" else "some"
    return f"values differ ({unequal} of {expected.size} elements)"


def _frame_difference(actual, expected) -> str | None:
    check = pd.testing.assert_series_equal if isinstance(expected, pd.Series) else pd.testing.assert_frame_equal
    try:
        check(actual, expected, check_exact=True)
    except AssertionError as unequal:
        return " ".join(str(unequal).split())[:200]
    return _array_difference(np.asarray(actual), np.asarray(expected))
