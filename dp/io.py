"""Reading a private table from Parquet and validating it against its declared schema.

Every way the input can disagree with the config is a one-line :class:`InputError` naming the
file and column, never a data value or an exact count (error messages can be persisted by the
orchestrator). Values outside declared numeric bounds are clamped, as the declared sensitivity
requires; how many were clamped is an exact statistic, so it is kept in memory
(:attr:`ReadResult.clamped`) for tests and never logged or published.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads

from dp.errors import InputError, InvariantError
from dp.schema import ColumnSpec, TableSchema

__all__ = ["ReadResult", "check_source", "clamp_numeric", "read_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    """A validated private table. Never persist or log :attr:`clamped`: it is exact."""

    frame: pd.DataFrame
    clamped: dict[str, int] = field(default_factory=dict, repr=False)


def _open(path: Path) -> pads.Dataset:
    if not path.exists():
        raise InputError(f"dataset not found: {path}")
    try:
        return pads.dataset(path, format="parquet")
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot read {path} as Parquet: {reason}") from None


def _check_type(spec: ColumnSpec, arrow_type: pa.DataType, path: Path) -> None:
    t = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    if spec.type == "int":
        ok = pa.types.is_integer(t)
    elif spec.type == "float":
        ok = pa.types.is_integer(t) or pa.types.is_floating(t)
    else:
        ok = pa.types.is_string(t) or pa.types.is_large_string(t)
    if not ok:
        raise InputError(f"{path}: column {spec.name!r} should be {spec.type}, found {t}")


def clamp_numeric(
    spec: ColumnSpec, arr: npt.NDArray[np.float64], path: Path
) -> tuple[npt.NDArray[np.float64] | npt.NDArray[np.int64], int]:
    """Reject NaN/inf/missing (as NaN), clamp to the declared bounds; return the values and how
    many were outside (exact: never log or publish it). Shared by every read path."""
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{path}: column {spec.name!r} contains missing, NaN or inf values")
    if spec.bounds is None:
        raise InvariantError(f"numeric column {spec.name!r} has no bounds")
    lo, hi = spec.bounds
    outside = int(np.count_nonzero((arr < lo) | (arr > hi)))
    clipped = np.clip(arr, lo, hi)
    return (clipped.astype(np.int64) if spec.type == "int" else clipped), outside


def _numeric(spec: ColumnSpec, values: pd.Series, path: Path) -> tuple[pd.Series, int]:
    arr, outside = clamp_numeric(spec, values.to_numpy(dtype=np.float64, na_value=np.nan), path)
    return pd.Series(arr, index=values.index, name=spec.name), outside


def _text(spec: ColumnSpec, values: pd.Series, path: Path) -> pd.Series:
    if values.isna().any():
        raise InputError(f"{path}: column {spec.name!r} contains missing values")
    text = values.astype(str)
    if spec.categories is not None:
        unknown = ~text.isin(spec.categories)
        if unknown.any():
            raise InputError(
                f"{path}: column {spec.name!r} has values outside its declared categories"
            )
        return pd.Series(
            pd.Categorical(text, categories=list(spec.categories)), index=text.index, name=spec.name
        )
    return text


def _checked_dataset(path: Path, specs: Sequence[ColumnSpec]) -> pads.Dataset:
    ds = _open(path)
    missing = [s.name for s in specs if s.name not in ds.schema.names]
    if missing:
        raise InputError(f"{path}: missing declared column(s) {missing}")
    for s in specs:
        _check_type(s, ds.schema.field(s.name).type, path)
    return ds


def check_source(
    path: str | Path, schema: TableSchema, *, columns: Sequence[str] | None = None
) -> None:
    """Cheap pre-flight check from Parquet metadata only: the file or folder exists, is Parquet,
    has the declared columns with compatible types, and is not empty. Reads no values.

    Raises:
        InputError: as :func:`read_table` would for these problems.
    """
    p = Path(path)
    wanted = list(columns) if columns is not None else list(schema.names)
    ds = _checked_dataset(p, [schema[name] for name in wanted])
    try:
        rows = ds.count_rows()
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot read {p} as Parquet: {reason}") from None
    if rows == 0:
        raise InputError(f"{p}: the table is empty")


def read_table(
    path: str | Path, schema: TableSchema, *, columns: Sequence[str] | None = None
) -> ReadResult:
    """Read ``columns`` (default: all declared) of a Parquet file or folder and validate them.

    Raises:
        InputError: missing file, not Parquet, missing column, wrong type, NaN/inf/missing
            values, undeclared category, or an empty table.
    """
    p = Path(path)
    wanted = list(columns) if columns is not None else list(schema.names)
    specs = [schema[name] for name in wanted]
    ds = _checked_dataset(p, specs)
    try:
        table = ds.to_table(columns=wanted)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot read {p} as Parquet: {reason}") from None
    if table.num_rows == 0:
        raise InputError(f"{p}: the table is empty")
    frame = table.to_pandas()
    out: dict[str, pd.Series] = {}
    clamped: dict[str, int] = {}
    for s in specs:
        if s.is_numeric:
            out[s.name], clamped[s.name] = _numeric(s, frame[s.name], p)
        else:
            out[s.name] = _text(s, frame[s.name], p)
    return ReadResult(frame=pd.DataFrame(out), clamped=clamped)
