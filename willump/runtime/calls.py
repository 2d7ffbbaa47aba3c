"""What one call of an optimized function counts, and the caches its lookups may use.

A call runs between ``start_call(stats, caches)`` and ``end_call``. Tables ask
``lookup_cache`` for the rows this function already fetched, and report the keys
they fetch with ``count_remote``: both reach the function whose call asked, in
whatever thread the lookup runs (the call's context is passed to worker threads).
"""

import contextvars
import threading

from willump.compile.sites import put_back_plain, take_newly_plain
from willump.errors import warn


class Stats:
    """Thread-safe counters of what the optimized function did."""

    FIELDS = (
        "rows_seen", "rows_small_model", "rows_full_model", "top_k_queries", "top_k_candidates",
        "cache_hits", "cache_misses", "feature_row_hits", "feature_row_misses", "remote_keys",
        "remote_round_trips", "drift_checks", "drift_alarms",
    )

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(self.FIELDS, 0)

    def count(self, rows=0, small=0, full=0, top_k_candidates=0) -> None:
        with self._lock:
            self._counts["rows_seen"] += rows
            self._counts["rows_small_model"] += small
            self._counts["rows_full_model"] += full
            if top_k_candidates:
                self._counts["top_k_queries"] += 1
                self._counts["top_k_candidates"] += top_k_candidates

    def add(self, **counts: int) -> None:
        """Add to the named counters (``cache_hits=3``...)."""
        with self._lock:
            for name, value in counts.items():
                self._counts[name] += value

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self._counts)

    def __getstate__(self):
        return self.snapshot()

    def __setstate__(self, counts):
        self._lock = threading.Lock()
        self._counts = {**dict.fromkeys(self.FIELDS, 0), **counts}


_current: contextvars.ContextVar = contextvars.ContextVar("willump_call", default=None)  # (stats, caches)


def start_call(stats: Stats, caches=None):
    """Lookups from now on count in ``stats`` and may use ``caches``, until ``end_call(token)``."""
    return _current.set((stats, caches))


def end_call(token) -> None:
    _current.reset(token)


def name_plain_calls(raised: bool = False) -> None:
    """Name in one WillumpWarning the calls of a library's operators that ran as plain Python, no kernel
    standing for them, for the first time since the last time this was asked (``sites.PlainCall``), by
    function (optimized functions may call each other). Asked after every call, one that ``raised`` too (its
    own exception follows; where warnings are errors, they are named after the next call that returns)."""
    plain = take_newly_plain()
    if plain:
        functions = {}
        for call in plain:
            functions.setdefault(call.where, {})[f"line {call.line}: {call.operator}"] = None  # (paths' sites: once)
        named = "; ".join(f"in {where}, " + ", ".join(lines) for where, lines in functions.items())
        try:
            warn(f"willump: these calls run as plain Python, as written, no compiled kernel answering them ({named}); "
                 "explain_compilation() lists them")
        except Warning:
            if not raised:
                raise
            put_back_plain(plain)


def _add(**counts: int) -> None:
    call = _current.get()
    if call is not None:
        call[0].add(**counts)


def count_remote(keys: int, round_trips: int) -> None:
    """Record keys fetched from a remote table, for the optimized call being served (if any)."""
    _add(remote_keys=keys, remote_round_trips=round_trips)


def count_cached(hits: int, misses: int) -> None:
    """Record rows found in, and missing from, the table-row (or prediction) caches."""
    _add(cache_hits=hits, cache_misses=misses)


def count_rows_cached(hits: int, misses: int) -> None:
    """Record IFV rows found in, and missing from, the feature-row caches."""
    _add(feature_row_hits=hits, feature_row_misses=misses)


def lookup_cache(table):
    """The cache of ``table``'s stored rows for the call being served, or None."""
    call = _current.get()
    if call is None or call[1] is None:
        return None
    return call[1].for_table(table)
