"""mbi is an optional extra: without it a synthetic release fails with one line that says how
to install it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.synthetic import pgm


def test_without_mbi_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mbi", None)  # `import mbi` raises ImportError
    with pytest.raises(ConfigError) as caught:
        pgm.model_size({"a": 2}, [("a",)])
    message = str(caught.value)
    assert "pip install 'dppub[synth]'" in message
    assert "\n" not in message


def test_measurements_of_one_clique_combine_into_the_same_loss() -> None:
    # Private-PGM's loss sum_i |x - y_i|^2 / (2 s_i^2) is the combined term's plus a constant
    # (the same for every x), so the fit is the same; the total estimate too.
    rng = np.random.default_rng(3)
    a1, a2, b = rng.normal(10.0, 3.0, 6), rng.normal(10.0, 1.0, 6), rng.normal(5.0, 2.0, 2)
    given = [(("a", "b"), a1, 3.0), (("c",), b, 2.0), (("a", "b"), a2, 1.0)]
    merged = pgm.combined(given)
    assert [cl for cl, _, _ in merged] == [("a", "b"), ("c",)]  # first appearance order

    def loss(
        ms: list[tuple[tuple[str, ...], np.ndarray, float]], x: dict[tuple[str, ...], np.ndarray]
    ) -> float:
        return sum(float(((x[cl] - y) ** 2).sum()) / (2 * s**2) for cl, y, s in ms)

    gaps = []
    for _ in range(3):
        x = {("a", "b"): rng.normal(10.0, 5.0, 6), ("c",): rng.normal(5.0, 5.0, 2)}
        gaps.append(loss(given, x) - loss(merged, x))
    assert gaps == pytest.approx([gaps[0]] * 3, rel=1e-9, abs=1e-9)
    (_, y, s) = merged[0]
    assert s == pytest.approx((1 / 3.0**2 + 1 / 1.0**2) ** -0.5)
    # the minimum-variance total: each identity measurement's sum, weighted 1 / (s^2 cells)
    assert y.sum() == pytest.approx((a1.sum() / 9 + a2.sum()) / (1 / 9 + 1))
