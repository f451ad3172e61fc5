"""Fixtures: the Adult benchmark (the repository's copy in data/public) and a small table."""

from __future__ import annotations

import pandas as pd
import pytest

from dppub.dp.anonymity import Hierarchy
from dppub.dp.reference.public_data import folder
from tests.dp.anonymity.oracle import small_table

ADULT = folder("adult")


@pytest.fixture(scope="session")
def adult() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    """The ARX Adult extract (30,162 rows, 9 QIs) and its ARX hierarchies."""
    df = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str)
    hs = {c: Hierarchy.from_csv(ADULT / f"adult_hierarchy_{c}.csv") for c in df.columns}
    return df, hs


@pytest.fixture(scope="session")
def small() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    return small_table()
