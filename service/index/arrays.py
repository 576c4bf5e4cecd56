"""Arrays as an index folder gives them: memory-mapped files are read-only, arrays built or joined in memory are not.

The compiled kernels (service/retrieval/kernels.py, service/passages/kernels.py) are compiled for both kinds; their
warm-up calls them on a :func:`readonly` view as well as on the array itself.
"""

from __future__ import annotations

import numpy as np


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (memory-mapped arrays are read-only: the kernels are compiled for both kinds)."""
    a = a.view()
    a.flags.writeable = False
    return a


__all__ = ["readonly"]
