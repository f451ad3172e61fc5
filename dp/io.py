"""Reading a private table from Parquet or CSV: structure checked from metadata, values by policy.

A source is a file or a folder of files of one format: names ending ``.csv`` are CSV (a header
row, comma-separated, UTF-8, quoted fields may hold newlines), every other file Parquet; a folder
holding both is refused. Two kinds of problems, handled so that no single record can change what
a run does:

* structural -- a missing file, not Parquet, a missing column, a wrong type (in *any* file of a
  folder), a folder that lists one file twice, loops or mixes formats (:func:`data_files`,
  :func:`source_format`), more rows in all files than the exact sums' rounding allowance covers
  (:data:`dp.numerics.fixedpoint.MAX_ROWS`: the footers' row counts; a CSV file's bound from its
  size, a row being at least one byte per column) -- found by :func:`check_source` from the
  listing, the Parquet footers and the CSV header rows before any value is read, each a one-line
  :class:`InputError` naming the file and column, never a data value;
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

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from dppub.dp.errors import InputError, InvariantError
from dppub.dp.numerics.fixedpoint import check_rows
from dppub.dp.schema import ColumnSpec, TableSchema

__all__ = [
    "check_source",
    "clamp_numeric",
    "csv_header",
    "data_files",
    "empty_frame",
    "file_format",
    "fragments",
    "reopen",
    "source_format",
]

SourceFormat = Literal["parquet", "csv"]
CSV_SUFFIX = ".csv"
_HEADER_LIMIT = 1 << 20
"""The longest CSV header row read (bytes): names of declared columns, never values."""


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def data_files(path: str | Path) -> tuple[Path, ...]:
    """The files a source names, each once, by real path: the file itself, or every
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


def source_format(files: Sequence[Path], source: str | Path) -> SourceFormat:
    """The format of a source's files: ``csv`` where every name ends ``.csv``, else ``parquet``.

    Raises:
        InputError: a folder holding CSV and other files.
    """
    named = [f for f in files if f.name.lower().endswith(CSV_SUFFIX)]
    if not named:
        return "parquet"
    if len(named) < len(files):
        other = next(f for f in files if not f.name.lower().endswith(CSV_SUFFIX))
        raise InputError(
            f"{source} holds CSV ({named[0].name}) and other files ({other.name}): "
            "a data folder holds one format"
        )
    return "csv"


def _skip_row(_row: object) -> Literal["skip"]:
    """A CSV row with the wrong number of fields is left out (module doc)."""
    return "skip"


def file_format(fmt: SourceFormat, specs: Sequence[ColumnSpec] = ()) -> pads.FileFormat:
    """How the files of a source are read: Parquet with ``specs``' text columns decoded straight
    into dictionaries, or CSV with every declared column as text (an empty cell is null) and
    malformed rows skipped. (A CSV fragment loses its row handler when pickled: a worker reads
    through :func:`reopen`.)"""
    if fmt == "parquet":
        text = [s.name for s in specs if not s.is_numeric]
        return pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(dictionary_columns=text))
    return pads.CsvFileFormat(
        parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=_skip_row),
        convert_options=pacsv.ConvertOptions(
            column_types={s.name: pa.string() for s in specs},
            strings_can_be_null=True,
            null_values=[""],
        ),
    )


def fragments(path: str | Path, specs: Sequence[ColumnSpec] = ()) -> tuple[pads.FileFragment, ...]:
    """One fragment per file of :func:`data_files`, read as :func:`file_format` says.

    Raises:
        InputError: as :func:`data_files` and :func:`source_format`.
    """
    files = data_files(path)
    fmt = file_format(source_format(files, path), specs)
    local = pafs.LocalFileSystem()
    return tuple(fmt.make_fragment(str(f), filesystem=local) for f in files)


def reopen(fragment: pads.FileFragment, specs: Sequence[ColumnSpec]) -> pads.FileFragment:
    """``fragment`` as :func:`fragments` made it, also after pickling (a dask worker's copy)."""
    if not isinstance(fragment.format, pads.CsvFileFormat):
        return fragment
    return file_format("csv", specs).make_fragment(fragment.path, pafs.LocalFileSystem())


def csv_header(path: Path) -> list[str]:
    """A CSV file's column names, from its first row only (reads no value).

    Raises:
        InputError: an empty file, a header row longer than 1 MiB, not UTF-8.
    """
    try:
        with path.open("rb") as f:
            first = f.readline(_HEADER_LIMIT)
            longer = not first.endswith(b"\n") and bool(f.read(1))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {_reason(exc)}") from None
    if not first.strip():
        raise InputError(f"{path}: a CSV file starts with its header row; this one is empty")
    if longer:
        raise InputError(f"{path}: the CSV header row is longer than {_HEADER_LIMIT} bytes")
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}: the CSV header row is not UTF-8") from None
    return next(csv.reader([text.rstrip("\r\n")]))


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
        if spec.type == "date":  # or ISO text
            ok = ok or pa.types.is_date(t) or pa.types.is_timestamp(t)
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
    """Check the structure of a source from its listing, Parquet footers and CSV header rows only
    (reads no value): it exists, lists each file once (:func:`data_files`) in one format
    (:func:`source_format`), every file has the declared columns (a Parquet file with
    compatible types; a CSV file holds text, converted by the value rules), and the files hold
    at most :data:`dp.numerics.fixedpoint.MAX_ROWS` rows in all (:func:`check_rows`: what the
    row count alone reveals, the README's *Privacy model* says; a CSV file's count is bounded by
    its size over its columns, a row taking at least one byte per column).

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
            if isinstance(fragment.format, pads.CsvFileFormat):
                names = csv_header(where)
                rows += (where.stat().st_size + 1) // max(len(names), 1)
            else:
                names = fragment.physical_schema.names
                rows += fragment.metadata.num_rows
            missing = [s.name for s in specs if s.name not in names]
            if missing:
                raise InputError(f"{where}: missing declared column(s) {missing}")
            if not isinstance(fragment.format, pads.CsvFileFormat):
                for s in specs:
                    _check_type(s, fragment.physical_schema.field(s.name).type, where)
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
