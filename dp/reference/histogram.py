"""A histogram of an in-memory frame over declared axes: what the streaming engine
(:func:`dp.engine.histogram_stream`) must return bit for bit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.axes import Axis
from dppub.dp.errors import ConfigError, InvariantError

__all__ = ["histogram"]


def histogram(frame: pd.DataFrame, axes: Sequence[Axis]) -> npt.NDArray[np.float64]:
    """Counts of ``frame``'s rows over the product domain of ``axes``, flattened (C order)."""
    if not axes:
        raise ConfigError("a histogram needs at least one axis")
    shape = tuple(a.size for a in axes)
    flat = np.ravel_multi_index([a.codes(frame[a.column]) for a in axes], shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape))).astype(np.float64)
    if counts.sum() != len(frame):
        raise InvariantError("histogram lost rows")
    return counts
