"""Reading a private table from Parquet: structure checked from metadata, values by policy.

Two kinds of problems, handled so that no single record can change what a run does:

* structural -- a missing file, not Parquet, a missing column, a wrong type (in *any* file of a
  folder), a folder that lists one file twice or loops (:func:`data_files`), more rows in all
  files than the exact sums' rounding allowance covers (:data:`dp.numerics.fixedpoint.MAX_ROWS`,
  the footers' row counts: no statistic can sum more rows than the files hold) -- found by
  :func:`check_source` from the listing and the Parquet footers before any value is read, each
  a one-line :class:`InputError` naming the file and column, never a data value;
* value-level -- nulls, NaN, infinities, numbers outside the declared bounds, undeclared
  categories, an empty table -- handled by the declared policies of :mod:`dp.schema` (clamp,
  drop, map) while reading, never an error. How many values a policy handled is an exact
  statistic: it is kept in memory for tests, never logged or published. Each file is read
  through the declared types, whatever its storage type (an ``int`` column stored as int64 in
  one file and double in another, or as Arrow's null type where a file has no value): a stored
  value is converted by the value rules, never by a cast that could fail on one value.

Values are read batch by batch by :mod:`dp.engine.batches`; a whole table in one frame, for tests
and benchmarks, is :func:`dp.reference.frame.read_table`, through the same validator.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from dppub.dp.errors import InputError, InvariantError
from dppub.dp.numerics.fixedpoint import check_rows
from dppub.dp.schema import ColumnSpec, TableSchema

__all__ = [
    "check_source",
    "clamp_numeric",
    "data_files",
    "empty_frame",
    "fragments",
]


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def data_files(path: str | Path) -> tuple[Path, ...]:
    """The Parquet files a source names, each once, by real path: the file itself, or every
    file under the folder (recursively, following links; names starting with ``.`` or ``_``
    are skipped, as pyarrow's discovery does), in the order of their listed paths.

    A folder read through a link into itself, or listing one file twice (two links, a hard
    link), would count rows several times while the noise is sized for one: it is refused.

    Raises:
        InputError: a missing source, a looping or repeating folder, a file that cannot be
            listed or is not a regular file.
    """
    top = Path(path)
    if not top.exists():
        raise InputError(f"dataset not found: {top}")
    if not top.is_dir():
        return (top.resolve(),)
    seen: dict[tuple[int, int], Path] = {}  # (device, inode) -> the path it was listed under
    found: list[tuple[str, Path]] = []

    def walk(folder: Path, above: frozenset[tuple[int, int]]) -> None:
        try:
            st = folder.stat()
            here = (st.st_dev, st.st_ino)
            if here in above:
                raise InputError(
                    f"{folder} links back to a folder it is inside ({folder.resolve()}): "
                    "a data folder must not loop"
                )
            entries = sorted(e.name for e in os.scandir(folder))
            for name in entries:
                if name.startswith((".", "_")):
                    continue
                p = folder / name
                if p.is_dir():
                    walk(p, above | {here})
                    continue
                if not p.is_file():
                    raise InputError(f"{p} is not a regular file (or a broken link)")
                st = p.stat()
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    raise InputError(
                        f"{p} and {seen[key]} are the same file ({p.resolve()}): "
                        "a data folder must list each file once"
                    )
                seen[key] = p
                found.append((str(p), p.resolve()))
        except OSError as exc:
            raise InputError(f"cannot list {folder}: {_reason(exc)}") from None

    walk(top, frozenset())
    return tuple(real for _, real in sorted(found))


def fragments(
    path: str | Path, fmt: pads.ParquetFileFormat | None = None
) -> tuple[pads.ParquetFileFragment, ...]:
    """One fragment per file of :func:`data_files`, read with ``fmt`` (default: plain Parquet).

    Raises:
        InputError: as :func:`data_files`.
    """
    fmt = fmt or pads.ParquetFileFormat()
    local = pafs.LocalFileSystem()
    return tuple(fmt.make_fragment(str(f), filesystem=local) for f in data_files(path))


def _check_type(spec: ColumnSpec, arrow_type: pa.DataType, where: Path) -> None:
    t = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    if pa.types.is_null(t):
        return  # a column with no values (e.g. an empty table's): every value is missing
    if spec.unit and spec.type == "int":  # an id is keyed exactly as stored: no float, no uint64
        if not pa.types.is_integer(t) or t == pa.uint64():
            raise InputError(
                f"{where}: column {spec.name!r} is the privacy unit, declared int: store it as "
                f"integers of at most 64 bits (e.g. pandas Int64), found {t}"
            )
        return
    if spec.is_numeric:  # an int column may be stored as float (e.g. a pandas column with NaN)
        ok = pa.types.is_integer(t) or pa.types.is_floating(t)
    else:
        ok = pa.types.is_string(t) or pa.types.is_large_string(t)
    if not ok:
        raise InputError(f"{where}: column {spec.name!r} should be {spec.type}, found {t}")


def clamp_numeric(
    spec: ColumnSpec, arr: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64] | npt.NDArray[np.int64], int]:
    """Clamp to the declared bounds (infinities included) and round ``int`` columns to the
    nearest integer; return the values and how many were outside (exact: never log it).

    NaN marks a value a policy left out (kept as NaN, so such an ``int`` column stays float).
    """
    if spec.bounds is None:
        raise InvariantError(f"numeric column {spec.name!r} has no bounds")
    lo, hi = spec.bounds
    outside = int(np.count_nonzero((arr < lo) | (arr > hi)))
    clipped = np.clip(arr, lo, hi)
    if spec.type != "int":
        return clipped, outside
    rounded = np.rint(clipped)
    return (rounded if np.isnan(rounded).any() else rounded.astype(np.int64)), outside


def check_source(
    path: str | Path, schema: TableSchema, *, columns: Sequence[str] | None = None
) -> None:
    """Check the structure of a Parquet file or folder from its listing and footers only (reads
    no value): it exists, lists each file once (:func:`data_files`), every file is Parquet and
    has the declared columns with compatible types, and the files hold at most
    :data:`dp.numerics.fixedpoint.MAX_ROWS` rows in all (:func:`check_rows`: what the row count
    alone reveals, the README's *Privacy model* says).

    Raises:
        InputError: one line naming the file and the problem.
    """
    p = Path(path)
    wanted = list(columns) if columns is not None else list(schema.names)
    specs = [schema[name] for name in wanted]
    rows = 0
    try:
        for fragment in fragments(p):
            where = Path(fragment.path)
            physical = fragment.physical_schema
            missing = [s.name for s in specs if s.name not in physical.names]
            if missing:
                raise InputError(f"{where}: missing declared column(s) {missing}")
            for s in specs:
                _check_type(s, physical.field(s.name).type, where)
            rows += fragment.metadata.num_rows
    except (pa.ArrowInvalid, pa.ArrowIOError, pa.ArrowNotImplementedError, OSError) as exc:
        raise InputError(f"cannot read {p} as Parquet: {_reason(exc)}") from None
    check_rows(rows)


def empty_frame(specs: Sequence[ColumnSpec]) -> pd.DataFrame:
    """A frame with no rows and the dtypes a validated batch has for these columns."""
    out: dict[str, pd.Series] = {}
    for spec in specs:
        if spec.is_numeric:
            dtype = np.int64 if spec.type == "int" else np.float64
            out[spec.name] = pd.Series([], dtype=dtype, name=spec.name)
        elif spec.categories is not None:
            cats = pd.CategoricalDtype(list(spec.categories), ordered=False)
            out[spec.name] = pd.Series([], dtype=cats, name=spec.name)
        else:
            out[spec.name] = pd.Series([], dtype=object, name=spec.name)
    return pd.DataFrame(out)
