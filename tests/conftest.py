"""Shared fixtures: the real data sets, which CI must have.

The tests import the installed ``willump`` (``pip install .``), not the source tree: the clone's
root, which ``python -m pytest`` puts first on ``sys.path``, goes last, where it still provides
``benchmarks`` (not installed) but no longer shadows the installed package.
"""

import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _put_the_clone_last() -> None:
    entries = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != ROOT]
    sys.path[:] = entries + [str(ROOT)]


_put_the_clone_last()

from benchmarks.data import ENVIRONMENT_VARIABLE, data_dir  # noqa: E402

_HIDDEN = pytest.StashKey[str]()


def pytest_addoption(parser):
    parser.addoption(
        "--pyarrow", choices=("yes", "no"),
        help="whether this pass is the one with pyarrow installed (README, Tests): under CI=true, "
        "a pass that finds otherwise fails",
    )


def _pyarrow_importable() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _hide_pyarrow() -> str:
    """Make ``import pyarrow`` fail as it fails where pyarrow is not installed, in this process
    and in the ones it starts (the README's scripts, the notebooks' kernels, a fresh interpreter):
    a package of that name first on ``sys.path`` and ``PYTHONPATH`` that raises
    ``ModuleNotFoundError``. So the README's command passes twice in one environment, although its
    second pass installs pyarrow. The directory holding it."""
    hiding = Path(tempfile.mkdtemp(prefix="willump-no-pyarrow-"))
    (hiding / "pyarrow").mkdir()
    (hiding / "pyarrow" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pyarrow' (hidden by willump's tests: --pyarrow=no)\", "
        "name='pyarrow')\n")
    sys.path.insert(0, str(hiding))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        entry for entry in (str(hiding), os.environ.get("PYTHONPATH", "")) if entry)
    importlib.invalidate_caches()
    return str(hiding)


def pytest_configure(config):
    """Each pass runs in the environment it is for: with pyarrow, pandas keeps text in pyarrow and
    the kernels read it another way. ``--pyarrow=no`` hides an installed pyarrow (before pandas is
    imported, which decides its text storage once); ``--pyarrow=yes`` without pyarrow would leave
    the pyarrow path untested, a failure under CI=true."""
    expected = config.getoption("--pyarrow")
    if expected == "no" and importlib.util.find_spec("pyarrow") is not None:
        if "pandas" in sys.modules:
            raise pytest.UsageError("--pyarrow=no: pandas was imported before pyarrow could be hidden")
        config.stash[_HIDDEN] = _hide_pyarrow()
    if expected == "yes" and not _pyarrow_importable():
        message = "--pyarrow=yes, but pyarrow is not installed (pip install \".[arrow]\")"
        if os.environ.get("CI") == "true":
            raise pytest.UsageError(message)
        print(f"warning: {message}: this pass tests the other storage of text", file=sys.stderr)


def pytest_ignore_collect(collection_path, config):
    """The Dask tests run in the pass with pyarrow: ``dask.dataframe`` needs it."""
    if config.getoption("--pyarrow") == "no" and collection_path.name.startswith("test_dask"):
        return True
    return None


def pytest_unconfigure(config):
    hidden = config.stash.get(_HIDDEN, None)
    if hidden is not None:
        shutil.rmtree(hidden, ignore_errors=True)


def pytest_report_header(config):
    if config.stash.get(_HIDDEN, None) is not None:
        return "pyarrow: installed, hidden for this pass (--pyarrow=no)"
    return f"pyarrow: {'installed (text kept in pyarrow)' if _pyarrow_importable() else 'not installed'}"


@pytest.fixture(scope="session")
def datasets():
    """The data set directory; a skip without it, or a failure under CI=true."""
    path = data_dir()
    if not path.is_dir():
        message = f"real data sets not found at {path} (set {ENVIRONMENT_VARIABLE} to their directory)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _redis_binary() -> str:
    """The path of redis-server; a skip without it, or a failure under CI=true."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server not found (Debian: apt-get install -y redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _started_redis(binary: str, port: int):
    """A redis-server on loopback ``port``, persistence off, answering: its process."""
    import subprocess
    import time

    import redis

    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--daemonize", "no", "--loglevel", "warning", "--enable-debug-command", "local"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"redis-server did not start on port {port}: {process.stderr.read().decode()[-500:]}")
            time.sleep(0.05)
    client.close()
    return process


def _stopped(process) -> None:
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server on a free loopback port, persistence off, stopped at the end:
    its (host, port). A skip when redis-server is not installed, or a failure under CI=true."""
    port = _free_port()
    process = _started_redis(_redis_binary(), port)
    yield "127.0.0.1", port
    _stopped(process)


class _OwnRedis:
    """A redis-server of one test's own: ``stop()`` ends it (connections are refused, as by a
    server that is down), ``start()`` starts it again on the same port, empty."""

    def __init__(self, binary: str):
        self.binary, self.host, self.port = binary, "127.0.0.1", _free_port()
        self.process = None
        self.start()

    def start(self) -> None:
        self.process = _started_redis(self.binary, self.port)

    def stop(self) -> None:
        if self.process is not None:
            _stopped(self.process)
            self.process = None


@pytest.fixture
def own_redis_server():
    """A redis-server for this test alone, which it may stop and start again (``_OwnRedis``)."""
    server = _OwnRedis(_redis_binary())
    yield server
    server.stop()


@pytest.fixture
def stopped_redis(redis_server):
    """``with stopped_redis():`` the session's redis-server is stopped (SIGSTOP) for the block: its
    connections stay open and nobody reads a request, a server slower than any timeout, with no
    clock in the test. It goes on (SIGCONT) when the block ends, or after a minute should the test
    wait for it (the test then fails on the late answer instead of hanging)."""
    import contextlib
    import signal
    import threading

    import redis

    with redis.Redis(host=redis_server[0], port=redis_server[1]) as client:
        pid = int(client.info("server")["process_id"])

    def state() -> str:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0]

    @contextlib.contextmanager
    def stopped():
        go_on = lambda: os.kill(pid, signal.SIGCONT)  # noqa: E731
        watchdog = threading.Timer(60, go_on)
        os.kill(pid, signal.SIGSTOP)
        try:
            while state() != "T":  # (the signal is delivered, not yet acted on)
                os.sched_yield()
            watchdog.start()
            yield
        finally:
            watchdog.cancel()
            go_on()

    return stopped


@pytest.fixture
def redis_client(redis_server):
    """A client of the session's redis-server, on an empty database."""
    import redis

    host, port = redis_server
    client = redis.Redis(host=host, port=port, socket_timeout=2)
    client.flushdb()
    yield client
    client.close()


def _required(module: str, extra: str):
    """``module`` imported; a skip when it is not installed, or a failure under CI=true."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        message = f"{module} is not installed ({error}): pip install \".[{extra}]\""
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def willump_dask():
    """``willump.dask``, with dask.dataframe and distributed; a skip without them, or a failure
    under CI=true."""
    _required("distributed", "dask")
    return _required("willump.dask", "dask")


@pytest.fixture(scope="session")
def dask_cluster(willump_dask):
    """A real ``distributed.LocalCluster``: 2 worker processes of one thread each, on loopback,
    no dashboard, closed at the end. Tests that kill workers make their own."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture
def dask_client(dask_cluster):
    """A client of the session's cluster."""
    import distributed

    with distributed.Client(dask_cluster) as client:
        yield client
