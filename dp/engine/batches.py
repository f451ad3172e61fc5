"""Validated record batches streamed from a Parquet or CSV file or partitioned folder.

The one validator of the private input: :func:`dp.reference.frame.read_table` (the in-memory
frame of tests and benchmarks) reads through it too, so every engine sees the same values.

* Structural problems (missing path, a folder that loops or lists a file twice, not Parquet,
  missing column, wrong type in any file) are found by :func:`dp.io.check_source` from the
  listing and the footers before any value is read.
* Each file is read with its own stored types (no cast to another file's types, which could
  fail on one value: 40.5 or NaN into int64, values into Arrow's null type) and converted to
  the declared type by the value policies below.
* Value policies (:mod:`dp.schema`) run on Arrow data: a string column is read
  dictionary-encoded, so its declared categories are checked once per distinct value of the
  batch instead of once per row; a missing or undeclared value drops its row or is mapped to
  the declared value; numbers are clamped (``np.clip`` in float64, then rounded half to even
  and ``int64`` for ``int`` columns). No value ever raises.
* An ``int`` privacy-unit column is also kept as stored, exactly (:attr:`Batch.keys`): a unit
  is keyed on its id, never on a clamped or rounded value.

A *fragment* (one Parquet file) is the unit of work a distributed backend ships to a worker;
batches are the unit of memory inside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from dppub.dp.errors import ConfigError, InputError, InvariantError
from dppub.dp.io import check_source, clamp_numeric, fragments, reopen
from dppub.dp.schema import DROP, ColumnSpec, TableSchema

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


Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """One validated batch. Exact data: never log or persist it (nor :attr:`clamped`).

    A value the ``drop`` policy rejects is *marked*, not removed: its column's :attr:`missing`
    mask is set there (numeric arrays hold a placeholder, text arrays a null). Each release
    reads :meth:`complete` of its own columns -- the rows where none of them is marked -- so
    one scan can serve releases that read different columns.
    """

    num_rows: int
    """Rows in this batch (at most the scan's ``batch_size``)."""
    numeric: Mapping[str, NumericArray]
    """Clamped numeric columns, with the dtype ``read_table``'s frame has (int64 / float64)."""
    text: Mapping[str, pa.DictionaryArray]
    """Text columns, dictionary-encoded; every value a declared category (where declared)."""
    clamped: Mapping[str, int]
    """Per numeric column, how many values of this batch were outside the bounds (exact)."""
    missing: Mapping[str, Mask] = field(default_factory=dict)
    """Per column with a marked value in this batch: where (absent: none marked)."""
    rows: npt.NDArray[np.int64] | None = field(default=None, repr=False)
    """Each row's position in the source, ``fragment << 40 | offset`` (stable across passes:
    what a privacy unit's data-independent row selection keys on)."""
    keys: Mapping[str, npt.NDArray[np.int64]] = field(default_factory=dict, repr=False)
    """Per ``int`` privacy-unit column: each row's id exactly as stored (0 where marked)."""

    def take(self, keep: Mask) -> Batch:
        """The rows where ``keep`` holds (every column, marks and positions kept in step)."""
        rows = pa.array(np.flatnonzero(keep))
        return Batch(
            num_rows=int(keep.sum()),
            numeric={c: v[keep] for c, v in self.numeric.items()},
            text={c: _dictionary(pc.take(v, rows), c) for c, v in self.text.items()},
            clamped=self.clamped,
            missing={c: m[keep] for c, m in self.missing.items()},
            rows=None if self.rows is None else self.rows[keep],
            keys={c: k[keep] for c, k in self.keys.items()},
        )

    def present(self, columns: Sequence[str]) -> Mask:
        """Where none of ``columns`` is marked."""
        marked = [self.missing[c] for c in columns if c in self.missing]
        if not marked:
            return np.ones(self.num_rows, dtype=bool)
        return np.asarray(~np.logical_or.reduce(marked), dtype=bool)

    def complete(self, columns: Sequence[str]) -> Batch:
        """The rows where none of ``columns`` is marked, restricted to those columns."""
        cols = list(dict.fromkeys(columns))
        marked = [self.missing[c] for c in cols if c in self.missing]
        numeric = {c: self.numeric[c] for c in cols if c in self.numeric}
        text = {c: self.text[c] for c in cols if c in self.text}
        clamped = {c: self.clamped[c] for c in cols if c in self.clamped}
        keys = {c: self.keys[c] for c in cols if c in self.keys}
        part = Batch(
            num_rows=self.num_rows,
            numeric=numeric,
            text=text,
            clamped=clamped,
            rows=self.rows,
            keys=keys,
        )
        if not marked:
            return part
        return part.take(~np.logical_or.reduce(marked))


@dataclass(frozen=True, slots=True, kw_only=True)
class Scan:
    """A checked Parquet source: its fragments and the declared columns to read from them."""

    path: Path
    """The file or folder, as named in error messages."""
    specs: tuple[ColumnSpec, ...]
    """Declared specs of the columns read, in order."""
    fragments: tuple[pads.Fragment, ...]
    """One per Parquet file (:func:`dp.io.data_files`: each real file once, in the order of
    their listed paths, the order aggregates are combined in); each is read with its own
    stored types."""
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
        InputError: missing file, not Parquet, missing column, or wrong type.
        ConfigError: a column is not declared, or ``batch_size`` is not a positive integer.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    size = batch_size
    path = Path(source)
    wanted = list(dict.fromkeys(columns))
    specs = tuple(schema[name] for name in wanted)
    check_source(path, schema, columns=wanted)
    # Parquet strings are decoded straight into dictionaries: validation and axis codes then run
    # once per distinct value instead of once per row.
    return Scan(path=path, specs=specs, fragments=fragments(path, specs), batch_size=size)


def iter_batches(scan: Scan, fragment: pads.Fragment) -> Iterator[Batch]:
    """Validated batches of one fragment of ``scan``, each of at most ``scan.batch_size`` rows.

    Raises:
        InputError: an unreadable file (a value never raises).
    """
    index = next(i for i, f in enumerate(scan.fragments) if f is fragment)
    offset = 0
    try:
        # No schema: the file's own stored types, converted by the value policies.
        raw = reopen(fragment, scan.specs).to_batches(
            columns=scan.columns, batch_size=scan.batch_size
        )
        for record in raw:
            if record.num_rows > scan.batch_size:
                raise InvariantError("a scanned batch exceeds the batch size")
            batch = _validate(scan, record)
            rows = (index << 40) + offset + np.arange(record.num_rows, dtype=np.int64)
            offset += record.num_rows
            yield replace(batch, rows=rows)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        kind = "CSV" if isinstance(fragment.format, pads.CsvFileFormat) else "Parquet"
        raise InputError(f"cannot read {scan.path} as {kind}: {_reason(exc)}") from None


def batch_frame(batch: Batch, specs: Sequence[ColumnSpec]) -> pd.DataFrame:
    """The columns ``specs`` of ``batch`` as a frame: clamped int64 / float64, a categorical over
    the declared categories, or text; a marked value is NA (its ``int`` column then float).
    Exact data: never log or persist it."""
    out: dict[str, pd.Series] = {}
    for spec in specs:
        mask = batch.missing.get(spec.name)
        if spec.is_numeric:
            values = batch.numeric[spec.name]
            if mask is not None:
                values = np.where(mask, np.nan, values.astype(np.float64))
            out[spec.name] = pd.Series(values, name=spec.name, copy=False)
            continue
        column = batch.text[spec.name]
        if spec.categories is None:
            out[spec.name] = pd.Series(
                column.dictionary_decode().to_pylist(), dtype=object, name=spec.name
            )
            continue
        declared = pd.Index(list(spec.categories))
        lookup = np.append(declared.get_indexer(column.dictionary.to_pandas().astype(str)), -1)
        indices = pc.fill_null(column.indices, -1).to_numpy(zero_copy_only=False)
        codes = lookup[np.asarray(indices, dtype=np.int64)]  # -1 (NA) maps to -1 (NA)
        dtype = pd.CategoricalDtype(declared, ordered=False)
        out[spec.name] = pd.Series(pd.Categorical.from_codes(codes, dtype=dtype), name=spec.name)
    return pd.DataFrame(out, index=pd.RangeIndex(batch.num_rows))


def _validate(scan: Scan, record: pa.RecordBatch) -> Batch:
    """Apply the declared value policies to one record batch. Never raises on a value.

    Missing and undeclared values are mapped where a value is declared, else marked (see
    :class:`Batch`); numbers are clamped to the bounds.
    """
    numeric: dict[str, NumericArray] = {}
    text: dict[str, pa.DictionaryArray] = {}
    clamped: dict[str, int] = {}
    missing: dict[str, Mask] = {}
    keys: dict[str, npt.NDArray[np.int64]] = {}
    for spec in scan.specs:
        column = record.column(spec.name)
        if pa.types.is_null(column.type):  # a file whose column holds no value at all
            column = pa.nulls(len(column), _NULL_AS[spec.type])
        elif spec.is_numeric and pa.types.is_string(column.type):  # a CSV file's text
            column = _parse_numbers(spec, column)
        if spec.unit and spec.type == "int":
            keys[spec.name] = _ids(column)
        if spec.type == "date":
            column = _iso_dates(column)
        if spec.is_numeric:
            arr, bad = _numeric(spec, column)
            if bad is not None:
                arr[bad] = spec.bounds[0] if spec.bounds is not None else 0.0  # a placeholder
            numeric[spec.name], clamped[spec.name] = clamp_numeric(spec, arr)
        else:
            text[spec.name], bad = _text(spec, column)
            if bad is not None and text[spec.name].null_count != int(bad.sum()):
                text[spec.name] = _without(text[spec.name], bad, spec.name)
        if bad is not None:
            missing[spec.name] = bad
    return Batch(
        num_rows=record.num_rows,
        numeric=numeric,
        text=text,
        clamped=clamped,
        missing=missing,
        keys=keys,
    )


_NULL_AS = {
    "int": pa.int64(),
    "float": pa.float64(),
    "category": pa.string(),
    "string": pa.string(),
    "date": pa.string(),
}
"""The type a column Arrow stores as null type (no value at all) is read as."""


_WHOLE = r"^[+-]?[0-9]{1,19}$"
_INT64_MAX = str(np.iinfo(np.int64).max)


def _iso_dates(column: pa.Array) -> pa.Array:
    """A ``date`` column as ``YYYY-MM-DD`` text: a date or timestamp (UTC, or as stored
    without a zone) written so; text (ISO dates, a CSV file's) kept as it is."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_date(column.type):
        column = pc.cast(column, pa.timestamp("s"))
    if pa.types.is_timestamp(column.type):
        return pc.strftime(column, format="%Y-%m-%d")
    return column


def _parse_numbers(spec: ColumnSpec, column: pa.Array) -> pa.Array:
    """A CSV column's text as numbers, null where a value does not parse (surrounding blanks
    allowed): a missing value for the declared policy, never an error. An ``int`` unit's ids
    as int64, exactly (whole numbers up to ``2^63 - 1`` in size); other columns as float64,
    which the value rules then clamp and round as a Parquet file's numbers."""
    text = pc.utf8_trim_whitespace(column)
    if spec.unit and spec.type == "int":
        # Whole numbers within int64 (beyond 2^63 - 1 the id is missing, for either sign):
        # 19 digits compare as text.
        digits = pc.replace_substring_regex(text, "^[+-]", "")
        fits = pc.or_(pc.less(pc.utf8_length(digits), 19), pc.less_equal(digits, _INT64_MAX))
        whole = pc.fill_null(pc.and_(pc.match_substring_regex(text, _WHOLE), fits), False)
        ids = pc.cast(pc.if_else(whole, text, pa.scalar("0")), pa.int64())
        return pc.if_else(whole, ids, pa.scalar(None, pa.int64()))
    values = pd.to_numeric(pd.Series(text.to_numpy(zero_copy_only=False)), errors="coerce")
    return pa.array(np.asarray(values, dtype=np.float64))


def _ids(column: pa.Array) -> npt.NDArray[np.int64]:
    """An ``int`` unit column's ids exactly as stored (0 for a null, whose row is marked): the
    footer check allows integer storage only, so the cast is lossless and cannot fail."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    ids = pc.fill_null(column, 0).cast(pa.int64())
    return np.asarray(ids.to_numpy(zero_copy_only=False), dtype=np.int64)


def _numeric(spec: ColumnSpec, column: pa.Array) -> tuple[npt.NDArray[np.float64], Mask | None]:
    """The column as float64 (nulls as NaN), NaN replaced by the declared missing value, and
    the rows the ``drop`` policy leaves out (None: none)."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    arr = np.array(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    nan = np.isnan(arr)
    if not nan.any():
        return arr, None
    if spec.missing == DROP:
        return arr, nan
    arr[nan] = float(spec.missing)
    return arr, None


def _dictionary(column: pa.Array, name: str) -> pa.DictionaryArray:
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    if not isinstance(column, pa.DictionaryArray):
        raise InvariantError(f"column {name!r} was not dictionary-encoded")
    return column


def _without(column: pa.DictionaryArray, bad: Mask, name: str) -> pa.DictionaryArray:
    """``column`` with the rows ``bad`` set to null."""
    return _dictionary(pc.if_else(pa.array(bad), None, column.dictionary_decode()), name)


def _text(spec: ColumnSpec, column: pa.Array) -> tuple[pa.DictionaryArray, Mask | None]:
    """The column dictionary-encoded, nulls and undeclared values mapped where declared, and
    the rows the ``drop`` policy leaves out. Checks run once per distinct value."""
    column = _dictionary(column, spec.name)
    bad: Mask | None = None
    if column.null_count:
        if spec.missing == DROP:
            bad = ~np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        else:
            column = _dictionary(
                pc.fill_null(column.dictionary_decode(), str(spec.missing)), spec.name
            )
    if spec.categories is not None:
        known = pc.is_in(column.dictionary, value_set=pa.array(spec.categories, pa.string()))
    elif spec.length is not None:
        known = pc.equal(pc.utf8_length(column.dictionary), spec.length)
    else:
        return column, bad
    # A dictionary may hold values no row of this batch uses: look at the used ones only.
    used = pc.fill_null(pc.take(known, column.indices), True)
    if pc.all(used, min_count=0).as_py():
        return column, bad
    if spec.unknown == DROP:
        unknown = ~np.asarray(used.to_numpy(zero_copy_only=False), dtype=bool)
        return column, unknown if bad is None else bad | unknown
    mapped = pc.if_else(known, column.dictionary, pa.scalar(spec.unknown, pa.string()))
    return _dictionary(pc.take(mapped, column.indices), spec.name), bad


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
