"""Declared domains (dp/numerics/domains.py): the clip puts every row inside; bounds are
declared."""

from __future__ import annotations

import numpy as np
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.numerics.domains import FeatureDomain, TargetDomain, declared_feature_bounds


def test_box_clip_clamps_and_rounds_one_hot_blocks_to_a_vertex() -> None:
    dom = FeatureDomain.box([0.0, 0.0, 0.0, -5.0], [1.0, 1.0, 1.0, 5.0], d=4, blocks=[(0, 3)])
    X = np.array([[0.2, 0.7, 0.1, 9.0], [0.4, 0.3, 0.2, -9.0], [1.5, -1.0, 0.0, 1.0]])
    assert dom.clip(X).tolist() == [
        [0.0, 1.0, 0.0, 5.0],  # the largest entry exceeds 1/2: its indicator
        [0.0, 0.0, 0.0, -5.0],  # none does: no indicator
        [1.0, 0.0, 0.0, 1.0],
    ]
    assert dom.group_magnitudes().tolist() == [5.0, 1.0]  # the numeric one, then one per block


def test_ball_clip_shrinks_rows_outside_only() -> None:
    dom = FeatureDomain.ball(2.0, d=2)
    out = dom.clip(np.array([[3.0, 4.0], [0.6, 0.8]]))
    assert np.allclose(out, [[1.2, 1.6], [0.6, 0.8]])
    assert np.all(np.linalg.norm(out, axis=1) <= 2.0 * (1 + 1e-15))


def test_bounds_are_declared_exactly_once() -> None:
    with pytest.raises(ConfigError, match="declare exactly one of bounds_X"):
        declared_feature_bounds(None, None)
    with pytest.raises(ConfigError, match="declare exactly one of bounds_X"):
        declared_feature_bounds((0.0, 1.0), 1.0)
    with pytest.raises(ConfigError, match="one-hot block must be declared"):
        FeatureDomain.box(0.0, 2.0, d=2, blocks=[(0, 2)])
    assert TargetDomain(lower=-1.0, upper=3.0).clip(np.array([-4.0, 9.0])).tolist() == [-1.0, 3.0]
