"""The k-anonymous release of a Parquet source, in memory bounded by the QIs' leaf domain.

Two passes over the source, never a whole column in memory:

1. :func:`~dp.engine.folds.anonymity_counts.leaf_counts_stream` reduces the quasi-identifiers
   to their distinct leaf-code tuples and counts (through the engine, so also on Dask), and
   :func:`dp.anonymity.full_domain.anonymize_counts` searches the lattice on them: the same base
   rows, hence the same node, levels and metrics as
   :func:`dp.reference.frame_anonymity.anonymize` on the whole table.
2. The release is written batch by batch (locally, in source order): each batch's records are
   generalized at the chosen levels by :func:`dp.anonymity.released_rows.release_rows` (on worker
   threads, a few batches ahead), those of the suppressed classes (known from the counts)
   dropped, and the rest appended to one Parquet file.
   The input digest of the report is computed in the same pass, and every class is recounted:
   if the source changed between the passes, nothing is released.

The rows and their order equal the in-memory release's. This release is *not* differentially
private (its levels are chosen by looking at the data); it adds no noise and reads no budget.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dppub.dp.anonymity.full_domain import anonymize_counts
from dppub.dp.anonymity.hierarchy import Hierarchy
from dppub.dp.anonymity.released_rows import InputDigest, release_rows
from dppub.dp.anonymity.result import AnonymizationReport
from dppub.dp.engine.aggregate import Backend, StreamingBackend
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, batch_frame
from dppub.dp.engine.folds.anonymity_counts import IntArray, batch_leaf_codes, leaf_counts_stream
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.io import empty_frame
from dppub.dp.schema import TableSchema

__all__ = ["anonymize_stream"]

_AHEAD = 2
"""Batches generalized ahead of the one being written (worker threads)."""
_Prepared = tuple[IntArray, pd.DataFrame, IntArray, pa.Table]


def anonymize_stream(
    source: str | Path,
    schema: TableSchema,
    hierarchies: Mapping[str, Hierarchy],
    *,
    out: str | Path,
    include: Sequence[str] = (),
    k: int,
    max_suppression: float,
    metric: str = "loss",
    suppress_if_impossible: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    backend: Backend | None = None,
) -> AnonymizationReport:
    """Anonymize the QIs ``hierarchies`` (plus the ``include`` columns, unchanged) of a Parquet
    file or folder and write the released table to ``out`` (see the module docstring).

    ``out`` appears only once complete (written beside it, then renamed). The report equals
    :func:`dp.reference.frame_anonymity.anonymize`'s on the frame ``read_table`` gives for these
    columns (timings aside).

    Args:
        source: a Parquet file or a folder of Parquet files.
        schema: the declared schema.
        hierarchies: QI column -> hierarchy, in QI order.
        out: the Parquet file to write.
        include: non-QI columns released as they are.
        k, max_suppression, metric: as :func:`dp.reference.frame_anonymity.anonymize`.
        batch_size: rows per batch when ``backend`` is not given.
        backend: where the counting and writing passes read from; default a
            :class:`StreamingBackend` of ``batch_size``.

    Raises:
        ConfigError, InputError: as :func:`dp.reference.frame_anonymity.anonymize` and the engine's
        reads.
    """
    hier = dict(hierarchies)
    rest = [c for c in dict.fromkeys(include) if c not in hier]
    if not hier:
        raise ConfigError("at least one quasi-identifier hierarchy is required")
    runner = backend if backend is not None else StreamingBackend(batch_size=batch_size)
    leaf = leaf_counts_stream(source, schema, hier, also=rest, backend=runner)
    # Base rows in first-appearance order, as the in-memory path numbers them: the same arrays,
    # hence the same float operations and metrics bit for bit.
    order = np.argsort(leaf.first)
    found = anonymize_counts(
        leaf.rows[order],
        leaf.counts[order],
        hier,
        k=k,
        max_suppression=max_suppression,
        metric=metric,
        suppress_if_impossible=suppress_if_impossible,
    )
    keep = np.empty(len(order), dtype=bool)
    keep[order] = ~found.suppress
    columns = [*hier, *rest]
    rest_specs = [schema[c] for c in rest]
    target = Path(out)
    partial = target.with_name(f".{target.name}.partial")
    digest = InputDigest()
    writer: pq.ParquetWriter | None = None
    seen = np.zeros(len(leaf.counts), dtype=np.int64)  # records per counted class, recounted

    def prepare(marked: Batch) -> _Prepared:
        batch = marked.complete(columns)
        codes = np.column_stack([batch_leaf_codes(h, batch, c) for c, h in hier.items()]).reshape(
            batch.num_rows, len(hier)
        )
        others = batch_frame(batch, rest_specs)
        rows = leaf.row_of(codes)
        released = release_rows(others, columns, hier, codes, found.levels, keep[rows])
        return codes, others, rows, pa.Table.from_pandas(released, preserve_index=False)

    def write_oldest() -> None:
        nonlocal writer
        codes, others, rows, table = pending.popleft().result()
        digest.update(codes, others)
        seen[:] += np.bincount(rows, minlength=len(seen))
        if writer is None:
            writer = pq.ParquetWriter(partial, table.schema)
        writer.write_table(table)

    # Batches are generalized on worker threads, a few ahead, while this thread reads, hashes
    # and writes them in order (numpy, Arrow, hashlib and Parquet release the GIL).
    pool = ThreadPoolExecutor(max_workers=_AHEAD, thread_name_prefix="dppub-anonymize")
    pending: deque[Future[_Prepared]] = deque()
    try:
        for marked in runner.batches(source, schema, columns):
            pending.append(pool.submit(prepare, marked))
            if len(pending) > _AHEAD:
                write_oldest()
        while pending:
            write_oldest()
        if not np.array_equal(seen, leaf.counts):
            # The classes the search saw are not the ones written: k could be broken.
            raise InputError(f"{source} changed while it was being anonymized; nothing released")
    except BaseException:
        if writer is not None:
            writer.close()
        partial.unlink(missing_ok=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if writer is None:  # no rows at all: an empty table with the released columns
        none = np.zeros((0, len(hier)), dtype=np.int64)
        empty = release_rows(empty_frame(rest_specs), columns, hier, none, found.levels, keep[:0])
        pq.write_table(pa.Table.from_pandas(empty, preserve_index=False), partial)
    else:
        writer.close()
    os.replace(partial, target)
    return found.report(digest.hexdigest(hier, columns))
