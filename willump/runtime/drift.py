"""A serving-time guard: does the cascade still serve rows like the validation rows ``fit`` chose
its threshold on?

``fit`` records the small model's confidence on each validation row (the plan: a sorted sample
of at most ``VALIDATION_SAMPLE`` of them). While a cascade serves, the guard keeps the small
model's confidence on the last ``window`` rows served (``top_k`` queries are not counted) and,
once the window is full, every ``window // 4`` new rows tests it against validation:

- the share of rows the small model answers (confidence at least the threshold): a two-sided
  two-proportion z test of the window's share against validation's share at the same threshold;
- the confidences' distribution: a two-sample Kolmogorov-Smirnov test of the window against the
  validation rows (asymptotic p-value, Stephens' small-sample correction).

Drift is declared when either p-value is below ``ALPHA / 2`` (Bonferroni over the two tests: a
check of rows drawn like the validation rows raises a false alarm with probability at most about
``ALPHA``, so a million unshifted rows, 4,000 checks of a 1,000-row window, false-alarm with
probability at most about 4%). The tests take the window's rows as independent draws: a stream
ordered by time of day or by customer can differ from validation in each window without the
whole drifting.

On drift the guard warns once (``WillumpWarning``, what it saw against what validation saw) and,
with ``on_drift="exact"``, the function serves exactly from then on (``fell_back``). It then stops
checking: a guard raises at most one alarm, until ``fit`` builds a new one. Pickling keeps the
plan and the alarm; the window starts empty again.
"""

import math
import threading

import numpy as np
from scipy.special import erfc, kolmogorov

from willump.errors import warn

DEFAULT_WINDOW = 1000  # served rows tested together
ALPHA = 1e-5  # a check's false-alarm probability, split over the two tests
VALIDATION_SAMPLE = 1000  # validation confidences kept (evenly spaced quantiles when there are more rows)
ON_DRIFT = ("warn", "exact", None)


def check_options(on_drift, window) -> None:
    """A ValueError naming what is wrong with ``fit``'s drift options."""
    if on_drift not in ON_DRIFT:
        raise ValueError(
            f'on_drift must be "warn" (warn once), "exact" (warn, then serve exactly until fit is called '
            f"again) or None (no guard); got {on_drift!r}"
        )
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 4:
        raise ValueError(f"drift_window must be a number of served rows, at least 4; got {window!r}")


def fell_back(fitted) -> bool:
    """Has the fitted function's guard switched serving to the exact path?"""
    return fitted.drift is not None and fitted.drift.fell_back


class DriftGuard:
    """The plan (validation's confidences, ``window``, ``on_drift``) and the window it executes."""

    def __init__(self, validation_confidences, window: int = DEFAULT_WINDOW, on_drift: str = "warn",
                 alpha: float = ALPHA):
        confidences = np.sort(np.asarray(validation_confidences, dtype=float))
        self.validation_rows = len(confidences)
        if len(confidences) > VALIDATION_SAMPLE:
            confidences = np.quantile(confidences, (np.arange(VALIDATION_SAMPLE) + 0.5) / VALIDATION_SAMPLE)
        self.validation = confidences
        self.window, self.on_drift, self.alpha = int(window), on_drift, alpha
        self.checks = 0
        self.alarm = None  # the warning's message, once drift was seen
        self._start_window()

    def _start_window(self) -> None:
        self._lock = threading.Lock()
        self._recent = np.empty(self.window)  # a ring of the last confidences served
        self._next = self._filled = self._fresh = 0  # write position, rows held, rows since the last check

    @property
    def fell_back(self) -> bool:
        return self.alarm is not None and self.on_drift == "exact"

    def expected_share(self, threshold: float) -> float:
        """The share of validation rows the small model answers at ``threshold``."""
        return 1 - float(np.searchsorted(self.validation, threshold, side="left")) / len(self.validation)

    def observe(self, confidences: np.ndarray, threshold: float, stats) -> None:
        """Add served rows' confidences to the window; test it when it is due (counted in ``stats``)."""
        if self.alarm is not None:
            return
        with self._lock:
            self._write(confidences)
            if self._filled < self.window or self._fresh < self.window // 4:
                return
            self._fresh = 0
            recent = self._recent.copy()
        self._check(recent, threshold, stats)

    def _write(self, confidences: np.ndarray) -> None:
        n, size, start = len(confidences), self.window, self._next
        if n >= size:
            self._recent[:] = confidences[n - size:]
            self._next = 0
        elif start + n <= size:
            self._recent[start:start + n] = confidences
            self._next = (start + n) % size
        else:
            self._recent[start:] = confidences[:size - start]
            self._recent[:start + n - size] = confidences[size - start:]
            self._next = start + n - size
        self._filled = min(size, self._filled + n)
        self._fresh += n

    def _check(self, recent: np.ndarray, threshold: float, stats) -> None:
        share, expected = float(np.mean(recent >= threshold)), self.expected_share(threshold)
        share_p = _two_proportion_p(share, len(recent), expected, self.validation_rows)
        distance, distance_p = _kolmogorov_smirnov(np.sort(recent), self.validation, self.validation_rows)
        stats.add(drift_checks=1)
        with self._lock:
            self.checks += 1
            if min(share_p, distance_p) >= self.alpha / 2 or self.alarm is not None:
                return
            self.alarm = (
                f"willump: the served rows have drifted from the validation rows fit chose the cascade's "
                f"threshold on: over the last {len(recent)} rows the small model answered {share:.1%} "
                f"(validation: {expected:.1%} at threshold {threshold:g}; p = {share_p:.2g}) and its confidences "
                f"are {distance:.2f} from validation's in Kolmogorov-Smirnov distance (p = {distance_p:.2g}); "
                f"the bound is p < {self.alpha / 2:g} for either. The cascade's accuracy was checked on rows "
                f"like the validation rows only: call fit again with recent rows as validation. "
                + ("Serving is exact from now on, until fit is called again (on_drift='exact')."
                   if self.on_drift == "exact" else "The cascade keeps serving (on_drift='warn').")
            )
        stats.add(drift_alarms=1)
        warn(self.alarm)

    def describe(self, threshold) -> dict:
        """The guard's state, for ``explain()``."""
        if self.fell_back:
            serving = "exact since the drift alarm (on_drift='exact'), until fit is called again"
        else:
            serving = "cascaded" if threshold is not None else "cascades are off: nothing to guard"
        return {
            "window": self.window,
            "bound": f"two-proportion z test of the answered share and Kolmogorov-Smirnov test of the "
            f"confidences against the {self.validation_rows} validation rows, drift at p < {self.alpha / 2:g} "
            f"for either; tested every {self.window // 4} rows once the window is full",
            "on_drift": self.on_drift,
            "validation_answered_share": None if threshold is None else self.expected_share(threshold),
            "checks": self.checks,
            "alarms": int(self.alarm is not None),
            "alarm": self.alarm,
            "serving": serving,
        }

    def __getstate__(self):
        """The plan and its alarm; not the window, nor the checks counted (a call's drift check would
        otherwise change the function's pickle, and so its name, which Dask workers share it by)."""
        state = dict(self.__dict__)
        for name in ("_lock", "_recent", "_next", "_filled", "_fresh", "checks"):
            del state[name]
        return state

    def __setstate__(self, state):
        self.__dict__.update({"checks": 0, **state})
        self._start_window()


def _two_proportion_p(share: float, rows: int, expected: float, validation_rows: int) -> float:
    """Two-sided p-value of the window's share against validation's, pooled."""
    pooled = (share * rows + expected * validation_rows) / (rows + validation_rows)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / rows + 1 / validation_rows))
    if spread == 0:
        return 1.0  # both all answered or all unsure
    return float(erfc(abs(share - expected) / spread / math.sqrt(2)))


def _kolmogorov_smirnov(recent: np.ndarray, validation: np.ndarray, validation_rows: int) -> tuple:
    """(distance, p-value) of two sorted samples, ``validation`` standing for ``validation_rows``."""
    points = np.concatenate([recent, validation])
    distance = float(np.max(np.abs(
        np.searchsorted(recent, points, side="right") / len(recent)
        - np.searchsorted(validation, points, side="right") / len(validation)
    )))
    effective = math.sqrt(len(recent) * validation_rows / (len(recent) + validation_rows))
    return distance, float(kolmogorov((effective + 0.12 + 0.11 / effective) * distance))
