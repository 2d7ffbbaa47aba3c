"""How an optimized function travels: what its pickle holds for the function it wraps, and
``predict.save(path)`` / ``willump.load(path)``, one file holding an optimized function; and how a
Dask worker process builds one function once for all the tasks that unpickle it.

The file is a signature, a JSON header (format version, the versions of the packages that
saved it, the payload's size and SHA-256) and a cloudpickle payload: the function (by value
when it lives in ``__main__``, a notebook or a closure), its source, its models and its fitted
state. Loading runs code from the payload, as pickle does: load only files you trust.
"""

import collections
import contextvars
import functools
import hashlib
import importlib
import importlib.metadata
import io
import json
import os
import pickle
import platform
import secrets
import struct
import sys
import threading
import typing
import warnings

from willump.compile.forest import PACKED_LAYOUT
from willump.compile.parallel import in_dask_worker
from willump.errors import InconsistentVersionWarning
from willump.graph.source import read_function

SIGNATURE = b"\x89WILLUMP\r\n\x1a\n"  # (as PNG's: a text-mode copy or a truncated start shows)
FORMAT = 1
_HEADER_LENGTH = struct.Struct("<I")
_PACKAGES = ("willump", "numpy", "pandas", "scipy", "scikit-learn", "lightgbm", "numba", "cloudpickle")


def save(optimized, path) -> None:
    """Write ``optimized`` to ``path`` (replaced whole: a failed save leaves what was there), with
    the arrays its kernels built from the models it holds (``load`` does not build them again)."""
    import cloudpickle

    carrying = _CARRYING.set(True)
    try:
        payload = cloudpickle.dumps(optimized)
    finally:
        _CARRYING.reset(carrying)
    header = json.dumps({
        "format": FORMAT,
        "object": _type_name(optimized),
        "versions": _versions(),
        "payload_bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }).encode()
    path = os.fspath(path)
    temporary = f"{path}.{secrets.token_hex(6)}.tmp"  # (beside it: the rename is atomic)
    try:
        with open(temporary, "xb") as file:
            for part in (SIGNATURE, _HEADER_LENGTH.pack(len(header)), header, payload):
                file.write(part)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def load(path):
    """The optimized function saved at ``path`` by ``save``. ``ValueError`` for a file that is
    not willump's, is truncated or corrupted, or has a newer format; an
    ``InconsistentVersionWarning`` when it was saved under other package versions."""
    import cloudpickle

    with open(path, "rb") as file:
        content = memoryview(file.read())  # (slices of it share its bytes: the payload is not copied)
    header, payload = _parts(content, path)
    differences = _differences(header.get("versions", {}))
    if differences:
        listed = ", ".join(f"{name} {saved} (now {current})" for name, (saved, current) in differences.items())
        warnings.warn(InconsistentVersionWarning(
            f"{path} was saved under {listed}: its answers may differ from the saving process's, "
            "or loading may fail; save it again under these versions", differences), stacklevel=2)
    try:
        optimized = cloudpickle.loads(payload)
    except Exception as error:
        hint = " (it was saved under another Python version)" if "python" in differences else ""
        raise ValueError(f"{path} could not be loaded{hint}: {type(error).__name__}: {error}") from error
    if _type_name(optimized) != header.get("object"):
        raise ValueError(f"{path} holds a {_type_name(optimized)}, not the {header.get('object')} its header names")
    return optimized


def _parts(content: bytes, path) -> tuple[dict, bytes]:
    """(the header, the payload) of a file's content, checked."""
    if bytes(content[:len(SIGNATURE)]) != SIGNATURE:
        raise ValueError(f"{path} is not a willump file (it does not start with willump's signature); "
                         "write one with predict.save(path)")
    start = len(SIGNATURE) + _HEADER_LENGTH.size
    if len(content) < start:
        raise ValueError(f"{path} is truncated: it ends inside willump's header; save it again")
    (length,) = _HEADER_LENGTH.unpack_from(content, len(SIGNATURE))
    try:
        header = json.loads(bytes(content[start:start + length]))
    except ValueError:
        raise ValueError(f"{path} is truncated or corrupted: its header cannot be read; save it again") from None
    if not isinstance(header, dict) or not isinstance(header.get("format"), int):
        raise ValueError(f"{path} is corrupted: its header names no format; save it again")
    if header["format"] > FORMAT:
        raise ValueError(
            f"{path} was written by a newer willump ({header.get('versions', {}).get('willump')}, file format "
            f"{header['format']}); this willump ({_versions()['willump']}) reads format {FORMAT} and older: "
            "upgrade willump to load it")
    payload = content[start + length:]
    expected = header.get("payload_bytes")
    if len(payload) != expected:
        raise ValueError(f"{path} is truncated: it holds {len(payload)} of the payload's {expected} bytes; "
                         "save it again")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise ValueError(f"{path} is corrupted: its payload does not match the checksum it was saved with; "
                         "save it again")
    return header, payload


def _versions() -> dict[str, str | None]:
    """Python's version and the installed packages' (None for one not installed)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> dict[str, str | None]:
    """Read once a process: each package's metadata is parsed (~0.5 ms), half of a small function's load."""
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def _differences(saved: dict) -> dict[str, tuple[str | None, str | None]]:
    """Per package whose version differs: (the version that saved, the version loading)."""
    current = _versions()

    def comparable(name: str, version: str | None):
        return _minor(version) if name == "python" else version

    return {name: (saved.get(name), version) for name, version in current.items()
            if comparable(name, saved.get(name)) != comparable(name, version)}


def _minor(version: str | None) -> str | None:
    """Python's version up to its minor release: code objects are the same within it."""
    return ".".join(version.split(".")[:2]) if version else version


def _type_name(obj) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class _DecoratedInPlace(typing.NamedTuple):
    """A module-level function decorated where it is defined, found again by its module and name
    as the ``py_func`` of the ``OptimizedFunction`` there: its module attribute is not the
    function, so pickle cannot save the function by reference itself."""

    module: str
    qualname: str


def function_reference(optimized):
    """What a pickle of ``optimized`` holds for its function: the function, or for one decorated
    where a module defines it, its module and name. Functions in ``__main__``, in other functions
    or in modules cloudpickle was told to pickle by value travel by value (cloudpickle)."""
    func = optimized.py_func
    name, qualname = func.__module__, func.__qualname__
    module = sys.modules.get(name)
    if module is None or name == "__main__" or "<locals>" in qualname or _pickled_by_value(name):
        return func
    found = getattr(_attribute(module, qualname), "py_func", None)
    return _DecoratedInPlace(name, qualname) if found is func else func


def restored_source(reference, carried: tuple | None, fitted: bool):
    """The parsed source to rebuild a pickled function's graph from: the text the pickle carried
    (no file is read), or for a function found again in its module, the definition the module
    has now, refused when a fitted function's definition changed since it was fitted."""
    if not isinstance(reference, _DecoratedInPlace):
        return read_function(reference, carried)
    found = _attribute(importlib.import_module(reference.module), reference.qualname)
    if getattr(found, "py_func", None) is None:
        raise TypeError(f"{reference.module}.{reference.qualname} is no longer a function decorated with "
                        "willump.optimize, so the pickle of its optimized function cannot be loaded")
    current = found._source  # (parsed when the module decorated it, as it is now)
    if fitted and carried is not None and current.text != carried[0]:
        raise ValueError(f"{reference.module}.{reference.qualname} has changed since it was fitted and pickled: "
                         "its fitted state belongs to the definition it was fitted on; fit it again")
    return current


def _attribute(owner, qualname: str):
    for name in qualname.split("."):
        owner = getattr(owner, name, None)
    return owner


def _pickled_by_value(module: str) -> bool:
    cloudpickle = sys.modules.get("cloudpickle")
    registered = getattr(cloudpickle, "list_registry_pickle_by_value", lambda: ())()
    return any(module == name or module.startswith(name + ".") for name in registered)


# --- shipping to other processes (Dask workers) -------------------------------------------------

SHARED_PER_PROCESS = 4  # optimized functions a worker process keeps for the tasks that unpickle them
_shared: "collections.OrderedDict[str, object]" = collections.OrderedDict()  # identity -> instance, newest last
_shared_lock = threading.Lock()


_CARRYING = contextvars.ContextVar("willump_carrying", default=False)  # (within ``save``)


def reduce(optimized):
    """What ``pickle`` stores for ``optimized``: its state as one payload (the function, its source,
    options and fitted state, pickled once) named by the state's SHA-256, and its counters."""
    identity, payload = optimized._shipped(carry=_CARRYING.get())
    return restore, (type(optimized), identity, payload, optimized._stats)


def shipped_state(state: dict, carried=()) -> tuple[str, bytes]:
    """(identity, payload) of an optimized function's state without its counters, the identity
    the SHA-256 of the state's pickle; then, in the same stream, what it carries of ``carried``
    ((model, key, arrays, still valid) built from a model): the arrays of the models the state
    holds (the same objects when they are read back;
    not of a model the pickle does not hold, one a module loads, which would travel as a copy)
    still valid once the state is pickled (a model trained meanwhile is read again where it is
    loaded), with this willump's layout of them (``_carried_layout``)."""
    import cloudpickle

    with io.BytesIO() as stream:
        pickler = cloudpickle.CloudPickler(stream)
        pickler.dump(state)
        state_end = stream.tell()
        if carried:
            memo = pickler.memo.copy()  # (id -> (index, object) of what the state's pickle holds)
            held = [(owner, key, built) for owner, key, built, still_valid in carried
                    if memo.get(id(owner), (0, None))[1] is owner and still_valid()]
            if held:
                pickler.dump((_carried_layout(), held))  # (older versions' loads stop after the state)
        payload = stream.getvalue()
    return hashlib.sha256(memoryview(payload)[:state_end]).hexdigest(), payload


def _carried_layout() -> tuple:
    """What a saved function's carried arrays are laid out by: those another willump (or layout)
    carried are not used (the models are read again)."""
    return "willump carried arrays", _installed_versions()["willump"], PACKED_LAYOUT


def _unshipped(payload: bytes) -> tuple[dict, int]:
    """(the state ``shipped_state`` pickled, with what it carries as ``carried``, where the state's
    pickle ends). Carried arrays of another layout, or that cannot be read, are left out."""
    with io.BytesIO(payload) as stream:
        unpickler = pickle.Unpickler(stream)
        state = unpickler.load()
        state_end = stream.tell()
        state["carried"] = ()
        if state_end < len(payload):
            try:
                layout, carried = unpickler.load()
            except Exception:  # noqa: BLE001 (only a reading spared: the models are read again)
                layout, carried = None, ()
            state["carried"] = carried if layout == _carried_layout() else ()
    return state, state_end


def restore(cls, identity: str, payload: bytes, stats):
    """The optimized function a pickle holds. In a process running a Dask worker, every task that
    unpickles the same function (same identity) gets the one instance built first: its models,
    kernels and caches are built once per process, and its counters are the worker's own."""
    if not in_dask_worker():
        return _built(cls, identity, payload, stats)
    with _shared_lock:
        found = _shared.get(identity)
        if found is None:
            found = _built(cls, identity, payload, None)
            _shared[identity] = found
            while len(_shared) > SHARED_PER_PROCESS:
                _shared.popitem(last=False)
        _shared.move_to_end(identity)
        return found


def shared(identity: str):
    """This process's instance of the function named ``identity``, or None."""
    with _shared_lock:
        return _shared.get(identity)


def _built(cls, identity: str, payload: bytes, stats):
    """A new instance from ``payload``. It ships that payload again (a Dask scheduler pickles the
    function it unpickled once per task): pickling its state anew could give other bytes (sets
    of strings follow the process's hash seed), so another name workers would not share by."""
    state, state_end = _unshipped(payload)
    optimized = cls.__new__(cls)
    optimized.__setstate__({**state, "stats": stats})
    if state_end < len(payload):  # (a saved function: it ships its state alone, as it was pickled, by its name)
        payload = payload[:state_end]
    optimized._remember_shipped(identity, payload)
    return optimized

