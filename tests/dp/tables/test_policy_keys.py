"""The policy rule's adaptive weights: a neighbour moves them by at most the declared L2
sensitivity, a unit's own keys stay within the new-key bound, and the rule spends its delta."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.calibration import gaussian_delta
from dppub.dp.engine import StreamingBackend
from dppub.dp.engine.key_weights import KeyWeightsAggregate, _memberships
from dppub.dp.engine.unit_bounding import UnitBound
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.plan import load_plan
from dppub.dp.schema import ColumnSpec, TableSchema
from dppub.dp.tables.keys import (
    KeyWeights,
    key_rule,
    new_key_delta,
    rule_weights,
    select_keys,
)
from dppub.dp.tables.policy_keys import policy_sensitivity, policy_weights
from tests.dp.pipeline.published_run import publish_in_process

KEYS = 6
M = 4


def _weights(units: dict[str, frozenset[int]], cutoff: float) -> np.ndarray:
    """Policy weights over all ``KEYS`` keys (zero where no unit is), through the aggregate's
    own ordering of the units."""
    pairs = pd.DataFrame(
        [(u, f"k{k}") for u, ks in units.items() for k in sorted(ks)], columns=["unit", "key"]
    )
    labels = pd.Index([f"k{k}" for k in range(KEYS)])
    if pairs.empty:
        return np.zeros(KEYS)
    per_unit = pairs.groupby("unit", sort=False)["key"].transform("size").to_numpy()
    single, keys, offsets = _memberships(pairs, per_unit, labels)
    return policy_weights(single, keys, offsets, cutoff=cutoff)


unit_sets = st.frozensets(st.integers(0, KEYS - 1), min_size=1, max_size=M)
tables = st.dictionaries(st.text("abcdef", min_size=1, max_size=3), unit_sets, max_size=25)


@pytest.mark.slow  # ~6 s of hypothesis examples
@settings(max_examples=200, deadline=None)
@given(
    tables,
    st.text("abcdef", min_size=1, max_size=3),
    unit_sets,
    st.floats(0.2, 8.0),
)
def test_a_neighbour_moves_the_policy_weights_by_at_most_the_declared_sensitivity(
    others: dict[str, frozenset[int]], name: str, mine: frozenset[int], cutoff: float
) -> None:
    without = {u: ks for u, ks in others.items() if u != name}
    with_unit = {**without, name: mine}
    near = _weights(without, cutoff)
    far = _weights(with_unit, cutoff)
    bound = policy_sensitivity(cutoff=cutoff, max_partitions=M)
    assert float(np.linalg.norm(far - near)) <= bound
    # keys the unit holds alone: at most 1/sqrt(t) each (the new-key bound of the rule)
    alone = [k for k in mine if not any(k in ks for ks in without.values())]
    if alone:
        assert float(far[alone].max()) <= bound / math.sqrt(len(alone))


def test_a_unit_gives_nothing_to_a_key_at_the_cutoff_and_the_rest_to_the_others() -> None:
    # five units alone in key 0 fill it to the cutoff 3; the spread unit then gives keys 1, 2
    # its whole weight (1/sqrt(2) each) where equal weights would give each key 1/sqrt(3).
    w = policy_weights(np.array([5, 0, 0]), np.array([0, 1, 2]), np.array([0, 3]), cutoff=3.0)
    assert w.tolist() == pytest.approx([3.0, 2**-0.5, 2**-0.5])


def test_the_policy_rule_spends_at_most_delta_with_its_slack() -> None:
    for eps, delta, m in [(0.5, 1e-6, 4), (1.0, 1e-8, 2), (0.1, 1e-5, 10)]:
        rule = key_rule(eps, delta, m, "policy")
        assert rule.kind == "policy" and rule.mechanism == "policy_gaussian_threshold"
        assert rule.sensitivity >= policy_sensitivity(cutoff=rule.cutoff, max_partitions=m)
        assert 1.0 < rule.sensitivity < 1.01
        assert rule.cutoff == pytest.approx(rule.rho + 3 * rule.sigma)
        spent = gaussian_delta(sigma=rule.sigma, l2_sensitivity=rule.sensitivity, epsilon=eps)
        assert spent + new_key_delta(rule) <= delta
        assert rule.describe()["l2_sensitivity"] == rule.sensitivity


def test_selection_names_a_rule_and_auto_keeps_the_previous_choice() -> None:
    assert key_rule(0.5, 1e-6, 4).kind == "gaussian"
    assert key_rule(0.5, 1e-6, 4, "threshold").kind == "threshold"
    assert key_rule(0.5, 1e-6, 1, "policy").kind == "policy"
    with pytest.raises(Exception, match="selection must be auto, threshold, gaussian or policy"):
        key_rule(0.5, 1e-6, 4, "mad")


def test_policy_draws_release_keys_above_the_cutoff_and_not_empty_ones() -> None:
    rule = key_rule(0.5, 1e-6, 4, "policy")
    heavy = int(rule.cutoff) + 1
    data = KeyWeights(
        labels=("a", "b", "c"),
        units=np.array([heavy, 1, 2]),
        weights=np.zeros(3, dtype=np.int64),
        single=np.array([heavy, 0, 0]),
        spread_keys=np.array([1, 2]),
        spread_offsets=np.array([0, 2]),
    )
    assert rule_weights(data, rule).tolist() == pytest.approx([rule.cutoff, 2**-0.5, 2**-0.5])
    rng = np.random.default_rng(37)
    drawn = np.array([select_keys(data, rule, rng=rng) for _ in range(200)])
    # P(a shown) = Phi(3) = 0.99865: 200 draws all but <= 6 show it (false failure < 1e-4);
    # P(b or c shown) <= 1e-6 per draw.
    assert drawn[:, 0].sum() >= 194 and not drawn[:, 1:].any()


def test_the_aggregate_lists_units_alone_per_key_and_the_others_by_size_then_id(
    tmp_path: Path,
) -> None:
    frame = pd.DataFrame(
        {
            "person": ["z", "z", "z", "a", "a", "b", "c", "c", "d"],
            "site": ["S1", "S2", "S3", "S2", "S1", "S1", "S3", "S3", "S2"],
        }
    )
    frame.to_parquet(tmp_path / "v.parquet", index=False)
    schema = TableSchema(
        columns=(ColumnSpec(name="site", type="string"), ColumnSpec(name="person", type="string"))
    )
    unit = UnitBound(column="person", max_rows=10, max_partitions=M)
    got: KeyWeights = StreamingBackend(batch_size=2).run(
        KeyWeightsAggregate(("site",), unit), tmp_path / "v.parquet", schema
    )
    assert got.labels == ("S1", "S2", "S3")
    assert got.single is not None and got.single.tolist() == [1, 1, 1]  # b, d, c
    # a (2 keys) before z (3 keys); each unit's keys by label
    assert got.spread_keys.tolist() == [0, 1, 0, 1, 2]
    assert got.spread_offsets.tolist() == [0, 2, 5]


def _config(tmp: Path, table: dict[str, Any]) -> Path:
    """Sites S0-S4 visited by 300 persons each (none elsewhere), one row each; per person."""
    sites = [f"S{i}" for i in range(5) for _ in range(300)]
    persons = [f"S{i}-{j}" for i in range(5) for j in range(300)]
    data = tmp / "visits.parquet"
    pd.DataFrame({"site": sites, "person": persons}).to_parquet(data, index=False)
    raw = {
        "dataset": {
            "name": "visits",
            "path": str(data),
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "columns": {"site": {"type": "string"}, "person": {"type": "string"}},
            "privacy_unit": "person",
            "max_rows_per_unit": 4,
            "max_partitions_per_unit": 4,
        },
        "tables": [
            {"name": "by_site", "epsilon": 1.0, "by": ["site"], "measures": ["count"], **table}
        ],
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow  # ~3 s: a table planned and published
def test_a_config_names_the_policy_rule_and_the_release_states_it(tmp_path: Path) -> None:
    private = {"keys": "private", "delta": 1e-6, "selection": "policy"}
    folder = publish_in_process(
        _config(tmp_path, private), tmp_path / "l.db", tmp_path / "o"
    ).folder
    answers = pd.read_csv(folder / "by_site" / "answers.csv")
    # each site weighs the cutoff (300 units alone in it), 3 sigma above the threshold: each is
    # released with probability 0.99865; fewer than 3 of 5: < 3e-8 (the false-failure rate)
    released = set(answers["site"])
    assert released <= {f"S{i}" for i in range(5)} and len(released) >= 3
    release = json.loads((folder / "by_site" / "release.json").read_text())
    rule = release["details"]["key_selection"]
    assert rule["rule"] == "policy" and rule["cutoff"] > rule["threshold"]
    assert release["mechanism"] == "policy_gaussian_threshold+laplace"
    with pytest.raises(ConfigError, match="selection: gaussian chooses private keys"):
        load_plan(_config(tmp_path, {"selection": "gaussian"}))
