"""Seeded generator of a census-like table for the demo and the tests.

Usage: ``python data/generate.py --rows 50000 --seed 20261121 --out data/sample/census.parquet``

Columns (declared in ``configs/demo.yaml``): age (int 17-90), sex, race, education, marital
(categories), zip (6-digit string), hours (float 1-99), income (float 0-250,000). Income depends
on age, education and hours, so the regressions have something to find. The file is written only
if it does not already exist with the same parameters (it is deterministic in rows and seed).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SEX = ["Female", "Male"]
RACE = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]
EDUCATION = ["Preschool", "HS-grad", "Some-college", "Bachelors", "Masters", "Doctorate"]
MARITAL = ["Never-married", "Married", "Divorced", "Widowed"]
ZIP_PREFIXES = ["1901", "1902", "1903", "1904", "2101", "2102", "2201", "3001"]


def make_census(rows: int, seed: int) -> pd.DataFrame:
    """A deterministic census-like table of ``rows`` rows."""
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(40, 13, rows).round(), 17, 90).astype(np.int64)
    edu_idx = rng.choice(len(EDUCATION), rows, p=[0.03, 0.35, 0.27, 0.22, 0.1, 0.03])
    hours = np.clip(rng.normal(40, 11, rows), 1, 99).round(1)
    income = 8000 + 12000 * edu_idx + 900 * np.minimum(age - 17, 35) + 350 * hours
    income = np.clip(income + rng.normal(0, 9000, rows), 0, 250_000).round(0)
    zips = [
        p + f"{s:02d}"
        for p, s in zip(rng.choice(ZIP_PREFIXES, rows), rng.integers(0, 50, rows), strict=True)
    ]
    return pd.DataFrame(
        {
            "age": age,
            "sex": rng.choice(SEX, rows),
            "race": rng.choice(RACE, rows, p=[0.72, 0.12, 0.08, 0.03, 0.05]),
            "education": np.asarray(EDUCATION)[edu_idx],
            "marital": rng.choice(MARITAL, rows, p=[0.33, 0.47, 0.14, 0.06]),
            "zip": zips,
            "hours": hours,
            "income": income,
        }
    )


def write(rows: int, seed: int, out: Path, *, row_group_size: int = 10_000) -> bool:
    """Write the table to ``out`` unless an identical one is there; return True if written."""
    stamp = {"rows": rows, "seed": seed, "generator": 1}
    meta_key = b"dppub.sample"
    if out.exists():
        existing = pq.read_schema(out).metadata or {}
        if json.loads(existing.get(meta_key, b"{}")) == stamp:
            return False
    table = pa.Table.from_pandas(make_census(rows, seed), preserve_index=False)
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), meta_key: json.dumps(stamp)}
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=row_group_size)
    tmp.replace(out)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--out", type=Path, default=Path("data/sample/census.parquet"))
    args = parser.parse_args()
    if write(args.rows, args.seed, args.out):
        print(f"wrote {args.rows} rows to {args.out}")
    else:
        print(f"{args.out} is up to date")


if __name__ == "__main__":
    main()
