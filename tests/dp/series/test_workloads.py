"""Series workloads: causal figures, the period each is published in, stacks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.series import moving_sum, per_period, running_total, stack, year_to_date


def test_year_to_date_resets_every_year() -> None:
    w = year_to_date(5, year=2).matrix
    assert w @ np.array([1.0, 2.0, 4.0, 8.0, 16.0]) == pytest.approx([1, 3, 4, 12, 16])


def test_moving_sums_cover_the_periods_so_far_then_the_last_width() -> None:
    w = moving_sum(5, 3).matrix
    assert w @ np.array([1.0, 2.0, 4.0, 8.0, 16.0]) == pytest.approx([1, 3, 7, 14, 28])


def test_every_figure_is_published_in_its_last_period() -> None:
    w = stack(per_period(4), running_total(4), moving_sum(4, 2))
    assert w.periods.tolist() == [0, 1, 2, 3] * 3
    assert w.name == "per_period+running_total+moving_sum_2"
    assert w.matrix[w.block("running_total")].tolist() == running_total(4).matrix.tolist()


def test_a_workload_is_frozen() -> None:
    w = running_total(3)
    with pytest.raises(ValueError, match="read-only"):
        w.matrix[0, 0] = 5.0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: stack(per_period(3), running_total(4)), "same horizon"),
        (lambda: moving_sum(3, 0), "width must be a positive integer"),
        (lambda: running_total(0), "horizon must be a positive integer"),
        (lambda: per_period(3).block("running_total"), "has no block 'running_total'"),
    ],
)
def test_bad_workloads_are_refused(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()
