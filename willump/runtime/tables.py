"""Feature tables keyed by one column, in memory or in Redis.

``lookup(keys)`` answers the same way for both: a DataFrame with the table's
columns, one row per key in the keys' order (duplicates repeated), index taken
from ``keys``, and a row of NaN for a key the table does not hold, with the
dtypes pandas' ``reindex`` gives such a frame (int columns become float64 when a
key is missing, bool columns object). Keys match by value as Python compares
them (``1 == 1.0 == True``); a NaN or None key matches nothing, nor does a key of
another kind (a str on an int-keyed table). Its columns of one dtype are one row-major
block whatever keys were found, repeated or missing, so its ``to_numpy`` is F-ordered
(a model computes other bits on a C-ordered matrix; the feature-row caches rebuild F).

In Redis, each row is one string value under ``"<name>:<canonical key>"`` (see
``canonical_key``: ``"users:i:42"``, ``"users:s:abc"``) and the column
names and dtypes one JSON value under ``"<name>:__schema__"``, so a lookup is a
single ``MGET``: one command and one round trip however many keys, where a hash
per row would take a command per key. Numbers are stored as their bytes in the
column's dtype (exact, and decoded for all rows by one ``numpy.frombuffer``),
strings as UTF-8 after their length.
"""

import itertools
import json
import math
import struct
import threading
import weakref

import numpy as np
import pandas as pd

from willump.errors import RemoteLookupError
from willump.runtime.caches import MISSING
from willump.runtime.calls import count_cached, count_remote, lookup_cache

_FORMAT = 1
_TEXT = ("str", "string", "object")  # dtypes of str columns, by name (str values, or missing)
_MISSING = {0xFFFFFFFF: np.nan, 0xFFFFFFFE: None, 0xFFFFFFFD: pd.NA}  # lengths that mark a missing str
_LENGTH = struct.Struct("<I")
_EXACT = 2**53  # ints up to this size are exact in float64


def canonical_key(key) -> str | None:
    """The text a key is stored under, equal for keys Python finds equal; None for a key
    that matches nothing (NaN, None, and kinds that are neither numbers nor strings)."""
    if isinstance(key, (bool, np.bool_, int, np.integer)):
        return f"i:{int(key)}"
    if isinstance(key, (float, np.floating)):
        if math.isnan(key):
            return None
        if float(key).is_integer():
            return f"i:{int(key)}"
        return f"f:{float(key)!r}"
    if isinstance(key, str):
        return f"s:{key}"
    return None


class Table:
    """What both tables share: keys in, an aligned DataFrame out."""

    name: str
    key: str

    def __init__(self):
        self._counts_lock = threading.Lock()
        self.remote_keys = 0  # keys fetched from a remote store (0 for memory tables)
        self.round_trips = 0  # requests sent to it

    def lookup(self, keys) -> pd.DataFrame:
        """Rows for ``keys`` (a Series, Index, array or list), aligned with them."""
        index, canonical = _keys(keys)
        positions, stored = self._stored_rows(canonical)
        rows = self._frame(stored)  # the found keys' rows, in the order ``positions`` counts them
        if len(rows) == len(canonical) and (positions == np.arange(len(canonical))).all():
            frame = rows
        elif (positions >= 0).all():
            frame = _row_major(rows.take(positions))
        elif len(positions) == 1:  # one key, not in the table
            frame = self._missing_row(rows)
        else:
            frame = _row_major(rows.reindex(positions))  # -1 is no label: a NaN row, with pandas' dtypes
        frame.index = index
        return frame

    def float_rows(self, canonical: list, columns: list | None = None, fetched=None) -> np.ndarray:
        """``lookup(keys)[columns].to_numpy(dtype=float)`` (all columns for None), given the
        keys' ``canonical_key``, without building the frame: the same values, a row of NaN for
        a key the table does not hold. TypeError for a str column, KeyError for one it lacks.
        ``fetched``: what ``fetch_together`` gave this table for these keys (or more)."""
        names = self.columns if columns is None else list(columns)
        missing = [c for c in names if c not in self.columns]
        if missing:
            raise KeyError(f"{missing} not among the columns of table {self.name!r}")
        positions, stored = self._stored_rows(canonical, fetched)
        found = self._floats(stored, names)
        rows = np.full((len(canonical), len(names)), np.nan)
        present = positions >= 0
        rows[present] = found[positions[present]]
        return rows

    def column_keys(self, canonical: list, column: str, fetched=None) -> list:
        """The ``canonical_key`` of each value of ``lookup(keys)[column]``: what a lookup keyed by
        that column matches (None where the table does not hold the key)."""
        if column not in self.columns:
            raise KeyError(f"{column!r} is not a column of table {self.name!r}")
        positions, stored = self._stored_rows(canonical, fetched)
        values = self._values(stored, column)
        if any(type(v) is int and not -_EXACT <= v <= _EXACT for v in values):
            # (a lookup that misses a key turns an int column to float64, which rounds these: the
            # keys they match would depend on the other keys looked up with them)
            raise ValueError(f"column {column!r} of table {self.name!r} holds ints that float64 rounds")
        return [None if p < 0 else canonical_key(values[p]) for p in positions.tolist()]

    def _stored_rows(self, canonical: list, fetched=None):
        """(for each key, the position of its row among the found rows or -1; the found rows as
        this table holds them), each distinct key read once (or taken from ``fetched``)."""
        if fetched is None:
            fetched = self._fetch(list(dict.fromkeys(k for k in canonical if k is not None)))
        found, stored = fetched
        position = {k: i for i, k in enumerate(found)}
        positions = np.fromiter((position.get(k, -1) for k in canonical), dtype=np.intp, count=len(canonical))
        return positions, stored

    _missing = None  # (version, the frame of one missing row)

    def _missing_row(self, rows: pd.DataFrame) -> pd.DataFrame:
        """``rows.reindex([-1])`` (no rows found): the same until a ``put`` (the columns and dtypes
        change only with one), so built once per version and copied (a reindex costs several times
        a copy)."""
        held = self._missing
        if held is None or held[0] != self.version:
            held = self._missing = (self.version, rows.reindex(np.array([-1], dtype=np.intp)))
        return held[1].copy()

    # What each kind of table provides: ``_fetch(wanted)`` -> (the keys found, their rows as the
    # table holds them); ``_frame``, ``_floats`` and ``_values`` read those rows.
    def _fetch(self, wanted: list) -> tuple[list, object]:
        raise NotImplementedError

    def _count(self, keys: int, round_trips: int) -> None:
        with self._counts_lock:
            self.remote_keys += keys
            self.round_trips += round_trips
        count_remote(keys, round_trips)


class MemoryTable(Table):
    """A feature table held in this process: ``MemoryTable(frame, key)``; the same answers as
    ``RedisTable``, for tests and for users without Redis."""

    def __init__(self, frame: pd.DataFrame, key: str, columns=None, name: str = "table"):
        super().__init__()
        self._setup(name, key, _Held(*_prepared(frame, key, columns)))

    def _setup(self, name: str, key: str, held: "_Held") -> None:
        self.name, self.key, self._held = name, key, held
        self.columns = list(held.rows.columns)
        self.version = 0  # puts through this object: caches of looked-up rows start again after one

    def __getstate__(self):
        """Its rows, key and name (the arrays and locks are built again on load)."""
        return {"name": self.name, "key": self.key, "rows": self._held.rows, "positions": self._held.positions}

    def __setstate__(self, state):
        Table.__init__(self)
        self._setup(state["name"], state["key"], _Held(state["rows"], state["positions"]))

    def put(self, frame: pd.DataFrame) -> None:
        """Add or replace the rows of ``frame`` (keyed by its ``key`` column)."""
        new, positions = _prepared(frame, self.key, self.columns)
        held = self._held
        before, given = _describe(held.rows), _describe(new)
        if before != given:
            raise ValueError(
                f"MemoryTable {self.name!r} holds columns {before} (name, dtype); the frame has {given}: "
                "put rows with the same columns and dtypes"
            )
        kept = [k for k in held.positions if k not in positions]
        old = held.rows.take([held.positions[k] for k in kept])
        rows = pd.concat([old, new], ignore_index=True) if kept else new
        self._held = _Held(rows, {k: i for i, k in enumerate(kept + list(positions))})  # (one assignment:
        self.version += 1  # a lookup running meanwhile reads the rows before or after, not a mix)

    def _fetch(self, wanted: list) -> tuple[list, tuple]:
        held = self._held
        found = [k for k in wanted if k in held.positions]
        return found, (held, np.array([held.positions[k] for k in found], dtype=np.intp))

    def _frame(self, stored: tuple) -> pd.DataFrame:
        held, positions = stored
        return held.rows.take(positions).reset_index(drop=True)

    def _floats(self, stored: tuple, names: list) -> np.ndarray:
        held, positions = stored
        if not names:
            return np.empty((len(positions), 0))
        return np.column_stack([held.column(name, self.name, floats=True)[positions] for name in names])

    def _values(self, stored: tuple, column: str) -> list:
        held, positions = stored
        return held.column(column, self.name)[positions].tolist()

    def __repr__(self):
        return f"MemoryTable({self.name!r}, key={self.key!r}, {len(self._held.positions)} rows, columns={self.columns})"


class _Held:
    """A MemoryTable's rows, the position of each key's row, and the columns read as arrays."""

    def __init__(self, rows: pd.DataFrame, positions: dict):
        self.rows, self.positions = rows, positions
        self._arrays = {}  # (column, as floats) -> its values, for float_rows and column_keys

    def column(self, name: str, table: str, floats: bool = False) -> np.ndarray:
        key = (name, floats)
        if key not in self._arrays:
            column = self.rows[name]
            if floats and column.dtype.kind not in "biuf":
                raise TypeError(f"column {name!r} of table {table!r} holds {column.dtype}, not numbers")
            self._arrays[key] = column.to_numpy(dtype=float) if floats else column.to_numpy()
        return self._arrays[key]


class RedisTable(Table):
    """A feature table in Redis: ``RedisTable(client, name, key, columns=None, timeout=1.0)``.

    ``client`` is a ``redis.Redis`` (its server, database and credentials are used, through a
    connection pool of the table's own). Every request gives up after ``timeout`` seconds with
    ``RemoteLookupError``, which names the
    table and the server; a connection dropped mid-request is retried once.

    A pickled table holds how to reach the server (the client's connection class and settings),
    its name, key, ``columns=`` and ``timeout``; the loaded table connects on its first request.
    """

    def __init__(self, client, name: str, key: str, columns=None, timeout: float = 1.0):
        super().__init__()
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError(f"a RedisTable's name must be a non-empty str without ':'; got {name!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}")
        pool = client.connection_pool
        self._setup({"name": name, "key": key, "columns": None if columns is None else list(columns),
                     "timeout": timeout, "connection_class": pool.connection_class,
                     "settings": _connection_settings(pool.connection_kwargs)})

    def _setup(self, state: dict) -> None:
        """Become the table ``state`` (``__getstate__``'s) describes, with no client yet."""
        self._state = state
        self.name, self.key, self._wanted_columns = state["name"], state["key"], state["columns"]
        settings = state["settings"]
        self.address = _address(settings)
        db = settings.get("db", 0)
        self._server = (self.address, db, settings.get("username"), settings.get("password"), state["timeout"])
        self._version = _shared_version((self.address, db, self.name))
        self._schema = None  # (the version it was read at, its codec)
        self._client = None
        self._client_lock = threading.Lock()

    def __getstate__(self):
        return self._state

    def __setstate__(self, state):
        Table.__init__(self)
        self._setup(state)

    @property
    def client(self):
        """The table's own ``redis.Redis``, built on first use."""
        client = self._client
        if client is None:
            with self._client_lock:
                if self._client is None:
                    state = self._state
                    self._client = _own_client(state["connection_class"], state["settings"], state["timeout"])
                client = self._client
        return client

    @property
    def version(self) -> int:
        """Changes on a ``put`` to this table (server, database, name) through any table object
        of this process: caches of looked-up rows, and the schema read, start again after one."""
        return self._version.value

    @property
    def columns(self) -> list:
        """The columns a lookup returns (read from Redis once)."""
        return self._wanted_columns if self._wanted_columns is not None else self._codec().names

    def put(self, frame: pd.DataFrame) -> None:
        """Store the rows of ``frame`` under the values of its ``key`` column (one pipelined
        request); the table's columns and dtypes are those of ``frame`` without the key."""
        stored, positions = _prepared(frame, self.key, None)
        codec = _Codec([(c, _stored_dtype(stored[c])) for c in stored.columns])
        held = self._stored_codec()
        if held is not None and held.describe() != codec.describe():
            raise ValueError(
                f"RedisTable {self.name!r} holds columns {held.describe()} (name, dtype); the frame has "
                f"{codec.describe()}: put rows with the same columns and dtypes"
            )
        encoded = codec.encode(stored)
        schema = json.dumps({"format": _FORMAT, "key": self.key, "columns": codec.describe()})
        keys = [f"{self.name}:{k}" for k in positions]

        def request():
            pipe = self.client.pipeline(transaction=False)
            pipe.set(f"{self.name}:__schema__", schema)
            for start in range(0, len(keys), 10_000):
                pipe.mset(dict(zip(keys[start : start + 10_000], encoded[start : start + 10_000])))
            pipe.execute()

        self._request(request, "write rows to")
        self._version.value = next(_puts)

    def _fetch(self, wanted: list) -> tuple[list, tuple]:
        return fetch_together({self: wanted})[self]

    def _cached(self, wanted: list) -> tuple:
        """(this call's cache of the table's stored rows or None; each wanted key's row from it,
        or MISSING; the keys missing)."""
        cache = lookup_cache(self)  # the rows an optimized function fetched before, as stored
        if cache is None:
            return None, [MISSING] * len(wanted), list(wanted)
        values = cache.get_many(wanted)
        missing = [k for k, v in zip(wanted, values) if v is MISSING]
        count_cached(len(wanted) - len(missing), len(missing))
        return cache, values, missing

    def _mget(self, client, keys: list):
        """Queue (on a pipeline) or send the request for the stored rows of ``keys``."""
        return client.mget([f"{self.name}:{k}" for k in keys])

    def _finish(self, wanted: list, cache, values: list, missing: list, fetched: list) -> tuple[list, tuple]:
        """(the keys found, their rows decoded to parts) from cached ``values`` and the rows
        ``fetched`` for ``missing``, which then go to ``cache``."""
        codec = self._codec()
        if len(missing) == len(wanted):
            values = fetched
        elif missing:
            fresh = iter(fetched)
            values = [next(fresh) if v is MISSING else v for v in values]
        found = [k for k, v in zip(wanted, values) if v is not None]
        present = [v for v in values if v is not None]
        try:
            parts = codec.parts(present)
        except (ValueError, struct.error):  # (UnicodeDecodeError is a ValueError)
            bad = next(k for k, v in zip(found, present) if not codec.valid(v))
            raise RemoteLookupError(
                f"RedisTable {self.name!r} at {self.address}: the value stored for key {bad[2:]!r} "
                f"cannot be decoded as a row of columns {self.columns}; write it again with put()"
            ) from None
        if cache is not None and missing:  # (only rows that decoded: a bad value is fetched again)
            cache.put_many(zip(missing, fetched))
        return found, parts

    def _frame(self, parts: tuple) -> pd.DataFrame:
        """The decoded rows with only the ``columns=`` asked for (all of them without it)."""
        rows = self._codec().frame(parts)
        return rows if self._wanted_columns is None else rows[self.columns]

    def _floats(self, parts: tuple, names: list) -> np.ndarray:
        packed, texts = parts
        codec = self._codec()
        rows = np.empty((len(packed), len(names)))
        for j, name in enumerate(names):
            if name in texts:
                raise TypeError(f"column {name!r} of table {self.name!r} holds str, not numbers")
            rows[:, j] = packed[codec.field[name]]  # (numpy's cast, as to_numpy(dtype=float) makes it)
        return rows

    def _values(self, parts: tuple, column: str) -> list:
        packed, texts = parts
        return texts[column] if column in texts else packed[self._codec().field[column]].tolist()

    def _codec(self) -> "_Codec":
        held, version = self._schema, self._version.value
        if held is not None and held[0] == version:
            return held[1]
        codec = self._stored_codec()
        if codec is None:
            if self._holds_rows():
                raise RemoteLookupError(
                    f"RedisTable {self.name!r} at {self.address} holds rows but its schema key "
                    f"'{self.name}:__schema__' (the columns and dtypes) is missing: write the rows again with "
                    "put(frame), which writes it"
                )
            raise RemoteLookupError(
                f"RedisTable {self.name!r} at {self.address} holds no rows: write them with put(frame) first"
            )
        missing = sorted(set(self._wanted_columns or []) - set(codec.names))
        if missing:
            raise ValueError(f"RedisTable {self.name!r} has no column(s) {missing}; it has {codec.names}")
        self._schema = (version, codec)
        return codec

    def _holds_rows(self) -> bool:
        """Is any key of this table stored (asked only when its schema is missing)?"""
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self.name) + ":*"
        return self._request(lambda: next(self.client.scan_iter(match=pattern, count=1000), None) is not None,
                             "look for the rows of")

    def _stored_codec(self) -> "_Codec | None":
        text = self._request(lambda: self.client.get(f"{self.name}:__schema__"), "read the schema of")
        self._count(0, 1)
        if text is None:
            return None
        schema = json.loads(text)
        return _Codec([(name, dtype if dtype in _TEXT else np.dtype(dtype)) for name, dtype in schema["columns"]])

    def _request(self, request, what: str):
        import redis  # (a dependency, imported when a table is used)

        for attempt in (1, 2):
            try:
                return request()
            except redis.exceptions.TimeoutError as error:
                raise RemoteLookupError(
                    f"RedisTable {self.name!r}: Redis at {self.address} did not answer within the timeout "
                    f"when asked to {what} the table ({error})"
                ) from error
            except redis.exceptions.ConnectionError as error:
                if attempt == 2:
                    raise RemoteLookupError(
                        f"RedisTable {self.name!r}: cannot reach Redis at {self.address} to {what} the table "
                        f"({error})"
                    ) from error

    def __repr__(self):
        return f"RedisTable({self.name!r}, key={self.key!r}, at {self.address})"


def fetch_together(requests: dict) -> dict:
    """{table: (the keys found, their stored rows)} for {table: wanted canonical keys}: what each
    table's own fetch gives, with the rows that Redis tables of one server lack from the call's
    caches fetched in one round trip (a pipeline of one ``MGET`` per table), counted on the
    first of them."""
    results, pending, servers = {}, {}, {}
    for table, wanted in requests.items():
        if not isinstance(table, RedisTable):
            results[table] = table._fetch(wanted)
            continue
        table._codec()  # (the schema first: a table without rows says so)
        pending[table] = (wanted, *table._cached(wanted))
        if pending[table][3]:
            servers.setdefault(table._server, []).append(table)
    fetched = {}
    for tables in servers.values():
        first = tables[0]

        def request(tables=tables, first=first):
            if len(tables) == 1:  # (a pipeline of one costs more than the command)
                return [first._mget(first.client, pending[first][3])]
            pipe = first.client.pipeline(transaction=False)
            for table in tables:
                table._mget(pipe, pending[table][3])
            return pipe.execute()

        for table, answer in zip(tables, first._request(request, "look up keys in")):
            fetched[table] = answer
            table._count(len(pending[table][3]), 1 if table is first else 0)
    for table, (wanted, cache, values, missing) in pending.items():
        results[table] = table._finish(wanted, cache, values, missing, fetched.get(table, []))
    return results


class _Codec:
    """Rows as bytes: the numeric columns packed in their dtypes, then each str column."""

    def __init__(self, columns: list):
        self.columns = columns
        self.names = [name for name, _ in columns]
        numeric = [(name, dtype) for name, dtype in columns if dtype not in _TEXT]
        self.record = np.dtype([(f"f{i}", dtype.newbyteorder("<")) for i, (_, dtype) in enumerate(numeric)])
        self.numeric = [name for name, _ in numeric]
        self.field = {name: f"f{i}" for i, name in enumerate(self.numeric)}
        self.strings = [(name, dtype) for name, dtype in columns if dtype in _TEXT]
        self.column_index = pd.Index(self.names)

    def describe(self) -> list:
        return [[name, dtype if dtype in _TEXT else dtype.str] for name, dtype in self.columns]

    def encode(self, frame: pd.DataFrame) -> list[bytes]:
        packed = np.empty(len(frame), self.record)
        for i, name in enumerate(self.numeric):
            packed[f"f{i}"] = frame[name].to_numpy()
        rows = [packed[i].tobytes() for i in range(len(frame))] if self.record.itemsize else [b""] * len(frame)
        for name, _ in self.strings:
            rows = [row + _string_bytes(value, name) for row, value in zip(rows, frame[name].tolist())]
        return rows

    def parts(self, values: list) -> tuple:
        """(the numeric columns as one record array, {str column: its values}), checked:
        ValueError or struct.error for a value that is not a row of these columns."""
        size = self.record.itemsize
        if not self.strings and any(len(v) != size for v in values):
            raise ValueError("a row of the wrong length")
        packed = np.frombuffer(b"".join(v[:size] for v in values), self.record) if size else np.empty(len(values), self.record)
        if len(packed) != len(values):
            raise ValueError("a row of the wrong length")
        texts = {}
        if self.strings:
            columns = [[] for _ in self.strings]
            for value in values:
                at = size
                for column in columns:
                    text, at = _read_string(value, at)
                    column.append(text)
                if at != len(value):
                    raise ValueError("a row of the wrong length")
            texts = {name: column for (name, _), column in zip(self.strings, columns)}
        return packed, texts

    def frame(self, parts: tuple) -> pd.DataFrame:
        packed, texts = parts
        data = {name: packed[self.field[name]].astype(self.record[i].newbyteorder("="), copy=True)
                for i, name in enumerate(self.numeric)}
        data.update({name: _text_array(texts[name], dtype) for name, dtype in self.strings})
        # (arrays of the right length and types, in the table's column order: pandas' checking
        # constructor costs three times more, a large part of a single-row lookup)
        return pd.DataFrame._from_arrays(
            [data[name] for name in self.names], columns=self.column_index.copy(), index=pd.RangeIndex(len(packed)),
            verify_integrity=False,
        )

    def valid(self, value: bytes) -> bool:
        try:
            self.parts([value])
        except (ValueError, struct.error):
            return False
        return True


def _row_major(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``, or a copy whose numeric blocks are row-major, as pandas builds a frame from its
    columns: so that ``to_numpy`` of a lookup (of its columns) is F-ordered whatever keys were
    found, repeated or missing. (pandas' take and reindex of one found row, or of a column-major
    block, give a column-major block, whose ``to_numpy`` is C-ordered; a model reading one layout
    or the other computes other bits, and the feature-row caches rebuild the F order.)"""
    for block in frame._mgr.blocks:
        values = block.values
        if isinstance(values, np.ndarray) and min(values.shape) > 1 and abs(values.strides[0]) < abs(values.strides[1]):
            columns = [frame._mgr.iget_values(j) for j in range(frame.shape[1])]
            return pd.DataFrame._from_arrays(columns, columns=frame.columns, index=frame.index, verify_integrity=False)
    return frame


def _text_array(values: list, dtype: str):
    """A str column's values as the array ``pd.Series(values, dtype=dtype)`` holds."""
    if dtype == "object":
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    return pd.array(values, dtype=dtype)


def _describe(frame: pd.DataFrame) -> list:
    return _Codec([(c, _stored_dtype(frame[c])) for c in frame.columns]).describe()


def _stored_dtype(column: pd.Series):
    """A numpy dtype, or the name of a str column's dtype."""
    dtype = column.dtype
    if dtype.kind in "biuf" and isinstance(dtype, np.dtype):
        return dtype
    name = "object" if dtype == object else str(dtype)
    if name not in _TEXT:
        raise TypeError(f"column {column.name!r} has dtype {dtype}; feature tables hold bool, int, float and str columns")
    return name


def _string_bytes(value, column: str) -> bytes:
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return _LENGTH.pack(len(data)) + data
    for marker, missing in _MISSING.items():
        if value is missing or (isinstance(value, float) and math.isnan(value) and missing is np.nan):
            return _LENGTH.pack(marker)
    raise TypeError(f"column {column!r} holds {value!r}; a str column holds str values, None, NaN or pd.NA")


def _read_string(value: bytes, at: int):
    (length,) = _LENGTH.unpack_from(value, at)
    at += _LENGTH.size
    if length in _MISSING:
        return _MISSING[length], at
    if at + length > len(value):
        raise ValueError("a string beyond the row's end")
    return value[at : at + length].decode("utf-8", "surrogatepass"), at + length


def _prepared(frame: pd.DataFrame, key: str, columns) -> tuple[pd.DataFrame, dict]:
    """(the feature columns with a RangeIndex, canonical key -> row), checked."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"a feature table is written from a DataFrame; got {type(frame).__name__}")
    if key not in frame.columns:
        raise KeyError(f"the key column {key!r} is not among the frame's columns {list(frame.columns)}")
    names = [c for c in frame.columns if c != key] if columns is None else list(columns)
    missing = [c for c in names if c not in frame.columns or c == key]
    if missing:
        raise KeyError(f"column(s) {missing} are not feature columns of the frame")
    canonical = [canonical_key(k) for k in frame[key].tolist()]
    bad = [k for k, c in zip(frame[key].tolist(), canonical) if c is None]
    if bad:
        raise ValueError(f"key column {key!r} holds {bad[0]!r}: keys must be numbers or str, not NaN or None")
    positions = {c: i for i, c in enumerate(canonical)}
    if len(positions) != len(canonical):
        duplicate = next(k for k, c in zip(frame[key].tolist(), canonical) if canonical.count(c) > 1)
        raise ValueError(f"key column {key!r} holds {duplicate!r} more than once; keys must be unique")
    features = _row_major(frame[names].reset_index(drop=True))  # (else each lookup would copy its rows again)
    for name in names:
        _stored_dtype(features[name])
    return features, positions


def _keys(keys) -> tuple[pd.Index, list]:
    """(the index of the result, the canonical key of each key)."""
    if isinstance(keys, pd.DataFrame):
        raise TypeError("lookup() takes one column of keys (a Series, Index, array or list), not a DataFrame")
    if isinstance(keys, pd.Series):
        return keys.index.copy(), [canonical_key(k) for k in keys.tolist()]
    values = list(keys.tolist() if hasattr(keys, "tolist") else keys)
    return pd.RangeIndex(len(values)), [canonical_key(k) for k in values]


_puts = itertools.count(1)  # versions given by puts, distinct across tables
_versions = weakref.WeakValueDictionary()  # (address, db, name) -> its _Version, while a table holds it
_versions_lock = threading.Lock()


class _Version:
    """The version of one Redis table, shared by the table objects of this process that name it."""

    __slots__ = ("value", "__weakref__")

    def __init__(self):
        self.value = 0


def _shared_version(table: tuple) -> _Version:
    with _versions_lock:
        version = _versions.get(table)
        if version is None:
            version = _versions[table] = _Version()
        return version


# The settings that say how to reach a server and talk to it, named alike from redis-py 4.5 on
# (with every ``ssl_*``): the rest of a pool's settings are objects of the installed redis-py
# (its driver information, notification handlers...), which another version may not load or take.
_SERVER_SETTINGS = (
    "host", "port", "path", "db", "username", "password", "credential_provider", "client_name", "protocol",
    "socket_connect_timeout", "socket_keepalive", "socket_keepalive_options", "health_check_interval",
    "encoding", "encoding_errors",
)


def _connection_settings(connection_kwargs: dict) -> dict:
    """A pool's settings that say how to reach its server (host and port or unix path, db,
    credentials, ssl...) and are not left at their default (None, or redis-py's marker of one, a
    bare ``object()``: another redis-py may not know the setting, and the marker would not
    survive a pickle)."""
    return {name: value for name, value in connection_kwargs.items()
            if (name in _SERVER_SETTINGS or name.startswith("ssl_")) and value is not None
            and type(value) is not object}


def _own_client(connection_class, settings: dict, timeout: float):
    """A client of the server ``settings`` describe whose requests give up after ``timeout``
    seconds and are not retried by redis-py (its default retries, with backoff, would multiply
    the wait; the table retries a dropped connection once itself), and that answers bytes (the
    rows are bytes, whatever ``decode_responses`` the user's client has)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    settings = {**settings, "socket_timeout": timeout, "retry": Retry(NoBackoff(), 0), "decode_responses": False}
    if "path" not in settings:  # (a unix socket connects at once or fails; redis-py 4.5 has no such option there)
        settings["socket_connect_timeout"] = timeout
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=connection_class, **settings))


def _address(settings: dict) -> str:
    if "path" in settings:
        return f"unix:{settings['path']}"
    return f"{settings.get('host', 'localhost')}:{settings.get('port', 6379)}"
