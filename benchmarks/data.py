"""Where the benchmark data sets are: read in place, never copied into the repository.

The directory is ``$WILLUMP_DATA`` when that environment variable is set, otherwise
``<repo root>/../shared/datasets`` (the repo root being the folder that holds ``benchmarks/``).
"""

import os
from pathlib import Path

ENVIRONMENT_VARIABLE = "WILLUMP_DATA"


def data_dir() -> Path:
    """The directory holding the data sets."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    repo_root = Path(__file__).resolve().parent.parent
    return repo_root.parent / "shared" / "datasets"


def require(relative_path: str | os.PathLike) -> Path:
    """The path of a data file under :func:`data_dir`; ``FileNotFoundError`` if it is not there."""
    path = data_dir() / relative_path
    if not path.is_file():
        raise FileNotFoundError(
            f"benchmark data file not found: {path} "
            f"(set {ENVIRONMENT_VARIABLE} to the directory that holds the data sets)"
        )
    return path
