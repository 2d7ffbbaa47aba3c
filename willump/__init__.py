"""willump: a statistically-aware optimizer for machine-learning inference functions."""

from willump.api import OptimizedFunction, optimize
from willump.errors import InconsistentVersionWarning, RemoteLookupError, WillumpWarning
from willump.persistence import load
from willump.runtime.tables import MemoryTable, RedisTable

__version__ = "0.1.0"
__all__ = ["optimize", "OptimizedFunction", "load", "WillumpWarning", "InconsistentVersionWarning", "MemoryTable", "RedisTable", "RemoteLookupError", "__version__"]
