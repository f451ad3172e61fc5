"""Seeded generator of a hospital-admissions table with a date column, for the monthly series.

Usage: ``python data/generate_admissions.py --seed 20270101 --out data/sample/admissions.parquet``

Columns (declared in ``configs/monthly_series.yaml``): patient_id (int, the privacy unit: a
patient is admitted in one to a few months), admitted_on (a date, stored as Parquet
date32, 2026-01-01 .. 2027-12-31), region (category), cost (float 0-20,000). Admissions follow a
seasonal monthly rate with a slow trend, so the published series has a shape to show.
Deterministic in its arguments.
"""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

REGIONS = ["North", "South", "East", "West"]
START, MONTHS = (2026, 1), 24


def make_admissions(
    seed: int, *, patients: int = 6000, months: int = MONTHS, start: tuple[int, int] = START
) -> pd.DataFrame:
    """A deterministic admissions table over ``months`` months from ``start`` (year, month)."""
    rng = np.random.default_rng(seed)
    home = rng.choice(len(REGIONS), patients, p=[0.35, 0.25, 0.25, 0.15])
    visits = 1 + rng.poisson(0.8, patients)  # most patients come once or twice
    rows = []
    season = 1.0 + 0.25 * np.cos(2 * np.pi * np.arange(months) / 12)  # winter peaks
    weights = season * (1.0 + 0.01 * np.arange(months))
    weights /= weights.sum()
    for pid in range(patients):
        for month in np.sort(rng.choice(months, size=visits[pid], p=weights)):
            year, m = start[0] + (start[1] - 1 + month) // 12, (start[1] - 1 + month) % 12 + 1
            day = int(rng.integers(1, 29))
            cost = float(np.clip(rng.lognormal(8.0, 0.6), 0, 20_000).round(2))
            rows.append((1000 + pid, date(year, m, day), REGIONS[home[pid]], cost))
    frame = pd.DataFrame(rows, columns=["patient_id", "admitted_on", "region", "cost"])
    order = rng.permutation(len(frame))
    return frame.iloc[order].reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20270101)
    parser.add_argument("--patients", type=int, default=6000)
    parser.add_argument("--out", type=Path, default=Path("data/sample/admissions.parquet"))
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    make_admissions(args.seed, patients=args.patients).to_parquet(args.out, index=False)
    print(args.out)


if __name__ == "__main__":
    main()
