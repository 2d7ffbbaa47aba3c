"""``willump.optimize``: the decorator and the function object it returns."""

import functools
import inspect
import pickle
import threading
import warnings

import numpy as np
import pandas as pd

from willump import persistence
from willump.compile.forest import shared_builds
from willump.compile.parallel import Workers, default_workers
from willump.compile.sites import carried_builds
from willump.errors import WillumpWarning, warn
from willump.runtime import cascade, drift, topk
from willump.runtime.topk import DEFAULT_C_K, DEFAULT_MIN_FRACTION
from willump.optimizations.fit import Fitted
from willump.optimizations.fit import fit as fit_optimizations
from willump.optimizations.selection import DEFAULT_GAMMA
from willump.runtime.joins import NotSeparable
from willump.runtime.rows import batch_length, first_row_count
from willump.graph.build import build_plan
from willump.graph.recognize import Resolver
from willump.graph.source import read_function
from willump.runtime.executor import CallsExecutor, GraphExecutor
from willump.runtime.caches import MISSING, LookupCaches, PredictionCache
from willump.runtime.calls import Stats, end_call, name_plain_calls, start_call
from willump.runtime.concurrent import ConcurrentFeatures, reads_remote_tables
from willump.runtime.feature_rows import FeatureRows, keyed_ifvs

_DEFAULT_OPTIONS = {
    "strict": False,  # raise instead of warning when a line runs as plain Python
    "compile": True,  # answer supported calls with compiled kernels
    "workers": None,  # threads for compiled kernels; None: the machine's cores
    "cache_size": None,  # rows each IFV's and each remote table's cache holds; None: no caching
    "cache": "features",  # what is cached: "features" (table rows by lookup key) or "prediction" (whole results)
}


def optimize(func=None, /, **options):
    """Optimize an inference function: ``@willump.optimize`` or ``@willump.optimize(**options)``.

    The function takes raw inputs, computes features and ends in a call to a
    model's ``predict``, ``predict_proba``, ``decision_function`` or ``score_samples``. The result
    behaves as the function and returns exactly what it returns.

    Options:
        strict: raise ``TypeError`` instead of emitting a ``WillumpWarning``
            when part of the function is not understood (default False).
        compile: answer supported calls (scikit-learn text vectorizers, linear
            models, ``scipy.sparse.hstack``) with compiled kernels that return
            the same values (default True); ``explain_compilation()`` lists them.
        workers: threads compiled kernels may use (default: the cores this
            process may run on; one in a Dask worker's process, where Dask runs
            a task per thread). Batches are split across rows; the answer is
            the same for any number of workers.
        cache_size: keep up to this many rows of each IFV whose rows depend
            only on a few input columns (table lookups, read from the function's
            text), keyed by those columns' values, so a row seen before is not
            computed again; and up to this many rows of each remote table the IFVs
            look up, keyed by the lookup key, so a lookup fetches only the keys
            it has not seen (answers stay exactly the undecorated ones).
            Default None: no cache. ``explain_caching()`` says what is cached per
            IFV; ``stats`` counts hits, misses and remote keys; ``clear_cache()``
            empties it.
        cache: ``"features"`` (default, per table as above) or ``"prediction"``:
            whole results per batch, keyed by every column of its rows, so a
            single-row call's per row, up to ``cache_size`` results (end-to-end
            caching, for comparison; a result is reused for the same batch,
            held the same way, only: a row's floats depend on the batch they are
            computed in).
    """
    unknown = sorted(set(options) - set(_DEFAULT_OPTIONS))
    if unknown:
        raise TypeError(
            f"willump.optimize() got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(_DEFAULT_OPTIONS))}"
        )
    _check_cache_options(options)
    if func is None:
        return functools.partial(OptimizedFunction, **options)
    return OptimizedFunction(func, **options)


def _same_version(old: tuple, new: tuple) -> bool:
    """Are two ``_state_version``s the same fitted state (the same object, threshold and mode)?"""
    return old[0] is new[0] and old[1:] == new[1:]


def _check_cache_options(options: dict) -> None:
    size = options.get("cache_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1):
        raise ValueError(f"cache_size must be a positive number of rows, or None for no cache; got {size!r}")
    kind = options.get("cache", "features")
    if kind not in ("features", "prediction"):
        raise ValueError(f'cache must be "features" (table rows by lookup key) or "prediction" (whole results); got {kind!r}')
    if kind == "prediction" and size is None:
        raise ValueError('cache="prediction" needs cache_size: the number of rows to keep')


class OptimizedFunction:
    """A drop-in replacement for an inference function.

    Attributes:
        py_func: the original, undecorated function.
        graph: the transformation graph willump built from it.
    """

    def __init__(self, func, **options):
        self._setup(read_function(func), options)  # TypeError for lambdas, builtins, missing source

    def _setup(self, source, options: dict, carried=()) -> None:
        """``_build`` where the kernels reading one model build its arrays once, and ``carried`` ones
        (a saved function's, ``persistence.save``) are not built again."""
        with shared_builds(carried):
            self._build(source, options)

    def _build(self, source, options: dict) -> None:
        """Build the graph and its executor from the function's parsed source."""
        func = source.func
        functools.update_wrapper(self, func)
        self.py_func = func
        self._source = source
        _check_cache_options(options)
        self.options = {**_DEFAULT_OPTIONS, **options}
        plan = build_plan(source)
        self._unfitted = plan.unfitted  # composites to read as their steps once they are fitted
        self._setup_lock = threading.Lock()
        self.graph = plan.graph
        self._executor = None
        self._calls = None  # without a graph: the function as written, its calls through compiled kernels
        if not self.graph.optimizable and self.options["compile"]:
            resolver = Resolver(plan.source.func, plan.source.definition, plan.names)
            self._calls = CallsExecutor.for_function(plan.source, resolver,
                                                     Workers(self.options["workers"] or default_workers()))
        self._report(self.graph)
        self._stats = Stats()
        self._features = None  # the executor computing remote IFVs side by side, when there are two
        self._remote = []  # per IFV: does its generator read a table in Redis
        size, kind = self.options["cache_size"], self.options["cache"]
        self._lookup_caches = LookupCaches(size) if size and kind == "features" else None
        self._predictions = PredictionCache(size) if size and kind == "prediction" else None
        self._feature_rows = None  # with cache_size: the rows of the IFVs whose rows depend on a few columns
        self._not_keyed = {}  # IFV index -> why its rows are not cached
        if self.graph.optimizable:
            resolver = Resolver(plan.source.func, plan.source.definition, plan.names)  # (helpers read in)
            workers = Workers(self.options["workers"] or default_workers())
            self._executor = GraphExecutor(
                plan, plan.source, compile=self.options["compile"], resolver=resolver, workers=workers
            )
            self._remote = [reads_remote_tables(ifv, resolver) for ifv in self.graph.ifvs]
            if sum(self._remote) >= 2:
                self._features = ConcurrentFeatures(self._executor, {i for i, r in enumerate(self._remote) if r})
            if self._lookup_caches is not None:
                keyed, self._not_keyed = keyed_ifvs(self.graph, self._executor.parameters, resolver)
                if keyed:
                    values = self._features.chosen_values if self._features is not None else self._executor.values
                    self._feature_rows = FeatureRows(keyed, self._executor, values, size, resolver)
        self._fitted = None
        self._warned_other_objects = None  # the fitted state a call with other objects was warned of
        self._warned_model_changed = None  # the fitted state a call with a changed model was warned of
        self._ranking_checked = False  # whether top_k checked that the function's result is ordered as it ranks
        self._shipped_as = None  # (state version, identity, payload) a Dask worker's instance was built from

    def _report(self, graph) -> None:
        problems = list(graph.notes)
        if graph.unmodified_reason:
            calls = "" if self._calls is None else (
                f", except that its calls ({len(self._calls.sites)}) go through compiled kernels where one answers")
            problems.append(f"{graph.unmodified_reason}; the whole function runs unmodified{calls}")
        if not problems:
            return
        message = f"willump: in {self.py_func.__qualname__} ({self.py_func.__code__.co_filename}): " + "; ".join(
            problems
        )
        if self.options["strict"]:
            raise TypeError(message)
        warn(message)

    def _read_composites_once_fitted(self) -> None:
        """Build the graph again when a scikit-learn composite that was not fitted at decoration
        (and so was left as one call) has been fitted since: now its steps can be read."""
        if self._unfitted is not None and self._unfitted.fitted_since():
            with self._setup_lock:
                if self._unfitted is not None and self._unfitted.fitted_since():
                    self._setup(self._source, self.options)

    def __call__(self, /, *args, **kwargs):
        self._read_composites_once_fitted()
        call = start_call(self._stats, self._lookup_caches)  # what this call's lookups count and reuse
        try:
            result = self._result(args, kwargs)
        except BaseException:
            name_plain_calls(raised=True)  # (at this call's line, not at the next call's)
            raise
        finally:
            end_call(call)
        name_plain_calls()
        return result

    def _result(self, args: tuple, kwargs: dict):
        """The call's result: as written without a graph; the guards, then the graph's answer."""
        if self._executor is None:
            self._count_exact((*args, *kwargs.values()))
            return (self._calls or self.py_func)(*args, **kwargs)
        if (self._fitted is None and self._features is None and self._predictions is None
                and self._feature_rows is None):
            self._count_exact((*args, *kwargs.values()))
            return self._executor(*args, **kwargs)
        arguments = self._executor.arguments(args, kwargs)
        fired = self._executor.guard(arguments)  # a leading guard ends the call as written
        if fired is not None:
            self._count_exact(arguments.values())
            return fired.result
        if self._predictions is not None:  # (cascaded results are not reused once serving is exact)
            return self._predictions.serve(arguments, self._answer, variant=self._fitted_exactly())
        return self._answer(arguments)

    def _answer(self, arguments: dict):
        """The result for bound arguments: cascaded after fit; remote IFVs side by side when there are two."""
        try:
            if (self._fitted is not None and self._fitted.cascading and not drift.fell_back(self._fitted)
                    and self._serves_fitted(arguments)):
                result = _unless_raised(cascade.serve, self._features or self._executor, self._fitted, arguments,
                                        self._stats, self._feature_rows)
                if result is not MISSING:
                    return result
            if self._feature_rows is not None:
                result = self._feature_rows.serve(arguments)
                if result is not MISSING:
                    self._count_exact(arguments.values())
                    return result
            if self._features is not None:
                result = self._features.run(arguments)
                self._count_exact(arguments.values())
                return result
        except NotSeparable:
            pass  # this input's joins cannot be split: the exact path runs them as written
        self._count_exact(arguments.values())
        return self._executor.run(arguments)

    def _serves_fitted(self, arguments: dict) -> bool:
        """Whether ``fit``'s cascade and filter hold for these arguments (their row arguments agree, and
        ``Fitted.serves``); once per fit, a warning when a call gives other objects than fit was given,
        and is answered exactly."""
        fitted = self._fitted
        if not fitted.rows_agree(arguments):
            return False  # (answered as written: it raises what the function raises)
        if not fitted.model_holds(self._executor.current_model(arguments)):
            if self._warned_model_changed is not fitted:
                self._warned_model_changed = fitted
                warn(f"willump: the model {self.py_func.__qualname__} calls was refitted or replaced since fit: the "
                     "small model and the top-K filter fit trained for it no longer stand for it, and calls are answered "
                     "exactly; fit again to cascade")
            return False
        if fitted.serves(arguments, self._executor.defaults() if fitted.at_default else {}):
            return True
        if self._warned_other_objects is not fitted:
            self._warned_other_objects = fitted
            names = ", ".join(sorted([*fitted.fixed, *fitted.at_default]))
            left = ", ".join(fitted.to_adopt)
            behind = (f"; the objects fit was given as {left} did not travel with the pickle (only a method saved "
                      "or pickled with its object takes its copy)") if left else ""
            warn(f"willump: {self.py_func.__qualname__} was fitted with other values of {names} than this call's "
                 f"(another object of the class, another model){behind}: such calls are answered exactly; fit it "
                 "for them to cascade")
        return False

    def _fitted_on(self, instance) -> bool:
        """Whether ``fit`` was given ``instance`` as the first argument (a method's ``self``)."""
        return self._fitted is not None and self._fitted.fitted_on(self._first_parameter(), instance)

    def _adopt(self, instance) -> None:
        """Serve what ``fit`` learned for ``instance``, the unpickled copy of the object it was fitted on."""
        if self._fitted is not None:
            self._fitted.adopt(self._first_parameter(), instance)

    def _first_parameter(self) -> str:
        """The name a method's object is bound to (the executor's first parameter; fit needs an executor)."""
        return self._executor.parameters[0] if self._executor is not None and self._executor.parameters else ""

    def _fitted_exactly(self) -> bool:
        """Has the drift guard switched this fitted function to exact answers?"""
        return self._fitted is not None and drift.fell_back(self._fitted)

    def _count_exact(self, values) -> None:
        """Count the call's rows (the first argument's that has rows; positional arguments are the
        first parameters) as answered by the full model (every row before fit)."""
        rows = first_row_count(values) or 0
        self._stats.count(rows=rows, full=rows)

    # --- statistically-aware optimizations -------------------------------------------------

    def fit(self, *inputs, y=None, validation=None, validation_fraction=0.25, metric=None, accuracy_loss=0.001,
            top_k_precision=0.95, cascades=True, top_k=True, small_model=None, random_state=0, progress=True,
            gamma=DEFAULT_GAMMA, costs=None, check_speed=True, calls="both", on_drift="warn",
            drift_window=drift.DEFAULT_WINDOW):
        """Learn cascades and top-K filter models from labelled rows; returns this function.

        ``inputs`` are the function's arguments for the training rows and ``y`` their labels.
        ``validation=(inputs, y)`` are rows the user's model was not trained on; without it
        ``validation_fraction`` of the given rows are held out. The cascade threshold keeps
        ``metric`` (default: accuracy for labels, ROC AUC for scores) within ``accuracy_loss``
        of the full model on the validation rows. The top-K filter keeps, for each query shape,
        enough candidates that a filtered ``top_k`` returns at least ``top_k_precision`` of the
        exact top-K in 99% of batches drawn from the validation rows. ``gamma`` is Algorithm 1's
        stopping factor.

        ``fit`` times things and keeps an optimization only when it is faster. For decisions
        that do not depend on the machine's speed: ``costs={ifv name: seconds per row}`` replaces
        the measured cost of each IFV (Algorithm 1's input; names as in ``explain()``), and
        ``check_speed=False`` turns cascades and the top-K filter on whenever their accuracy and
        precision targets hold, without timing them against the exact path. A cascade is timed on
        the calls the function will serve, ``calls``: ``"both"`` (batches and single rows, the
        default), ``"batches"`` (a batch scoring job, e.g. on Dask: a cascade that pays on batches
        is kept even if single rows would be slower) or ``"rows"`` (one row per call).

        While a cascade serves, a guard compares the last ``drift_window`` rows served with the
        validation rows: the share the small model answers and the distribution of its confidence
        (``willump.runtime.drift`` has the tests and their bound). On drift it warns once
        (``WillumpWarning``) and counts ``drift_alarms`` in ``stats``; ``on_drift="exact"`` also
        serves exactly from then on (calls and ``top_k``) until ``fit`` is called again, and
        ``on_drift=None`` turns the guard off. ``explain()`` shows its state.
        A guard the function starts with (``if len(df) == 0: return ...``) that ends the call for
        the training or validation rows is a ValueError: fit needs the model's output for them.
        """
        if y is None:  # (scikit-learn's fit(X, y) passes it by position: here those are the function's arguments)
            raise TypeError(f"fit takes the labels by keyword: {self.py_func.__name__}.fit(<the function's arguments "
                            f"for the training rows>, y=labels); the {len(inputs)} given by position are the function's own")
        self._read_composites_once_fitted()
        if self._executor is None:
            raise ValueError(self.graph.refusal("fit"))
        self._refuse_guarded("fit", "the training rows", self._executor.arguments(inputs, {}))
        given = _validation_inputs(validation)
        if given is not None:
            self._refuse_guarded("fit", "the validation rows", self._executor.arguments(given, {}))
        self._fitted = fit_optimizations(
            self._executor, inputs, y, validation=validation, validation_fraction=validation_fraction,
            metric=metric, accuracy_loss=accuracy_loss, top_k_precision=top_k_precision, cascades_wanted=cascades, top_k_wanted=top_k,
            small_model=small_model, random_state=random_state, progress=progress, gamma=gamma, costs=costs,
            check_speed=check_speed, calls=calls, on_drift=on_drift, drift_window=drift_window,
        )
        name_plain_calls()  # (met while fit ran the function: said here, as a call would)
        self._stats.reset()
        return self

    def _check_ranking(self, arguments: dict) -> None:
        """Once (a batch of rows the model scores apart), warn when the function returns one number per row in
        another order than the model's score, which top_k ranks by: its best rows are not the function's."""
        if self._ranking_checked:
            return
        try:
            scores = topk.model_scores(self._executor, arguments, self._feature_rows)
        except NotSeparable:
            return  # (these inputs' joins: top_k says so)
        if len(np.unique(scores)) < 2:
            return
        self._ranking_checked = True
        if not topk.ordered_as(self._executor.run(arguments), scores):
            warn(f"willump: top_k ranks rows by the model's score (a classifier's positive-class probability, a "
                 f"regressor's prediction), highest first, but {self.py_func.__qualname__} returns numbers in another "
                 "order (p[:, 0], 1 - p, p * weight...): the rows it gives are not those with the highest results; "
                 "return the positive class's probability, or rank what the function returns yourself")

    def _refuse_guarded(self, action: str, rows: str, arguments: dict) -> None:
        """ValueError when a leading guard ends the call for ``arguments``: ``action`` needs the
        model's output for the rows (what the guard raises, it raises)."""
        fired = self._executor.guard(arguments)
        if fired is not None:
            raise ValueError(
                f"{action} needs the model's output for {rows}, but the guard on line {fired.line} of "
                f"{self.py_func.__qualname__} ends the call for them without calling the model: pass rows it lets through"
            )

    def set_threshold(self, threshold):
        """Cascade at ``threshold`` instead of the threshold ``fit`` chose; None turns cascades off.

        Rows the small model is at least ``threshold`` sure of take its answer, the others the
        full model's: 0 sends no row to the full model, 1 only the rows the small model is not
        certain of. For exploring speed against accuracy (the paper's Figure 7): ``fit`` checked
        only its own threshold against ``accuracy_loss``. Returns this function.
        """
        if self._fitted is None:
            raise ValueError("set_threshold needs the small model fit trains: call fit() first")
        self._fitted.set_threshold(threshold)
        return self

    def top_k(self, *inputs, k, c_k=DEFAULT_C_K, min_fraction=DEFAULT_MIN_FRACTION, return_scores=False):
        """Positions (np.ndarray) of the ``k`` best-scoring rows, best first (ties by position).

        Score: positive-class probability for binary classifiers, predicted value for regressors,
        whatever the function returns (one that returns numbers in another order is warned once).
        Before ``fit`` the answer is exact. After ``fit``, when the filter is on, a filter model
        keeps the candidates and only those are ranked by the full model: as many as ``fit``
        validated for this query's batch size and k/n to hold ``top_k_precision`` of the exact
        top-K, and at least max(c_k * k, min_fraction * n) (the paper's floors); a query unlike
        any validated (a batch smaller, or k/n larger) is answered exactly. ``k`` larger than
        the batch is clamped to its size. ``return_scores=True`` returns (positions, their
        scores by the full model).
        An empty batch has no positions; a guard the function starts with that ends the call
        for the rows is a ValueError.
        """
        self._read_composites_once_fitted()
        if self._executor is None:
            raise ValueError(self.graph.refusal("top_k"))
        if self._executor.model_split_problem:
            raise ValueError(f"top_k cannot score rows: {self._executor.model_split_problem}")
        k = topk.check_k(k)
        if not (np.isfinite(c_k) and c_k >= 1):
            raise ValueError(f"c_k must be a number >= 1 (candidates kept per row asked for); got {c_k!r}")
        if not 0 <= min_fraction <= 1:
            raise ValueError(f"min_fraction must be between 0 and 1; got {min_fraction!r}")
        arguments = self._executor.arguments(inputs, {})
        n = batch_length(arguments)
        if n is None:
            raise ValueError("top_k needs a batch: a DataFrame, Series, array, sparse matrix or list argument")
        k = min(int(k), n)
        if k == 0:
            found = np.array([], dtype=np.intp), np.array([], dtype=float)
            return found if return_scores else found[0]
        self._refuse_guarded("top_k", "these rows", arguments)
        call = start_call(self._stats, self._lookup_caches)  # (its lookups count, and use the caches, as a call's)
        try:
            self._check_ranking(arguments)
            plan = (None if self._fitted is None or self._fitted_exactly() or not self._serves_fitted(arguments)
                    else self._fitted.top_k_plan)
            keep = plan.candidates(n, k, c_k, min_fraction) if plan is not None else None
            if keep is None:
                self._stats.count(top_k_candidates=n)
                found = topk.exact(self._executor, arguments, k, self._feature_rows)
            else:
                found = _unless_raised(topk.filtered, self._executor, self._fitted, arguments, k, keep, self._stats,
                                       self._feature_rows)
                if found is MISSING:
                    found = topk.exact(self._executor, arguments, k, self._feature_rows)
            return found if return_scores else found[0]
        except NotSeparable as reason:
            raise ValueError(f"top_k cannot compute the IFVs of these inputs separately ({reason})") from None
        finally:
            end_call(call)

    def explain(self) -> pd.DataFrame:
        """Per IFV: cost per row, importance, cost-effectiveness, selected; ``.attrs["summary"]`` has the rest."""
        if self._fitted is None:
            table = Fitted([ifv.name for ifv in self.graph.ifvs]).explain()
            table.attrs["summary"] = {"fitted": False, "cascades": "off: call fit() first", **self._guards()}
            return table
        table = self._fitted.explain()
        summary = table.attrs["summary"]
        summary["fitted"] = True
        summary.update(self._guards())
        if self._fitted.cascading:
            summary["cascades"] = "on"
        else:
            summary["cascades"] = f"off: {self._fitted.cascade_reason}"
        summary["top_k_filter"] = "on" if self._fitted.top_k_plan is not None else f"off: {self._fitted.top_k_reason}"
        if self._fitted_exactly():
            summary["cascades"] = summary["top_k_filter"] = "off: exact since the drift alarm (on_drift='exact'); fit again"
        summary["drift_guard"] = (
            self._fitted.drift.describe(self._fitted.threshold) if self._fitted.drift is not None
            else "off: on_drift=None" if self._fitted.cascadable else "off: no cascade to guard"
        )
        return table

    def _guards(self) -> dict:
        """The summary's ``guards``: the leading guards every call runs first, when there are any."""
        if not self.graph.guards:
            return {}
        return {"guards": [f"{line} (when it fires, the call returns or raises as written)" for line in self.graph.guard_lines]}

    def explain_compilation(self) -> pd.DataFrame:
        """One row per call a compiled kernel may answer: line, call, operator, status, calls.

        The status says ``compiled`` or why the call runs as plain Python (an
        unsupported object or option, or an input the kernel does not reproduce).
        ``fused_calls`` counts calls answered by one kernel together with the calls
        feeding it (a linear model with its vectorizers), whose rows were never built.
        ``kept`` says whether the call's result stays in the kernel's form for the
        compiled calls reading it (one compiled block), instead of becoming a pandas or
        scipy object. ``whole_calls`` counts calls answered, together with every other call
        of the function, by one program for the whole body (a body that is a chain of
        compiled calls, such as text columns, vectorizers and a linear model), without
        going through the calls one by one. After ``fit``, the models it trained follow, named by
        their role (``cascade small model: LGBMClassifier.predict_proba``), with no line.
        """
        executor = self._executor or self._calls
        sites = [site for site in executor.sites + executor.plain_calls if site.listed] if executor is not None else []
        columns = ["line", "call", "operator", "status", "calls", "compiled_calls", "fused_calls", "whole_calls", "kept"]
        table = pd.DataFrame([site.summary() for site in sites], columns=columns)
        table["call"] = table["call"].map(executor.readable) if sites else table["call"]
        # A call can be reached by several paths (plain calls, cascades): one row per call as written.
        table = table.sort_values("calls", ascending=False, kind="stable")
        # Sites of other paths (cascades, top-K) that never ran stand for a call another row shows.
        ran_lines = set(table.loc[table["calls"] > 0, "line"])
        table = table[(table["calls"] > 0) | ~table["line"].isin(ran_lines)]
        merged = table.groupby(["line", "call"], sort=True, as_index=False).agg(
            operator=("operator", "first"), status=("status", "first"),
            calls=("calls", "sum"), compiled_calls=("compiled_calls", "sum"), fused_calls=("fused_calls", "sum"),
            whole_calls=("whole_calls", "sum"), kept=("kept", "any"),
        )
        fitted = pd.DataFrame(self._fitted.model_calls() if self._fitted is not None else [], columns=columns)
        return pd.concat([merged[columns], fitted], ignore_index=True) if len(fitted) else merged[columns]

    def explain_caching(self) -> pd.DataFrame:
        """One row per IFV: the columns it reads, whether its generator reads a table in Redis,
        what is cached for it (with ``cache_size``: its own rows, keyed by the columns they
        depend on, when its text shows they depend on nothing else; the rows of its remote
        tables, by lookup key; or why nothing is), and how rows not cached are computed: by its
        statements, or for ``table.lookup(keys)[columns].to_numpy(dtype=float)`` from the
        tables' stored rows, with no DataFrame built."""
        rows = []
        rows_cache = self._feature_rows
        stopped = rows_cache.stopped if rows_cache is not None else {}
        planned = rows_cache.planned if rows_cache is not None else set()
        for ifv, remote in zip(self.graph.ifvs, self._remote or [False] * len(self.graph.ifvs)):
            keyed = rows_cache.keyed.get(ifv.index) if rows_cache is not None else None
            why_not = stopped.get(ifv.index) or self._not_keyed.get(ifv.index)
            if self._lookup_caches is None:
                cached = "nothing: cache_size is None" if self._predictions is None else 'whole results (cache="prediction")'
            elif keyed is not None:
                cached = f"its rows by {', '.join(keyed.columns)} (up to {rows_cache.capacity})"
                cached += ", and its remote tables' rows by lookup key" if remote else ""
            elif remote:
                cached = (f"rows of its remote tables by lookup key (up to {self._lookup_caches.capacity} per table); "
                          f"not its own rows: {why_not}")
            else:
                cached = f"nothing: {why_not or 'it reads no table'}"
            computed = "from its tables' stored rows" if ifv.index in planned else "by its statements"
            rows.append([ifv.name, list(ifv.columns), remote, cached, computed])
        return pd.DataFrame(rows, columns=["ifv", "reads", "remote", "cached", "new rows"])

    def clear_cache(self) -> None:
        """Empty the feature (or prediction) caches; call it after the tables they read change."""
        if self._lookup_caches is not None:
            self._lookup_caches.clear()
        if self._feature_rows is not None:
            self._feature_rows.clear()
        if self._predictions is not None:
            self._predictions.clear()

    @property
    def stats(self) -> dict:
        """Counters since the last ``reset_stats()``: rows seen, answered by the small model and
        sent to the full model, top-K queries and candidates, cache hits and misses (rows), keys
        fetched from remote tables with the round trips that fetched them, and the drift guard's
        checks and alarms (``drift_checks``, ``drift_alarms``)."""
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats.reset()

    @property
    def executor(self) -> GraphExecutor | None:
        """Runs the graph piece by piece; None when the function runs unmodified."""
        return self._executor

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return BoundOptimizedFunction(self, instance)

    def save(self, path) -> None:
        """Write this function, its models and its fitted state to one file; ``willump.load(path)``
        reads it back. The file is a pickle: load only files you trust."""
        persistence.save(self, path)

    def __reduce__(self):
        return persistence.reduce(self)

    def __getstate__(self):
        # The source travels with the function: where it is loaded, its file may not exist (and
        # cloudpickle names a function it pickles by value "<dynamic-code>").
        return {"py_func": persistence.function_reference(self), "source": self._source.carried(),
                "options": self.options, "fitted": self._fitted, "stats": self._stats}

    def _shipped(self, carry: bool = False) -> tuple[str, bytes]:
        """(identity, payload) of what this function is now. Pickled anew each time: the tables
        and models it reads may have changed since the last pickle (a put to a MemoryTable, a
        model refitted in place), which no version tells. An instance unpickled from a payload (a
        Dask scheduler's copy, a worker's) ships that payload again while ``fit``,
        ``set_threshold`` or the drift guard leave it as it was: its tables and models as they
        were pickled. ``carry``: with the arrays its kernels built from the models it holds."""
        held = self._shipped_as
        if held is not None and not carry and _same_version(held[0], self._state_version()):
            return held[1:]
        state = self.__getstate__()
        del state["stats"]  # (counters travel apart: they change with every call)
        executor = self._executor or self._calls
        return persistence.shipped_state(state, carried_builds(executor.sites) if carry and executor else ())

    def _remember_shipped(self, identity: str, payload: bytes) -> None:
        self._shipped_as = (self._state_version(), identity, payload)

    def _state_version(self) -> tuple:
        fitted = self._fitted
        return (fitted, fitted is not None and fitted.threshold, self._fitted_exactly())

    def __dask_tokenize__(self):
        """Dask names tasks by what the function is (its identity), not by where it lives."""
        return self._shipped()[0]

    def __setstate__(self, state):
        source = persistence.restored_source(state["py_func"], state.get("source"), state.get("fitted") is not None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WillumpWarning)  # already reported where it was defined
            self._setup(source, state["options"], state.get("carried", ()))
        self._fitted = state.get("fitted")
        self._stats = state.get("stats") or Stats()

    def __repr__(self) -> str:
        return f"<willump.optimize of {self.py_func.__qualname__}>"


def _validation_inputs(validation) -> tuple | None:
    """The function's arguments for the validation rows of ``fit(validation=(inputs, y))``, or None."""
    if isinstance(validation, tuple) and len(validation) == 2:
        return validation[0] if isinstance(validation[0], tuple) else (validation[0],)
    return None


class BoundOptimizedFunction:
    # ``instance.method`` for an optimized function defined in a class. Called, fitted, asked for
    # ``top_k`` and saved with its instance as the first argument, as Python binds a method (a
    # ``types.MethodType`` would hand ``fit`` and ``save`` to the function alone); the rest
    # (``explain``, ``stats``, ...) is the function's. It pickles and saves with its instance.
    __slots__ = ("__func__", "__self__", "__weakref__")

    def __init__(self, func: OptimizedFunction, instance):
        self.__func__ = func
        self.__self__ = instance

    def __call__(self, /, *args, **kwargs):
        return self.__func__(self.__self__, *args, **kwargs)

    def fit(self, *inputs, validation=None, **options):
        """``fit`` of the function, its instance first in the training and validation inputs."""
        if options.get("y") is None:  # (the TypeError naming the inputs given, not counting the instance)
            return self.__func__.fit(*inputs, validation=validation, **options)
        given = _validation_inputs(validation)
        if given is not None:
            validation = ((self.__self__, *given), validation[1])
        self.__func__.fit(self.__self__, *inputs, validation=validation, **options)
        return self

    def top_k(self, *inputs, **options):
        return self.__func__.top_k(self.__self__, *inputs, **options)

    def save(self, path) -> None:
        """Write the function and its instance to one file; ``willump.load(path)`` reads back the
        bound method. The file is a pickle: load only files you trust."""
        try:
            persistence.save(self, path)
        except (TypeError, AttributeError, pickle.PicklingError) as error:
            name = f"{type(self.__self__).__name__}.{self.__func__.py_func.__name__}"
            raise TypeError(f"{name} is saved with the {type(self.__self__).__name__} object it is bound to, which "
                            f"cannot be pickled ({error}); save the function alone with {name}.save(path) and pass "
                            "the object where it is loaded") from error

    def __getattr__(self, name):
        return getattr(self.__func__, name)

    @property
    def __doc__(self):
        return self.__func__.__doc__

    @property
    def __signature__(self) -> inspect.Signature:
        signature = inspect.signature(self.__func__.py_func)
        return signature.replace(parameters=list(signature.parameters.values())[1:])

    def __reduce__(self):
        return _bound_again, (self.__func__, self.__self__, self.__func__._fitted_on(self.__self__))

    def __dask_tokenize__(self):
        """The function's name and the instance's, and whether fit was given it: methods of two
        instances are two tasks, as are those of a fitted instance and of one equal to it."""
        from dask.base import tokenize

        return self.__func__.__dask_tokenize__(), tokenize(self.__self__), self.__func__._fitted_on(self.__self__)

    def __eq__(self, other):
        return (isinstance(other, BoundOptimizedFunction) and self.__func__ is other.__func__
                and self.__self__ is other.__self__)

    def __hash__(self):
        return hash((self.__func__, id(self.__self__)))

    def __repr__(self) -> str:
        return f"<bound willump.optimize of {self.__func__.py_func.__qualname__} of {self.__self__!r}>"


def _bound_again(func: OptimizedFunction, instance, fitted_on: bool) -> BoundOptimizedFunction:
    """An unpickled bound method: its function serves what ``fit`` learned for the copy of the
    object it was fitted on."""
    if fitted_on:
        func._adopt(instance)
    return BoundOptimizedFunction(func, instance)


def _unless_raised(serving, *arguments):
    """What a cascade or a top-K filter answers, or ``MISSING`` when it raised: computed on the rows
    it chose, an error would name their positions and sizes, not the batch's, so the call then runs
    as written and raises the function's own error (or answers, when only those rows fail).
    Warnings turned into errors, and joins that cannot be split, still propagate."""
    try:
        return serving(*arguments)
    except (Warning, NotSeparable):
        raise
    except Exception:
        return MISSING
