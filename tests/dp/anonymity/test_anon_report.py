"""The review metrics and the markdown report of a release."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from dppub.dp.anonymity import Hierarchy
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.frame_anonymity import AnonymizationResult, anonymize
from tests.dp.anonymity.oracle import Dataset


@pytest.fixture(scope="module")
def result(small: Dataset) -> AnonymizationResult:
    df, hs = small
    return anonymize(df, hs, k=4, max_suppression=0.05, metric="loss")


def test_metrics_are_consistent_with_the_released_table(
    small: Dataset, result: AnonymizationResult
) -> None:
    df, hs = small
    m = result.metrics
    sizes = result.table.groupby(list(hs), observed=True).size()
    assert m["k_achieved"] == sizes.min() >= 4
    assert m["records"] == len(df)
    assert m["released_records"] == len(result.table) == len(df) - result.suppressed
    assert m["suppressed"] == result.suppressed <= m["suppression_limit"] == math.floor(0.05 * 300)
    assert m["suppression_rate"] == pytest.approx(result.suppressed / len(df))
    assert m["class_size"]["classes"] == len(sizes)
    assert m["class_size"]["max"] == sizes.max()
    assert sum(m["class_size"]["histogram"].values()) == len(sizes)
    assert m["avg_class_size"] == pytest.approx(len(result.table) / len(sizes))
    assert m["dm_star"] >= (sizes**2).sum()
    assert m["dm"] == pytest.approx((sizes**2).sum() + len(df) * result.suppressed)
    assert m["prosecutor_risk_after"]["max"] == pytest.approx(1 / sizes.min())
    assert m["prosecutor_risk_after"]["avg"] == pytest.approx(len(sizes) / len(result.table))
    assert m["prosecutor_risk_before"]["max"] >= m["prosecutor_risk_after"]["max"]
    assert m["loss"] == pytest.approx(result.score)
    assert set(m["loss_per_qi"]) == set(hs)
    agg = math.prod(1 + x for x in m["loss_per_qi"].values()) ** (1 / 4) - 1
    assert agg == pytest.approx(result.score)
    assert m["levels"] == result.levels
    assert m["differentially_private"] is False
    assert m["nodes_checked"] >= 1
    assert m["lattice_size"] == 4 * 5 * 3 * 2
    assert m["runtime_seconds"] >= m["search_seconds"] > 0
    assert len(m["input_sha256"]) == 64
    assert m["hierarchy_sha256"]["zip"] == hs["zip"].digest()


def test_input_hash_depends_on_the_data(small: Dataset) -> None:
    df, hs = small
    a = anonymize(df, hs, k=2, max_suppression=0.0).metrics["input_sha256"]
    b = anonymize(df, hs, k=2, max_suppression=0.0).metrics["input_sha256"]
    changed = df.assign(disease=df["disease"].iloc[::-1].to_numpy())
    c = anonymize(changed, hs, k=2, max_suppression=0.0).metrics["input_sha256"]
    assert a == b != c


def test_markdown_report_lists_levels_and_says_not_dp(result: AnonymizationResult) -> None:
    md = result.to_markdown()
    assert not md.lstrip().startswith("#")  # no heading of its own: the run report nests it
    assert "Not differentially private" in md
    for col, lvl in result.levels.items():
        assert f"| {col} | {lvl} |" in md
    assert f"{result.suppressed} (" in md


@pytest.mark.parametrize(
    ("kwargs", "exc", "msg"),
    [
        ({"k": 0}, ConfigError, r"k must be an integer >= 1, got 0"),
        ({"k": True}, ConfigError, r"k must be an integer"),
        ({"max_suppression": 1.5}, ConfigError, r"max_suppression must be in \[0, 1\], got 1.5"),
        ({"metric": "precision"}, ConfigError, r"metric must be one of"),
        ({"quasi_identifiers": ["age", "disease"]}, ConfigError, "'disease' has no hierarchy"),
        ({"quasi_identifiers": ["age", "age"]}, ConfigError, "must be distinct"),
        ({"l_diversity": {"column": "age", "l": 2}}, ConfigError, "must not be a quasi-identifier"),
        ({"l_diversity": {"column": "disease", "l": 0}}, ConfigError, "l must be an integer >= 1"),
        ({"l_diversity": {"column": "disease", "l": 2, "kind": "x"}}, ConfigError, "kind must be"),
        ({"l_diversity": {"column": "nope", "l": 2}}, InputError, "'nope' is not in the table"),
    ],
)
def test_invalid_arguments_raise_one_line_errors(
    small: Dataset, kwargs: dict[str, Any], exc: type[Exception], msg: str
) -> None:
    df, hs = small
    args = {"k": 3, "max_suppression": 0.05, **kwargs}
    with pytest.raises(exc, match=msg):
        anonymize(df, hs, **args)


def test_no_admissible_node_is_a_clear_input_error() -> None:
    df = pd.DataFrame({"sex": ["F", "M", "F"]})
    hs = {"sex": Hierarchy.from_levels({"F": ["*"], "M": ["*"]})}
    with pytest.raises(
        InputError, match=r"no generalization satisfies k=5 with at most 1 suppressed"
    ):
        anonymize(df, hs, k=5, max_suppression=0.5)
    # With sigma = 1 everything may be suppressed: the release is empty but valid.
    res = anonymize(df, hs, k=5, max_suppression=1.0)
    assert res.suppressed == 3
    assert res.table.empty
    assert res.metrics["k_achieved"] == 0


def test_empty_table_and_unknown_values_are_input_errors(small: Dataset) -> None:
    df, hs = small
    with pytest.raises(InputError, match="empty"):
        anonymize(df.iloc[:0], hs, k=2, max_suppression=0.0)
    bad = df.assign(zip=df["zip"].where(df.index >= 2, "999"))
    with pytest.raises(
        InputError, match=r"^column 'zip' has values that are not leaves of its hierarchy$"
    ):
        anonymize(bad, hs, k=2, max_suppression=0.0)
