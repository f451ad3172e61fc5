"""Validated record batches streamed from a Parquet file or partitioned folder.

The streaming counterpart of :func:`dp.io.read_table`: the same checks, applied one bounded batch
at a time, so memory is set by ``batch_size`` and the number of columns, never by the row count.

* Metadata problems (missing path, not Parquet, missing column, wrong type, empty table) are
  found by :func:`dp.io.check_source` before any value is read -- the very function, so the very
  messages, of the pandas path.
* Value checks run on Arrow data instead of pandas Series: a string column is read
  dictionary-encoded, so its declared categories are checked once per distinct value of the
  batch instead of once per row. The messages are those of :mod:`dp.io` (pinned by the tests);
  with several bad columns, the first one *met in batch order* is reported.
* Numeric columns are clamped to the declared bounds exactly as :mod:`dp.io` does (``np.clip`` in
  float64, then ``int64`` for ``int`` columns), so every value equals the one in ``read_table``'s
  frame.

A *fragment* (one Parquet file) is the unit of work a distributed backend ships to a worker;
batches are the unit of memory inside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from dp.errors import ConfigError, InputError, InvariantError
from dp.io import check_source, clamp_numeric
from dp.schema import ColumnSpec, TableSchema

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "Batch",
    "Scan",
    "batch_frame",
    "iter_batches",
    "open_scan",
]

DEFAULT_BATCH_SIZE = 1 << 20
"""Rows per batch: ~8 MiB per numeric column, large enough that per-batch overhead vanishes."""

NumericArray = npt.NDArray[np.float64] | npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """One validated batch. Exact data: never log or persist it (nor :attr:`clamped`)."""

    num_rows: int
    """Rows in this batch (at most the scan's ``batch_size``)."""
    numeric: Mapping[str, NumericArray]
    """Clamped numeric columns, with the dtype ``read_table``'s frame has (int64 / float64)."""
    text: Mapping[str, pa.DictionaryArray]
    """Text columns, dictionary-encoded; categories already checked against the declaration."""
    clamped: Mapping[str, int]
    """Per numeric column, how many values of this batch were outside the bounds (exact)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scan:
    """A checked Parquet source: its fragments and the declared columns to read from them."""

    path: Path
    """The file or folder, as named in error messages."""
    specs: tuple[ColumnSpec, ...]
    """Declared specs of the columns read, in order."""
    fragments: tuple[pads.Fragment, ...]
    """One per Parquet file, in discovery order (the order aggregates are combined in)."""
    schema: pa.Schema
    """The dataset schema every fragment is read as (as ``read_table``'s ``to_table`` does)."""
    batch_size: int
    """Upper bound on rows per batch."""

    @property
    def columns(self) -> list[str]:
        """Names of the columns read."""
        return [s.name for s in self.specs]


def open_scan(
    source: str | Path,
    schema: TableSchema,
    columns: Sequence[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Scan:
    """Check ``source`` from its metadata (as :func:`dp.io.check_source`) and list its fragments.

    Raises:
        InputError: missing file, not Parquet, missing column, wrong type, or an empty table.
        ConfigError: a column is not declared, or ``batch_size`` is not a positive integer.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    size = batch_size
    path = Path(source)
    wanted = list(dict.fromkeys(columns))
    specs = tuple(schema[name] for name in wanted)
    check_source(path, schema, columns=wanted)
    text = [s.name for s in specs if not s.is_numeric]
    # Strings are decoded straight into dictionaries: validation and axis codes then run once
    # per distinct value instead of once per row.
    fmt = pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(dictionary_columns=text))
    try:
        ds = pads.dataset(path, format=fmt)
        fragments = tuple(ds.get_fragments())
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise InputError(f"cannot read {path} as Parquet: {_reason(exc)}") from None
    return Scan(path=path, specs=specs, fragments=fragments, schema=ds.schema, batch_size=size)


def iter_batches(scan: Scan, fragment: pads.Fragment) -> Iterator[Batch]:
    """Validated batches of one fragment of ``scan``, each of at most ``scan.batch_size`` rows.

    Raises:
        InputError: NaN/inf/missing values, an undeclared category, or an unreadable file.
    """
    try:
        raw = fragment.to_batches(
            schema=scan.schema, columns=scan.columns, batch_size=scan.batch_size
        )
        for record in raw:
            if record.num_rows > scan.batch_size:
                raise InvariantError("a scanned batch exceeds the batch size")
            yield _validate(scan, record)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise InputError(f"cannot read {scan.path} as Parquet: {_reason(exc)}") from None


def batch_frame(batch: Batch, specs: Sequence[ColumnSpec]) -> pd.DataFrame:
    """The columns ``specs`` of ``batch`` as the frame :func:`dp.io.read_table` gives for these
    rows: the same values and dtypes (clamped int64 / float64, a categorical over the declared
    categories, or text). Exact data: never log or persist it."""
    out: dict[str, pd.Series] = {}
    for spec in specs:
        if spec.is_numeric:
            out[spec.name] = pd.Series(batch.numeric[spec.name], name=spec.name, copy=False)
            continue
        column = batch.text[spec.name]
        if spec.categories is None:
            out[spec.name] = column.dictionary_decode().to_pandas().astype(str).rename(spec.name)
            continue
        declared = pd.Index(list(spec.categories))
        lookup = declared.get_indexer(column.dictionary.to_pandas().astype(str))
        codes = lookup[np.asarray(column.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]
        dtype = pd.CategoricalDtype(declared, ordered=False)
        values = pd.Categorical.from_codes(codes, dtype=dtype)
        out[spec.name] = pd.Series(values, name=spec.name)
    return pd.DataFrame(out, index=pd.RangeIndex(batch.num_rows))


def _validate(scan: Scan, record: pa.RecordBatch) -> Batch:
    numeric: dict[str, NumericArray] = {}
    text: dict[str, pa.DictionaryArray] = {}
    clamped: dict[str, int] = {}
    for spec in scan.specs:
        column = record.column(spec.name)
        if spec.is_numeric:
            numeric[spec.name], clamped[spec.name] = _numeric(spec, column, scan.path)
        else:
            text[spec.name] = _text(spec, column, scan.path)
    return Batch(num_rows=record.num_rows, numeric=numeric, text=text, clamped=clamped)


def _numeric(spec: ColumnSpec, column: pa.Array, path: Path) -> tuple[NumericArray, int]:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    # Same float64 detour as dp.io: ints go through float64, nulls become NaN and fail below.
    arr = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    return clamp_numeric(spec, arr, path)


def _text(spec: ColumnSpec, column: pa.Array, path: Path) -> pa.DictionaryArray:
    if column.null_count:
        raise InputError(f"{path}: column {spec.name!r} contains missing values")
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    if not isinstance(column, pa.DictionaryArray):
        raise InvariantError(f"column {spec.name!r} was not dictionary-encoded")
    if spec.categories is not None:
        # A dictionary may hold values no row of this batch uses: check only the used ones.
        known = pc.is_in(column.dictionary, value_set=pa.array(spec.categories, pa.string()))
        if not pc.all(pc.take(known, column.indices), min_count=0).as_py():
            raise InputError(
                f"{path}: column {spec.name!r} has values outside its declared categories"
            )
    return column


def binary_labels(
    batch: Batch, target: str, *, threshold: float | None, positive: str | None
) -> npt.NDArray[np.float64]:
    """Class labels in {0, 1} of a batch, as the in-memory task makes them: ``target > threshold``
    for a numeric target (after clamping), ``target == positive`` for a category target."""
    if (threshold is None) == (positive is None):
        raise ConfigError("give exactly one of threshold, positive")
    if positive is not None:
        column = batch.text[target]
        hit = pc.equal(column.dictionary, positive).to_numpy(zero_copy_only=False)
        codes = np.asarray(column.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return np.asarray(hit[codes], dtype=np.float64)
    values = batch.numeric[target].astype(np.float64)
    return np.asarray(values > float(threshold or 0.0), dtype=np.float64)


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
