"""Fixtures: the Adult benchmark (read in place, never copied) and a small synthetic table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dppub.dp.anonymity import Hierarchy
from tests.dp.anonymity.oracle import small_table

ADULT = Path(__file__).resolve().parents[4] / "shared" / "bench" / "adult"


@pytest.fixture(scope="session")
def adult() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    """The ARX Adult extract (30,162 rows, 9 QIs) and its ARX hierarchies."""
    df = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str)
    hs = {c: Hierarchy.from_csv(ADULT / f"adult_hierarchy_{c}.csv") for c in df.columns}
    return df, hs


@pytest.fixture(scope="session")
def small() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    return small_table()
