"""willump: a statistically-aware optimizer for machine-learning inference functions."""

from willump.api import OptimizedFunction, optimize
from willump.errors import WillumpWarning

__version__ = "0.1.0"
__all__ = ["optimize", "OptimizedFunction", "WillumpWarning", "__version__"]
