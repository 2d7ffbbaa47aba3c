"""``fit``: measure the IFVs, choose the efficient ones, train the small and filter models, set the threshold."""

import logging
import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.utils.validation import column_or_1d

from willump.analysis.costs import generator_costs, least_seconds, preprocessing_cost
from willump.analysis.importance import ColumnsUnknown, column_blocks, permutation_importances
from willump.errors import warn
from willump.optimizations import cascades
from willump.optimizations import topk as topk_fit
from willump.optimizations.models import check_fitted, train_like
from willump.runtime import cascade, drift, topk
from willump.runtime.models import FittedModel, call, is_classifier, is_outlier_detector, ranking_score, sites_of
from willump.optimizations.selection import DEFAULT_GAMMA, select_efficient
from willump.runtime.features import feature_matrix
from willump.runtime.joins import NotSeparable
from willump.runtime.rows import batch_length, row_count, take_argument_rows
from willump.runtime.calls import Stats

logger = logging.getLogger("willump")
MIN_CASCADE_VALIDATION = 100  # validation rows a threshold is chosen on, at least (as for top-K's batches)
BOOTSTRAP_SAMPLES = 200  # resamples of the validation rows the threshold must hold in (95% of them; more for prefixes)
_THRESHOLD_FIGURES = ("threshold", "cascade_validation_score", "small_model_fraction", "expected_speedup")


_COPIES_KEPT = 16  # adopted copies of one argument a fitted state serves (the newest; weakly held when they can be)
_PLAIN = (int, float, complex, str, bytes, bool, type(None))  # (compared by value: a call's 2.0 is not fit's object)
_ABSENT = object()


def _reference(value):
    """A callable returning ``value``: a weak reference when it takes one."""
    try:
        return weakref.ref(value)
    except TypeError:
        return lambda: value


def _same_fixed(given, fitted) -> bool:
    """The same object, or equal numbers or strings (by their repr: -0.0 is not 0.0, NaN is NaN)."""
    return given is fitted or (type(given) is type(fitted) and type(given) in _PLAIN and repr(given) == repr(fitted))


@dataclass
class Fitted:
    """What fit learned; survives pickling."""

    names: list
    costs: list = field(default_factory=list)  # seconds per row of each generator
    importances: list = field(default_factory=list)
    selected: list = field(default_factory=list)
    method: str = "predict"
    classification: bool = True
    small_model: object = None
    threshold: float | None = None
    cascade_reason: str | None = None  # why cascades are off
    top_k_plan: object = None  # runtime.topk.FilterPlan, when the filter is on
    top_k_reason: str | None = None  # why top_k is exact
    summary: dict = field(default_factory=dict)
    reuse: list = field(default_factory=list)  # per IFV: how its computed rows are reused (cascades.reuse_policy)
    batch_names: tuple = ()  # the arguments that hold rows
    output_dtype: object = None  # dtype of the full model's output, once the small model's is checked to match
    drift: object = None  # the serving-time guard (runtime.drift.DriftGuard), for a cascadable small model
    fixed: dict = field(default_factory=dict)  # the arguments that hold no rows, as fit was given them
    to_adopt: tuple = ()  # of those, the objects a pickle left behind (served in their ``adopt``ed copies)
    at_default: tuple = ()  # the arguments that hold no rows fit was given their parameter's default for
    model: object = None  # runtime.models.FittedModel: the full model as fit saw it

    def serves(self, arguments: dict, defaults: dict) -> bool:
        """Whether what fit learned holds for a call: its arguments that hold no rows are those fit was
        given (the object a method was fitted on, a model passed in, or their adopted copies; equal
        numbers or strings; the parameter's default, ``defaults``). Other calls are answered exactly:
        a small model trained for one object's model is not another's."""
        return (all(self._given(name, arguments.get(name, _ABSENT)) for name in self.fixed)
                and all(arguments.get(name, _ABSENT) is defaults.get(name) for name in self.at_default))

    def rows_agree(self, arguments: dict) -> bool:
        """Whether the arguments that held rows in fit hold as many rows each: else the cascade, which takes
        rows of each, would answer a call the function as written refuses (``np.hstack`` of 1 and 10 rows)."""
        return len({row_count(arguments.get(name)) for name in self.batch_names}) <= 1

    def _given(self, name: str, value) -> bool:
        """Whether ``value`` is what fit was given as ``name``, or one of its copies."""
        if name not in self.to_adopt and _same_fixed(value, self.fixed[name]):
            return True
        return any(copy() is value for copy in self._copies.get(name, ()))

    def model_holds(self, model) -> bool:
        """Whether a call's model (None: unknown before its statements run) is the one fit learned for, unchanged."""
        return self.model is None or self.model.holds(model)

    def fitted_on(self, name: str, value) -> bool:
        return name in self.fixed and self._given(name, value)

    def adopt(self, name: str, value) -> None:
        """Serve ``value`` as the ``name`` fit was given: a copy of that object, unpickled with the
        function (a bound method's instance, ``BoundOptimizedFunction``; on a Dask worker, each task's)."""
        if name in self.fixed:
            kept = [copy for copy in self._copies.get(name, ()) if copy() is not None][-_COPIES_KEPT + 1:]
            self._copies[name] = [*kept, _reference(value)]

    def __getstate__(self):
        """The objects among ``fixed`` are not pickled with the state (a method's instance may not
        pickle, and would travel as a copy): where the state is unpickled, copies are adopted."""
        state = self.__dict__.copy()
        state.pop("_copies", None)
        objects = tuple(name for name, value in self.fixed.items() if type(value) not in _PLAIN)
        state["fixed"] = {name: (None if name in objects else value) for name, value in self.fixed.items()}
        state["to_adopt"] = tuple(dict.fromkeys(self.to_adopt + objects))
        return state

    def __setstate__(self, state):
        self.__dict__.update({"fixed": {}, **state})  # (a state pickled before ``fixed`` has none)
        self._copies = {}

    def __post_init__(self):
        self._copies = {}  # name -> references to the copies adopted (not pickled)

    @property
    def cascading(self) -> bool:
        return self.threshold is not None and self.small_model is not None

    @property
    def cascadable(self) -> bool:
        """fit trained a small model and checked that its output can stand in for the full model's."""
        return self.small_model is not None and self.output_dtype is not None

    def model_calls(self) -> list[dict]:
        """How the calls of the models fit trained were answered (``CallSite.summary`` rows, the call
        named by the model's role): the cascade's small model, the top-K filter model."""
        roles = {}
        for role, model in (("cascade small model", self.small_model if self.cascading else None),
                            ("top-K filter model", getattr(self.top_k_plan, "model", None))):
            if model is not None:
                roles.setdefault(id(model), (model, []))[1].append(role)
        return [{**site.summary(), "call": f"{' and '.join(names)}: {site.source}"}
                for model, names in roles.values() for site in sites_of(model)]

    def set_threshold(self, threshold) -> None:
        """Cascade at ``threshold`` instead of fit's choice (None: cascades off); the summary says so.

        The figures fit measured for its own threshold leave the summary; that threshold
        stays there as ``fit_threshold``.
        """
        if not self.cascadable:
            raise ValueError(f"there is no small model to cascade with: {self.cascade_reason}")
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number))
            or not 0 <= threshold <= 1
        ):
            raise ValueError(
                f"threshold must be a number from 0 (the small model answers every row) to 1 "
                f"(it answers only the rows it is certain of), or None to turn cascades off; got {threshold!r}"
            )
        self.summary.setdefault("fit_threshold", self.summary.get("threshold"))
        for key in _THRESHOLD_FIGURES + ("measured_speedup_batch", "measured_speedup_single_row"):
            self.summary.pop(key, None)
        if threshold is None:
            self.threshold, self.cascade_reason = None, "turned off with set_threshold(None)"
        else:
            self.threshold, self.cascade_reason = float(threshold), None
            self.summary["threshold"] = self.threshold
        self.summary["threshold_rule"] = "set by hand with set_threshold"

    def explain(self) -> pd.DataFrame:
        """One row per IFV; the summary is in ``.attrs["summary"]``."""
        rows = []
        for i, name in enumerate(self.names):
            cost = self.costs[i] if self.costs else np.nan
            importance = self.importances[i] if self.importances else np.nan
            rows.append(
                {
                    "ifv": name,
                    "cost_per_row_us": cost * 1e6,
                    "importance": importance,
                    "cost_effectiveness": importance / max(cost, 1e-12) if self.costs else np.nan,
                    "selected": i in self.selected,
                }
            )
        table = pd.DataFrame(rows)
        table.attrs["summary"] = dict(self.summary)
        return table


def _check_number(name: str, value, within, meaning: str) -> None:
    """ValueError unless ``value`` is a real number (not a bool) for which ``within`` (a callable) holds."""
    real = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not real or not within(value):
        raise ValueError(f"{name} must be {meaning}; got {value!r}")


def _bind(executor, inputs) -> dict:
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return executor.arguments(inputs, {})


def _rows(arguments: dict) -> int:
    n = batch_length(arguments)
    if n is None:
        raise ValueError("fit needs a batch of rows: a DataFrame, Series, array, sparse matrix or list argument")
    return n


def _target(y, n, what) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:  # (a column vector: scikit-learn's estimators ravel it, warning)
        y = column_or_1d(y, warn=True)
    if y.ndim != 1:
        raise ValueError(f"{what} must hold one label per row (a 1-D array); got an array of shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"{what} has {len(y)} labels but the inputs have {n} rows")
    return y


def _check_labels(model, y: np.ndarray, what: str) -> None:
    """ValueError for labels the classifier never predicts (0/1 for a model fitted on "no"/"yes"):
    a cascade would learn them and answer with them."""
    classes = getattr(model, "classes_", None)
    if classes is None or np.ndim(classes) != 1:
        return
    known = set(np.asarray(classes).tolist())
    missing = pd.isna(y)
    unknown = [label for label in dict.fromkeys(y[~missing].tolist()) if label not in known]
    unknown += [float("nan")] if missing.any() else []  # (NaN, None, NA: never one of classes_)
    if unknown:
        shown = ", ".join(map(repr, unknown[:5])) + (", ..." if len(unknown) > 5 else "")
        raise ValueError(f"{what} holds labels {type(model).__name__} does not predict ({shown}); its classes_ are "
                         f"{np.asarray(classes).tolist()[:10]}: pass the labels the model was fitted on")


def _is_regression_target(y: np.ndarray) -> bool:
    return y.dtype.kind == "f" and not np.all(np.isnan(y) | (y == np.round(y)))


def fit(executor, inputs: tuple, y, *, validation=None, validation_fraction=0.25, metric=None,
        accuracy_loss=0.001, cascades_wanted=True, top_k_wanted=True, small_model=None,
        random_state=0, progress=True, gamma=DEFAULT_GAMMA, costs=None, check_speed=True, calls="both",
        top_k_precision=0.95, on_drift="warn", drift_window=drift.DEFAULT_WINDOW) -> Fitted:
    from tqdm.auto import tqdm

    names = [ifv.name for ifv in executor.graph.ifvs]
    fitted = Fitted(names, method=executor.graph.model.method)
    _check_number("accuracy_loss", accuracy_loss, lambda v: 0 <= v < 1, "in [0, 1)")
    _check_number("top_k_precision", top_k_precision, lambda v: 0 < v <= 1,
                  "in (0, 1]: the share of the exact top-K a filtered query must return")
    _check_number("gamma", gamma, lambda v: 0 <= v < np.inf, "a finite number >= 0: Algorithm 1's stopping factor")
    for name, flag in (("cascades", cascades_wanted), ("top_k", top_k_wanted), ("check_speed", check_speed)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False; got {flag!r}")
    drift.check_options(on_drift, drift_window)
    served = _served_sizes(calls)
    given_costs = None if costs is None else _given_costs(costs, names)
    if metric is not None and not callable(metric):
        raise ValueError(f"metric must be a callable score(y_true, y_pred), higher is better; got {metric!r}")
    train = _bind(executor, inputs)
    n = _rows(train)
    y = _target(y, n, "y")
    fitted.batch_names = tuple(name for name, value in train.items() if row_count(value) == n)
    fixed = {name: value for name, value in train.items() if name not in fitted.batch_names}
    defaults = executor.defaults()
    fitted.at_default = tuple(name for name, value in fixed.items() if name in defaults and value is defaults[name])
    fitted.fixed = {name: value for name, value in fixed.items() if name not in fitted.at_default}
    if validation is not None:
        if not (isinstance(validation, tuple) and len(validation) == 2):
            raise ValueError("validation must be a pair (inputs, y), inputs being a tuple for several arguments")
        valid = _bind(executor, validation[0])
        y_valid = _target(validation[1], _rows(valid), "the validation y")
    else:
        if not 0 < validation_fraction < 1:
            raise ValueError(f"validation_fraction must be between 0 and 1; got {validation_fraction!r}")
        order = np.random.default_rng(random_state).permutation(n)
        held = max(1, int(round(n * validation_fraction)))
        valid = take_argument_rows(train, np.sort(order[:held]), fitted.batch_names)
        y_valid = y[np.sort(order[:held])]
        train = take_argument_rows(train, np.sort(order[held:]), fitted.batch_names)
        y = y[np.sort(order[held:])]
        warn(
            "willump: fit holds out a validation split of the given rows; if the model was trained on "
            "these rows, its confidence there is higher than on new rows, so thresholds are conservative: "
            "pass validation=(inputs, y) with rows the model has not seen"
        )
        n = len(y)
    if cascades_wanted and _is_regression_target(y):
        raise ValueError("y is a regression target, but cascades need classes: pass cascades=False (top_k still works)")

    if executor.model_split_problem:  # (no model input to train a small model on, nor to rank rows by)
        fitted.cascade_reason = fitted.top_k_reason = executor.model_split_problem
        return fitted

    stages = tqdm(total=6, desc="willump fit", disable=not progress, leave=False)

    def stage(message):
        logger.info("fit: %s", message)
        stages.set_postfix_str(message)
        stages.update(1)

    try:
        env, values = executor.evaluate(train)
        valid_env, valid_values = executor.evaluate(valid)
    except NotSeparable as reason:
        raise ValueError(f"the IFVs cannot be computed separately on the fit data ({reason})") from None
    k = len(names)
    model, X = executor.model_input(env, [values[i] for i in range(k)])
    check_fitted(model)
    fitted.model = FittedModel(model)
    if is_outlier_detector(model):  # (no labels to approximate its scores by, nor an order of rows it ranks)
        raise ValueError(f"fit learns cascades and top-K filters for classifiers and regressors; "
                         f"{type(model).__name__} is an outlier detector: call the function without fit "
                         f"(its calls are compiled all the same)")
    fitted.classification = is_classifier(model)
    if fitted.classification:
        _check_labels(model, y, "y")
        _check_labels(model, y_valid, "the validation y")
    row_wise = _probe_rows(executor, fitted, train, values, n, random_state)
    if cascades_wanted and not fitted.classification:
        raise ValueError(
            f"cascades need a classifier, but {type(model).__name__} is a regressor: pass cascades=False (top_k still works)"
        )
    stage("features computed")

    fitted.costs = generator_costs(executor, env, n) if given_costs is None else given_costs
    pre_cost = preprocessing_cost(executor, train, n)
    model_cost = least_seconds(lambda: call(model, fitted.method, X)) / n
    stage("costs measured")

    summary = fitted.summary
    summary.update(
        {
            "model": type(model).__name__,
            "task": "classification" if fitted.classification else "regression",
            "preprocessing_cost_per_row_us": pre_cost * 1e6,
            "model_cost_per_row_us": model_cost * 1e6,
            "train_rows": n,
            "validation_rows": len(y_valid),
            "costs": "measured" if costs is None else "given (costs=)",
            "speed": (f"checked on {' and '.join(SIZE_WORDS[size] for size in served)} (calls={calls!r})" if check_speed
                      else "not checked (check_speed=False): on whenever the targets hold"),
        }
    )
    problem = (_single_feature_vector(model) if k < 2 else None) or row_wise
    if problem:
        fitted.cascade_reason = fitted.top_k_reason = problem
        stages.close()
        return fitted

    _, valid_X = executor.model_input(valid_env, [valid_values[i] for i in range(k)])
    try:
        blocks = column_blocks([valid_values[i] for i in range(k)], valid_X)
    except ColumnsUnknown as unknown:  # no importances: no small model, no filter
        columns_unknown, how = str(unknown), "not measured"
    else:
        columns_unknown = None
        fitted.importances, how = permutation_importances(model, valid_X, y_valid, blocks, random_state)
        fitted.selected = select_efficient(fitted.costs, fitted.importances, gamma)
    stage("efficient IFVs chosen")
    summary.update({"importance": how, "gamma": gamma, "efficient_ifvs": [names[i] for i in fitted.selected]})
    problem = columns_unknown or (
        None if fitted.selected else "no IFV is cheap enough: each costs more than half of all IFVs together"
    )
    if problem:
        fitted.cascade_reason = fitted.top_k_reason = problem
        stages.close()
        return fitted

    def small_inputs(selected):
        return feature_matrix([values[i] for i in selected]), feature_matrix([valid_values[i] for i in selected])

    try:
        small_X, small_valid_X = small_inputs(fitted.selected)
        trained = train_like(model, small_X, y, random_state, small_model)  # (the small model, or the filter of a regressor)
    except Exception as error:  # noqa: BLE001 - whatever the library raises (LightGBMError...), fit goes on without
        fitted.cascade_reason = fitted.top_k_reason = (
            f"a small model like {type(small_model or model).__name__} cannot be trained on the efficient IFVs "
            f"{[names[i] for i in fitted.selected]} ({type(error).__name__}: {error}); pass small_model= an "
            f"estimator that accepts them"
        )
        stages.close()
        return fitted
    if fitted.classification:
        fitted.small_model = trained
    stage("small model trained")

    if not cascades_wanted:
        fitted.cascade_reason = "not requested (cascades=False)" if fitted.classification else "regression: cascades need classes"
    elif len(y_valid) < MIN_CASCADE_VALIDATION:
        fitted.cascade_reason = (f"{len(y_valid)} validation rows are too few to validate a cascade (at least "
                                 f"{MIN_CASCADE_VALIDATION} are needed)")
    elif len(pd.unique(y_valid)) < 2:
        fitted.cascade_reason = (f"the validation labels are all {y_valid[:1].tolist()[0]!r}: a cascade's accuracy is validated on "
                                 f"rows of several classes (pass validation=(inputs, y) with rows of each)")
    else:
        def small_on(selected):
            train_X, valid_X_small = small_inputs(selected)
            return train_like(model, train_X, y, random_state, small_model), valid_X_small

        def attempt(small_valid_X, level) -> dict:
            found = {}
            _fit_threshold(
                executor, fitted, valid_env, model, valid_X, small_valid_X, y_valid, metric, accuracy_loss,
                random_state, level, found,
            )
            if fitted.cascading and check_speed:
                _check_expected_speedup(fitted, small_valid_X, pre_cost, model_cost, found)
            if fitted.cascading and check_speed:
                _measure_serving(executor, fitted, valid, found, served)
            return found

        small_valid_X = _choose_cascade(fitted, small_valid_X, small_on, attempt)
        if fitted.cascadable and on_drift is not None:  # (set_threshold may turn cascades on later)
            fitted.drift = drift.DriftGuard(cascade.confidences(fitted, small_valid_X), drift_window, on_drift)
    stage("threshold chosen")

    if not top_k_wanted:
        fitted.top_k_reason = "not requested (top_k=False)"
    else:
        filter_costs = {"preprocessing": pre_cost, "model": model_cost} if check_speed else None
        filter_model = fitted.small_model if fitted.classification else trained
        _fit_filter(executor, fitted, model, filter_model, valid, valid_X, small_valid_X, top_k_precision, filter_costs,
                    random_state)
    stage("filter model ready")
    stages.close()
    logger.info("fit: done: %s", summary)
    return fitted


def _choose_cascade(fitted, small_valid_X, small_on, attempt):
    """Cascade on Algorithm 1's efficient IFVs or, when they give none, on their greedy prefixes, longest first.

    The last IFVs Algorithm 1 takes can sit at the gamma cut, where timing noise
    decides whether they are in; with them the small model may meet no threshold
    that the IFVs before them meet. ``small_valid_X`` is the small model's
    validation input on the whole set (``fitted.small_model`` is trained on it),
    ``small_on(selected)`` gives (small model, validation input) for a prefix, and
    ``attempt(validation input, level)`` sets the threshold for ``fitted``'s
    current small model and returns what it found for the summary. Each prefix
    tried is another test on the same validation rows, so the prefixes' thresholds
    must hold in 1 - 0.05/m of the bootstrap resamples (Bonferroni over the m
    prefixes). Returns the kept small model's validation input; when no prefix
    cascades, the whole set's state is kept.
    """
    chosen, first = fitted.selected, (fitted.small_model, small_valid_X)
    prefixes = len(chosen) - 1
    tried = []
    for size in range(len(chosen), 0, -1):
        fitted.selected = chosen[:size]
        if size < len(chosen):
            fitted.small_model, small_valid_X = small_on(fitted.selected)
        fitted.threshold = fitted.cascade_reason = None
        found = attempt(small_valid_X, 0.95 if size == len(chosen) else 1 - 0.05 / prefixes)
        tried.append((fitted.selected, fitted.cascade_reason, found))
        if fitted.cascading:
            break
    else:
        fitted.selected, (fitted.small_model, small_valid_X) = chosen, first
        _, fitted.cascade_reason, found = tried[0]
        if len(tried) > 1:
            fitted.cascade_reason += "; nor did any shorter prefix of the efficient IFVs cascade"
    names = fitted.names
    fitted.summary.update(found)
    fitted.summary["efficient_ifvs"] = [names[i] for i in fitted.selected]
    fitted.summary["cascade_attempts"] = [
        {"ifvs": [names[i] for i in selected], "outcome": reason or "cascades on"} for selected, reason, _ in tried
    ]
    return small_valid_X


def _given_costs(costs, names: list) -> list[float]:
    """The per-row seconds the user measured for each IFV, in IFV order, checked."""
    if not isinstance(costs, dict) or set(costs) != set(names):
        raise ValueError(
            f"costs must be a dict giving seconds per row for each IFV by name, {names}; got {costs!r}"
        )
    given = [costs[name] for name in names]
    if not all(isinstance(c, (int, float, np.number)) and not isinstance(c, bool) and np.isfinite(c) and c >= 0
               for c in given):
        raise ValueError(f"costs must be finite numbers of seconds per row, at least 0; got {costs!r}")
    return [float(c) for c in given]


MIN_SPEEDUP = 1.1  # how much faster than the exact path a cascade must measure to be kept (see serving_decision)


@dataclass(frozen=True)
class PathCosts:
    """Seconds per row of the parts of the two paths a row can take, as fit measured them."""

    preprocessing: float
    small_ifvs: float  # the small model's IFVs
    small_model: float
    other_ifvs: float  # the IFVs only the full model reads
    full_model: float

    @property
    def full_path(self) -> float:
        """A row served exactly: preprocessing, every IFV, the full model."""
        return self.preprocessing + self.small_ifvs + self.other_ifvs + self.full_model

    @property
    def left_row(self) -> float:
        """What a row the small model leaves costs on top: preprocessed again, the other IFVs, the full model."""
        return self.preprocessing + self.other_ifvs + self.full_model

    def cascaded(self, answered: float) -> float:
        """A row's expected cost when the small model answers the share ``answered`` of the rows."""
        return self.preprocessing + self.small_ifvs + self.small_model + (1 - answered) * self.left_row


def expected_speedup_decision(costs: PathCosts, answered: float, threshold: float) -> tuple[bool, float, str]:
    """(worth measuring, expected speed-up, why) for a cascade whose small model answers the share
    ``answered`` of the validation rows at ``threshold``.

    An estimate from the parts' costs, so it only screens out the cascades that cannot pay
    (expected speed-up below 1x); the measured serving check decides, asking for MIN_SPEEDUP.
    The two bounds are apart on purpose: a cascade near 1x is off whichever side of 1x the
    estimate falls, so noise in the estimate does not flip the decision.
    """
    speedup = costs.full_path / costs.cascaded(answered)
    parts = [f"preprocessing {_us(costs.preprocessing)}", f"its IFVs {_us(costs.small_ifvs)}",
             f"small model {_us(costs.small_model)}"]
    if answered < 1:
        parts.append(f"{_percent(1 - answered)} x {_us(costs.left_row)} for the rows it leaves to the full model's path")
    reason = (
        f"at threshold {threshold} the small model answers {_percent(answered)} of the validation rows; per row the "
        f"cascade costs {_us(costs.cascaded(answered))} ({' + '.join(parts)}) against {_us(costs.full_path)} for "
        f"the full model's path (preprocessing {_us(costs.preprocessing)} + all IFVs "
        f"{_us(costs.small_ifvs + costs.other_ifvs)} + full model {_us(costs.full_model)}): "
        f"expected speed-up {speedup:.2f}x{'' if speedup >= 1 else ', below 1x'}"
    )
    return speedup >= 1, speedup, reason


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us"


def _percent(share: float) -> str:
    """``share`` as a percentage, with a decimal where a whole number would read 0% or 100% for a share that is not."""
    whole = f"{share:.0%}"
    return f"{share:.1%}" if whole in ("0%", "100%") and 0 < share < 1 else whole


def _check_expected_speedup(fitted, small_valid_X, pre_cost, model_cost, summary) -> None:
    """Turn the cascade off when the measured costs say it cannot pay for computing the small model's IFVs first.

    The small model is timed as the IFVs are (``analysis.costs``): the least of several calls
    after one not counted, which pays for compiling its kernel.
    """
    small_cost = least_seconds(lambda: call(fitted.small_model, fitted.method, small_valid_X)) / small_valid_X.shape[0]
    chosen, others = _split_costs(fitted)
    costs = PathCosts(
        preprocessing=pre_cost, small_ifvs=chosen, small_model=small_cost, other_ifvs=others, full_model=model_cost,
    )
    worth, summary["expected_speedup"], reason = expected_speedup_decision(
        costs, summary["small_model_fraction"], summary["threshold"]
    )
    logger.info("fit: %s", reason)
    if not worth:
        _cascade_off(fitted, summary, reason)


def _cascade_off(fitted, summary: dict, reason: str) -> None:
    """Turn off the cascade a threshold was found for, saying why; its figures leave the summary."""
    fitted.threshold = None
    fitted.cascade_reason = reason
    for key in _THRESHOLD_FIGURES:
        summary.pop(key, None)


def _probe_rows(executor, fitted, train, values, n, random_state) -> str | None:
    """Learn how to reuse computed rows of each IFV; a problem if a row's IFV depends on other rows.

    A few rows are computed alone and compared with the same rows of the whole batch.
    """
    rows = np.sort(np.random.default_rng(random_state).choice(n, size=min(n, 7), replace=False))
    _, alone = executor.evaluate(train, rows=rows, batch_names=fitted.batch_names)
    fitted.reuse = []
    for i in range(len(fitted.names)):
        policy, same = cascades.reuse_policy(values[i], alone[i], rows)
        fitted.reuse.append(policy)
        if not same:
            return (
                f"IFV {fitted.names[i]!r} of a row depends on the other rows of the batch "
                "(a batch statistic?), so rows cannot be computed apart"
            )
    return None


def _single_feature_vector(model) -> str:
    """Why a function with one IFV gets no cascade or filter, naming a scikit-learn composite model."""
    composite = next((kind for attribute, kind in _COMPOSITES if hasattr(model, attribute)), None)
    if composite is None:
        return "the function has a single feature vector: there is nothing cheaper to compute first"
    return (
        f"the model is a scikit-learn {composite} ({type(model).__name__}) run as one call (explain_compilation() "
        f"says why), so willump sees a single feature vector, its input, with nothing cheaper to compute first"
    )


_COMPOSITES = (("steps", "Pipeline"), ("transformer_list", "FeatureUnion"), ("transformers", "ColumnTransformer"))


def _fit_threshold(executor, fitted, env, model, X, small_X, y, metric, accuracy_loss, random_state, level,
                   summary) -> None:
    full_output = np.asarray(call(model, fitted.method, X))
    labels = fitted.method == "predict" and not np.issubdtype(full_output.dtype, np.floating)
    name, score = (getattr(metric, "__name__", "metric"), metric) if metric else cascades.default_metric(labels)
    # The default metrics score the model's output against y (its labels): the function's result may be of
    # another kind (``p[:, 0]``, labels mapped to names); a metric of the user's scores what the function returns.
    scored = (lambda output: executor.finish(env, output)) if metric else (lambda output: output)
    small_output = np.asarray(call(fitted.small_model, fitted.method, small_X))
    if small_output.shape != full_output.shape:
        fitted.cascade_reason = "the small model's output does not have the full model's shape (classes missing from the training rows?)"
        return
    fitted.output_dtype = full_output.dtype  # (set only for a small model whose output can stand in: cascadable)
    confidences = cascade.small_confidence(fitted, small_output, small_X)
    full_score = score(y, scored(full_output))
    choice = cascades.choose_threshold(
        scored, small_output, confidences, full_output, y, score, accuracy_loss,
        bootstrap=BOOTSTRAP_SAMPLES, random_state=random_state, level=level,
    )
    summary.update(
        {
            "metric": name,
            "accuracy_loss": accuracy_loss,
            "threshold_rule": f"lowest 0.1-grid threshold within accuracy_loss on the validation rows and in "
            f"{level:.1%} of {BOOTSTRAP_SAMPLES} bootstrap resamples of them",
            "full_model_validation_score": full_score,
        }
    )
    if choice is None:
        fitted.cascade_reason = f"no threshold keeps the validation {name} within {accuracy_loss} of the full model's {full_score:.4f}"
        return
    fitted.threshold, cascade_score, answered = choice
    summary.update(
        {"threshold": fitted.threshold, "cascade_validation_score": cascade_score, "small_model_fraction": answered}
    )


SIZES = {"both": ("batch", "single_row"), "batches": ("batch",), "rows": ("single_row",)}  # fit(calls=...)
SIZE_WORDS = {"batch": "batches", "single_row": "single rows"}


def _served_sizes(calls) -> tuple:
    """The call sizes the serving check times for ``fit(calls=...)``."""
    if not isinstance(calls, str) or calls not in SIZES:
        raise ValueError(
            f"calls must say how the fitted function will be called, so that fit times its cascade that way: "
            f"'batches', 'rows' (one row per call) or 'both'; got {calls!r}"
        )
    return SIZES[calls]


def serving_decision(exact: dict, cascaded: dict) -> tuple[bool, str]:
    """(keep the cascade, why) from the seconds per row the exact (compiled) path and the cascade
    took on the same queries: ``{"batch": ..., "single_row": ...}`` each, or one of the two when
    the function is to be called only that way (``fit(calls=...)``).

    One decision for every query size (a row gets the same answer alone or in a batch): the
    cascade is kept when the geometric mean of its speed-ups is at least MIN_SPEEDUP. The
    margin above 1x is the hysteresis: a cascade gives up some accuracy (up to ``accuracy_loss``)
    for its speed, and one that only ties with the exact path is off on every run instead of
    on or off as the noise falls.
    """
    sizes = [size for size in ("batch", "single_row") if size in exact]
    speedups = {size: exact[size] / cascaded[size] for size in sizes}
    overall = float(np.prod(list(speedups.values())) ** (1 / len(sizes)))
    keep = overall >= MIN_SPEEDUP
    parts = [
        f"{_us(cascaded['batch'])} per row against {_us(exact['batch'])} for the exact compiled path in a batch "
        f"({speedups['batch']:.2f}x)" if size == "batch" else
        f"{_us(cascaded[size])} against {_us(exact[size])} row by row ({speedups[size]:.2f}x)"
        for size in sizes
    ]
    together = f"{overall:.2f}x together (geometric mean)" if len(sizes) > 1 else f"{overall:.2f}x"
    return keep, (
        f"measured on the validation rows, the cascade takes {' and '.join(parts)}: {together}, "
        f"{'at least' if keep else 'below'} the {MIN_SPEEDUP}x a cascade must reach"
    )


def _measure_serving(executor, fitted, valid: dict, summary: dict, sizes: tuple, single_rows: int = 20) -> None:
    """Time the cascade against the exact (compiled) path on the validation rows, as a batch
    and/or row by row (``sizes``), and keep it as ``serving_decision`` says. The batch, and the
    single rows one after the other, are timed as the IFVs are (``analysis.costs``): the least
    of several runs after one not counted, which builds the compiled programs."""
    discard = Stats()
    paths = {"exact": executor.run, "cascaded": lambda arguments: cascade.serve(executor, fitted, arguments, discard)}
    rows = [take_argument_rows(valid, [i], fitted.batch_names) for i in range(min(single_rows, _rows(valid)))]
    queries = {"batch": ([valid], _rows(valid)), "single_row": (rows, len(rows))}
    seconds = {path: {} for path in paths}
    for size in sizes:
        inputs, count = queries[size]
        for path, run in paths.items():
            seconds[path][size] = least_seconds(lambda run=run, inputs=inputs: [run(a) for a in inputs]) / count
        summary[f"measured_speedup_{size}"] = seconds["exact"][size] / seconds["cascaded"][size]
    keep, reason = serving_decision(seconds["exact"], seconds["cascaded"])
    logger.info("fit: %s", reason)
    if not keep:
        _cascade_off(fitted, summary, reason)


def _fit_filter(executor, fitted, model, filter_model, valid, valid_X, small_valid_X, target, costs,
                random_state) -> None:
    """Validate how many candidates the filter model (on the efficient IFVs, its validation input
    ``small_valid_X``) must keep for each query shape to meet ``target`` precision; with ``costs``
    (per-row seconds of preprocessing and the model), keep only the shapes where the filter is
    expected to pay, and the filter only if it is faster than the exact query on the validation rows."""
    summary = fitted.summary
    try:
        full_scores = ranking_score(model, valid_X)
    except ValueError as error:
        fitted.top_k_reason = str(error)
        return
    filter_scores = ranking_score(filter_model, small_valid_X)
    sizes, shares, precisions = topk_fit.candidate_shares(full_scores, filter_scores, target,
                                                         random_state=random_state)
    summary["top_k_precision"] = target
    summary["top_k_rule"] = (
        f"fewest candidates holding {target:.0%} of the exact top-K in {topk_fit.LEVEL:.0%} of "
        f"{topk_fit.RESAMPLES} batches drawn from the validation rows, per batch size and k/n"
    )
    if not len(sizes):
        fitted.top_k_reason = (
            f"{len(full_scores)} validation rows are too few to validate top-K queries "
            f"(at least {topk_fit.SMALLEST_BATCH} are needed)"
        )
        return
    kept = topk_fit.with_floors(shares)  # (what a query with top_k's default options keeps)
    # A filter that must keep more than half of the batch can hardly pay, and a large share says it
    # ranks the top rows poorly, where a few validation rows decide: such shapes run exactly.
    usable = kept <= topk_fit.MAX_SHARE
    if costs is not None:
        chosen, others = _split_costs(fitted)
        costs = {**costs, "filter_ifvs": chosen, "other_ifvs": others, "filter": least_seconds(lambda: ranking_score(filter_model, small_valid_X)) / len(filter_scores)}
        speedups = topk_fit.expected_speedups(kept, costs)
        usable &= speedups >= topk_fit.MIN_SPEEDUP
    reference = _reference_cell(shares, usable)
    i, j = reference
    figures = {
        "k_share": topk_fit.QUERY_SHARES[j], "batch_rows": int(sizes[i]),
        "validated_share": float(shares[i, j]), "candidate_share": float(kept[i, j]),
        "expected_precision": float(precisions[i, j]),
    }
    if costs is not None:
        figures["expected_speedup"] = float(speedups[i, j])
    summary["top_k_reference_query"] = figures
    if not usable.any():
        fitted.top_k_reason = (
            f"no validated query meets the precision target with a filter that pays: for the k best "
            f"{figures['k_share']:.1%} of {figures['batch_rows']} rows the filter must keep "
            f"{figures['candidate_share']:.0%} of them"
            + (f" (expected speed-up {figures['expected_speedup']:.2f}x, at least "
               f"{topk_fit.MIN_SPEEDUP}x needed)" if costs is not None else "")
        )
        return
    plan = topk.FilterPlan(list(fitted.selected), filter_model, target, topk_fit.LEVEL, sizes,
                           np.asarray(topk_fit.QUERY_SHARES), np.where(usable, shares, np.nan))
    fitted.top_k_plan = plan
    summary["top_k_candidate_shares"] = plan.describe()
    if costs is not None:
        _measure_top_k(executor, fitted, valid, summary)


def _split_costs(fitted) -> tuple[float, float]:
    """Per-row seconds of the efficient IFVs together, and of the others together."""
    chosen = sum(fitted.costs[i] for i in fitted.selected)
    return chosen, sum(c for i, c in enumerate(fitted.costs) if i not in fitted.selected)


def _reference_cell(shares: np.ndarray, usable: np.ndarray) -> tuple[int, int]:
    """The cell explain() reports: the largest batch at k = 1% of it, or its nearest usable query."""
    i = len(shares) - 1
    j = topk_fit.QUERY_SHARES.index(0.01)
    on = np.flatnonzero(usable[i])
    if len(on) and not usable[i, j]:
        j = int(on[np.argmin(np.abs(on - j))])
    return i, j


def _measure_top_k(executor, fitted, valid: dict, summary: dict) -> None:
    """Time the filtered top-K against the exact one on the validation rows, at the reference
    query (as ``explain()`` shows it) scaled to all of them; keep the filter only if it is faster."""
    n = _rows(valid)
    k = max(1, round(summary["top_k_reference_query"]["k_share"] * n))
    keep = fitted.top_k_plan.candidates(n, k)
    if keep is None:
        return  # (the reference query runs exactly on this many rows: nothing to compare)
    discard = Stats()
    timings = {
        "exact": least_seconds(lambda: topk.exact(executor, valid, k)),
        "filtered": least_seconds(lambda: topk.filtered(executor, fitted, valid, k, keep, discard)),
    }
    speedup = timings["exact"] / timings["filtered"]
    summary["top_k_reference_query"]["measured_speedup"] = speedup
    if speedup <= 1:
        fitted.top_k_plan = None
        summary.pop("top_k_candidate_shares")
        fitted.top_k_reason = (
            f"measured on the validation rows, the exact top-K is faster "
            f"(filter speed-up {speedup:.2f}x for k={k} of {n} rows with {keep} candidates)"
        )
