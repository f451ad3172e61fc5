"""A series' stored state: exact round trip, and any change to it refused before a run."""

from __future__ import annotations

import numpy as np
import pytest

from dppub.dp.errors import InputError
from dppub.dp.series.state import SeriesState, load_state


def _state() -> SeriesState:
    rng = np.random.default_rng(0)
    return SeriesState(
        name="admissions",
        strategy="Optimized",
        horizon=120,
        periods=("2027-01", "2027-02", "2027-04"),
        last=3,
        columns=("north/count", "south/count"),
        measurements=rng.normal(100.0, 30.0, (7, 2)),
        published=rng.normal(100.0, 30.0, (4, 2)),
    )


def _load(text: str, digest: str) -> SeriesState:
    return load_state(text, digest, name="admissions", strategy="Optimized", horizon=120)


def test_a_state_round_trips_exactly_under_its_digest() -> None:
    state = _state()
    back = _load(state.to_json(), state.digest)
    assert back.periods == state.periods and back.columns == state.columns
    assert np.array_equal(back.measurements, state.measurements)  # floats bit for bit
    assert np.array_equal(back.published, state.published)
    assert back.digest == state.digest


def test_an_edited_replaced_or_foreign_state_is_refused_in_one_line() -> None:
    state = _state()
    text = state.to_json()
    first = repr(float(state.measurements[0, 0]))
    edited = text.replace(first, repr(float(state.measurements[0, 0]) + 1.0), 1)
    assert edited != text
    with pytest.raises(InputError, match="does not match the ledger's digest"):
        _load(edited, state.digest)
    with pytest.raises(InputError, match="not a series state"):
        _load("{}", "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
    with pytest.raises(InputError, match="under Optimized over 120 periods, not SquareRoot"):
        load_state(text, state.digest, name="admissions", strategy="SquareRoot", horizon=120)
