"""Hierarchies: builders, validation messages, data-independent label domains."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from dppub.dp.anonymity import Hierarchy
from dppub.dp.errors import ConfigError, InputError

from .conftest import ADULT


def test_from_csv_reads_arx_age_ladder() -> None:
    h = Hierarchy.from_csv(ADULT / "adult_hierarchy_age.csv")
    assert h.height == 5
    assert h.name == "adult_hierarchy_age"
    assert h.labels(4) == ["*"]
    out = h.generalize(pd.Series([39, 21, 20], name="age"), 1)
    # ARX's shipped file puts 20 in "15-19" (its bands are (lo, hi]); we read it as given.
    assert out.tolist() == ["35-39", "20-24", "15-19"]
    assert out.name == "age"


def test_from_csv_rejects_ragged_rows(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text("a;x;*\nb;*\n")
    with pytest.raises(ConfigError, match=r"row 2 has 2 fields, expected 3"):
        Hierarchy.from_csv(p)


def test_from_csv_rejects_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read hierarchy"):
        Hierarchy.from_csv(tmp_path / "nope.csv")
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        Hierarchy.from_csv(tmp_path / "e.csv")


def test_rejects_duplicate_leaves_and_non_monotone_levels() -> None:
    with pytest.raises(ConfigError, match="duplicate leaf 'a' with different levels"):
        Hierarchy(levels=(("a", "a", "b"), ("p", "q", "q"), ("*", "*", "*")), name="x")
    # A verbatim repeated row (as in ARX's FARS age file) is dropped, not an error.
    h = Hierarchy(levels=(("a", "a", "b"), ("p", "p", "q"), ("*", "*", "*")), name="x")
    assert h.leaves == ("a", "b")
    # level 2 splits group "ab" of level 1
    levels = (("a", "b", "c"), ("ab", "ab", "c"), ("p", "q", "q"))
    with pytest.raises(ConfigError, match=r"'x': level 2 splits group 'ab' of level 1"):
        Hierarchy(levels=levels, name="x")


def test_from_bands_levels_alignment_and_clipping() -> None:
    h = Hierarchy.from_bands(20, 44, [5, 10, 20], name="age")
    assert h.height == 5
    assert h.labels(1) == ["20-24", "25-29", "30-34", "35-39", "40-44"]
    assert h.labels(2) == ["20-29", "30-39", "40-44"]
    assert h.labels(3) == ["20-39", "40-44"]
    assert h.labels(4) == ["*"]


@pytest.mark.parametrize(
    ("widths", "msg"), [([10, 5], "increase"), ([4, 6], "divide"), ([1, 2], "increase")]
)
def test_from_bands_validates_widths(widths: list[int], msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        Hierarchy.from_bands(0, 99, widths)


def test_from_bands_rejects_reversed_domain() -> None:
    with pytest.raises(ConfigError, match=r"need lo <= hi, got \[5, 1\]"):
        Hierarchy.from_bands(5, 1, [2])


def test_from_prefix_mask_redacts_one_character_per_level() -> None:
    h = Hierarchy.from_prefix_mask(["190146", "190147", "190211"], name="zip")
    assert [h.levels[lv][0] for lv in range(h.height)] == [
        "190146",
        "19014*",
        "1901**",
        "190***",
        "19****",
        "1*****",
        "******",
        "*",
    ]
    assert h.labels(2) == ["1901**", "1902**"]
    with pytest.raises(ConfigError, match="one length"):
        Hierarchy.from_prefix_mask(["123", "12"])


def test_from_levels_taxonomy_and_ragged_mapping() -> None:
    h = Hierarchy.from_levels({"nurse": ["health", "*"], "clerk": ["office", "*"]})
    assert h.height == 3
    assert h.leaves == ("nurse", "clerk")
    assert h.group_sizes(1).tolist() == [1, 1]
    with pytest.raises(ConfigError, match="leaf 'clerk' has 1 levels, expected 2"):
        Hierarchy.from_levels({"nurse": ["health", "*"], "clerk": ["*"]})


def test_labels_are_declared_by_the_hierarchy_not_the_data() -> None:
    h = Hierarchy.from_bands(0, 99, [10])
    # The generalized column's categories are the full declared domain, even for one row.
    out = h.generalize(pd.Series([42]), 1)
    assert list(out.cat.categories) == h.labels(1)
    assert len(h.labels(1)) == 10
    with pytest.raises(ConfigError, match=r"level must be in \[0, 2\], got 3"):
        h.labels(3)


def test_unknown_values_are_neither_echoed_nor_counted() -> None:
    h = Hierarchy.from_prefix_mask(["190146", "190147"], name="zip")
    values = pd.Series(["190146", "999999", "888888", None, "190147"], name="zip")
    with pytest.raises(InputError, match=r"^column 'zip' has values that are not leaves") as info:
        h.encode(values)
    assert "999999" not in str(info.value)
    assert "888888" not in str(info.value)
    assert "3" not in str(info.value)


def test_integral_floats_match_integer_leaves() -> None:
    h = Hierarchy.from_bands(0, 9, [5])
    assert h.encode(pd.Series([3.0, 7])).tolist() == [3, 7]


def test_hierarchy_is_immutable_and_hashable_by_content() -> None:
    a = Hierarchy.from_levels({"x": ["*"], "y": ["*"]})
    b = Hierarchy.from_levels({"x": ["*"], "y": ["*"]})
    assert a == b
    assert a.digest() == b.digest()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "other"  # type: ignore[misc]
