"""Shared fixtures: the real data sets, which CI must have.

The tests import the installed ``willump`` (``pip install .``), not the source tree: the clone's
root, which ``python -m pytest`` puts first on ``sys.path``, goes last, where it still provides
``benchmarks`` (not installed) but no longer shadows the installed package.
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _put_the_clone_last() -> None:
    entries = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != ROOT]
    sys.path[:] = entries + [str(ROOT)]


_put_the_clone_last()

from benchmarks.data import ENVIRONMENT_VARIABLE, data_dir  # noqa: E402


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


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server on a free loopback port, persistence off, stopped at the end:
    its (host, port). A skip when redis-server is not installed, or a failure under CI=true."""
    import shutil
    import socket
    import subprocess
    import time

    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server not found (Debian: apt-get install -y redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
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
    yield "127.0.0.1", port
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def redis_client(redis_server):
    """A client of the session's redis-server, on an empty database."""
    import redis

    host, port = redis_server
    client = redis.Redis(host=host, port=port, socket_timeout=2)
    client.flushdb()
    yield client
    client.close()
