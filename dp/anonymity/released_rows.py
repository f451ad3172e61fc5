"""Writing a k-anonymous release: the released records and the digest of the input.

Both work on one chunk of the input at a time, in row order, so that the streaming engine
(:mod:`dp.engine.folds.k_anonymous_table`, batch by batch) and the reference
:func:`dp.reference.frame_anonymity.anonymize` (the whole table at once) write the same rows and
report the same digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.anonymity.hierarchy import Hierarchy

__all__ = ["InputDigest", "release_rows"]

IntArray = npt.NDArray[np.int64]


def release_rows(
    rest: pd.DataFrame,
    columns: Sequence[str],
    hier: Mapping[str, Hierarchy],
    leaf_codes: IntArray,
    levels: Sequence[int],
    keep: npt.NDArray[np.bool_],
) -> pd.DataFrame:
    """The released records of one chunk of the input, in its row order.

    ``rest`` holds the chunk's non-QI columns, ``leaf_codes`` its QIs' leaf codes, ``keep`` which
    of its records are released; ``columns`` is the output column order. QIs become categoricals
    over the hierarchy's labels at ``levels``. Chunk by chunk, the outputs concatenate to the
    release of the whole table.
    """
    # Positional take + reset index: the released row order must not reveal which rows went.
    rows = np.flatnonzero(keep)
    kept = rest.iloc[rows].reset_index(drop=True)
    out: dict[str, Any] = {}
    qi_index = {col: i for i, col in enumerate(hier)}
    for col in columns:
        if col in qi_index:
            i = qi_index[col]
            h = hier[col]
            codes = h.group_codes(levels[i])[leaf_codes[rows, i]]
            out[col] = pd.Categorical.from_codes(codes, categories=pd.Index(h.labels(levels[i])))
        else:
            out[col] = kept[col]
    return pd.DataFrame(out, index=pd.RangeIndex(len(rows)))


class InputDigest:
    """SHA-256 of the input table, fed chunk by chunk in row order (any chunking of the same
    rows gives the same digest): QIs through their leaf codes (cheaper than hashing their text,
    and exact since values are compared as text), other columns through pandas' row hashes,
    then the hierarchies' digests and the column names."""

    def __init__(self) -> None:
        self._codes = hashlib.sha256()
        self._rest = hashlib.sha256()

    def update(self, leaf_codes: IntArray, rest: pd.DataFrame) -> None:
        """Add the next rows: their ``(n, d)`` leaf codes and non-QI columns."""
        self._codes.update(np.ascontiguousarray(leaf_codes, dtype=np.int64).tobytes())
        if len(rest.columns):
            self._rest.update(pd.util.hash_pandas_object(rest, index=False).to_numpy().tobytes())

    def hexdigest(self, hier: Mapping[str, Hierarchy], columns: Sequence[object]) -> str:
        """The digest of every row added so far."""
        h = hashlib.sha256(self._codes.digest())
        for hierarchy in hier.values():
            h.update(hierarchy.digest().encode())
        h.update(self._rest.digest())
        h.update("\x1f".join(map(str, columns)).encode())
        return h.hexdigest()
