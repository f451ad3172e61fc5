"""Seeded generator of a census-like *partitioned* Parquet dataset, for scale benchmarks.

Usage: ``python data/generate_census.py --rows 10000000 --seed 20261121 --partitions 16
--out data/scale/census_1e7``

Same columns and semantics as ``data/generate.py`` (its ``make_census`` is imported, not copied).
Rows are produced and written in chunks of at most ``--chunk-rows`` rows, each chunk one Parquet
row group, so 10^8 rows never sit in memory at once. Chunk ``c`` of partition ``p`` is
``make_census(len, seed=hash(seed, p, c))``: the dataset is deterministic in
``(rows, seed, partitions, chunk_rows)`` (but it is not ``make_census(rows, seed)`` row for row).
Partition files are ``part-00000.parquet``...; when ``rows < partitions`` the last files are
empty (zero rows, full schema). A folder already holding an identical dataset is left alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

_STAMP_KEY = b"dppub.census"
_STAMP_FILE = "_dppub_census.json"


def _load_make_census() -> Callable[[int, int], pd.DataFrame]:
    # data/ is not a package: import the sibling generator by path so there is one source of truth.
    path = Path(__file__).with_name("generate.py")
    spec = importlib.util.spec_from_file_location("dppub_data_generate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    make: Callable[[int, int], pd.DataFrame] = module.make_census
    return make


make_census = _load_make_census()


def partition_sizes(rows: int, partitions: int) -> list[int]:
    """Rows per partition: as even as possible, the remainder on the first partitions."""
    base, extra = divmod(rows, partitions)
    return [base + (1 if p < extra else 0) for p in range(partitions)]


def chunk_seed(seed: int, partition: int, chunk: int) -> int:
    """Independent, reproducible seed of one chunk."""
    return int(np.random.SeedSequence([seed, partition, chunk]).generate_state(1)[0])


def _arrow_schema() -> pa.Schema:
    return pa.Table.from_pandas(make_census(1, 0), preserve_index=False).schema.remove_metadata()


def write_dataset(
    rows: int, seed: int, partitions: int, out: Path, *, chunk_rows: int = 1_000_000
) -> bool:
    """Write the dataset into folder ``out`` unless an identical one is there; True if written."""
    if rows < 0 or partitions < 1 or chunk_rows < 1:
        raise ValueError(
            f"need rows >= 0, partitions >= 1, chunk_rows >= 1; got {rows}, {partitions}, "
            f"{chunk_rows}"
        )
    stamp = {
        "rows": rows,
        "seed": seed,
        "partitions": partitions,
        "chunk_rows": chunk_rows,
        "generator": 1,
    }
    marker = out / _STAMP_FILE
    if marker.exists() and json.loads(marker.read_text()) == stamp:
        return False
    if out.exists() and not marker.exists() and any(out.iterdir()):
        # Never delete a folder this generator did not write.
        raise FileExistsError(f"{out} exists and is not a generated census dataset")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    schema = _arrow_schema().with_metadata({_STAMP_KEY: json.dumps(stamp)})
    for p, size in enumerate(partition_sizes(rows, partitions)):
        with pq.ParquetWriter(tmp / f"part-{p:05d}.parquet", schema) as writer:
            if size == 0:
                writer.write_table(schema.empty_table())
            for c, start in enumerate(range(0, size, chunk_rows)):
                n = min(chunk_rows, size - start)
                frame = make_census(n, chunk_seed(seed, p, c))
                table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
                writer.write_table(table, row_group_size=chunk_rows)
    # The marker is not Parquet; pyarrow.dataset ignores files starting with "_".
    (tmp / _STAMP_FILE).write_text(json.dumps(stamp))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--chunk-rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if write_dataset(args.rows, args.seed, args.partitions, args.out, chunk_rows=args.chunk_rows):
        print(f"wrote {args.rows} rows in {args.partitions} partition(s) to {args.out}")
    else:
        print(f"{args.out} is up to date")


if __name__ == "__main__":
    main()
