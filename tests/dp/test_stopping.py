"""The run's stop request reaches the long loops: a vector's noise drawn chunk by chunk, large
files written part by part, a large table's rows formatted (:mod:`dp.stopping`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dppub.dp import mechanisms, stopping
from dppub.dp.errors import Stopped
from dppub.dp.publication import CSV_ROWS, PARQUET_ROWS, Staging
from dppub.dp.tables.precision import as_text


@pytest.fixture(autouse=True)
def _cleared() -> Iterator[None]:
    stopping.clear_stop()
    yield
    stopping.clear_stop()


def _stopping_after(
    calls: int, sampler: Callable[..., Any]
) -> tuple[list[int], Callable[..., Any]]:
    """``sampler`` that requests the stop on its ``calls``-th call; the list counts calls."""
    seen: list[int] = []

    def wrapped(*args: Any) -> Any:
        seen.append(1)
        if len(seen) == calls:
            stopping.request_stop()
        return sampler(*args)

    return seen, wrapped


@pytest.mark.parametrize("which", ["laplace", "gaussian"])
def test_a_stop_lands_between_two_chunks_of_noise(
    which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # old code: one OpenDP call over the whole vector (59 s for 10^6 cells on a loaded
    # machine), the stop never looked at: every coordinate drawn, then returned
    x = np.zeros(5 * mechanisms.CHUNK)
    mechanisms.laplace(x, sensitivity=1.0, epsilon=1.0)  # calibrated (cached): only draws below
    if which == "laplace":
        seen, sampler = _stopping_after(2, mechanisms._opendp_laplace)
        monkeypatch.setattr(mechanisms, "_opendp_laplace", sampler)

        def draw() -> object:
            return mechanisms.laplace(x, sensitivity=1.0, epsilon=1.0)
    else:
        seen, sampler = _stopping_after(2, mechanisms._opendp_gaussian)
        monkeypatch.setattr(mechanisms, "_opendp_gaussian", sampler)

        def draw() -> object:
            return mechanisms.gaussian(x, l2_sensitivity=1.0, rho=0.5)

    with pytest.raises(Stopped, match="drawing noise stopped: the run was interrupted"):
        draw()
    assert len(seen) == 2  # the chunk under way when the stop came, no later one


def test_chunked_noise_keeps_the_shape_scale_and_independence() -> None:
    # Every coordinate, in whichever chunk, has Laplace noise of scale b: E|noise| = b, sd b
    # (6 standard errors per chunk: false-failure rate ~2e-9 each); chunks are not copies.
    n, b = 3 * mechanisms.CHUNK + 7, 4.0
    noise = mechanisms.laplace(np.zeros((n, 2)), sensitivity=2.0, epsilon=0.5)
    assert noise.shape == (n, 2)
    flat = noise.ravel()
    for start in range(0, flat.size, mechanisms.CHUNK):
        part = np.abs(flat[start : start + mechanisms.CHUNK])
        assert abs(part.mean() - b) < 6 * b / math.sqrt(part.size)
    c = mechanisms.CHUNK
    assert not np.array_equal(flat[:c], flat[c : 2 * c])
    assert abs(np.corrcoef(flat[:c], flat[c : 2 * c])[0, 1]) < 6 / math.sqrt(c)


def test_checked_looks_at_the_stop_every_so_often() -> None:
    out: list[int] = []

    def count() -> None:
        for i in stopping.checked(range(10_000), "counting", every=100):
            out.append(i)
            if i == 250:
                stopping.request_stop()

    with pytest.raises(Stopped, match="counting stopped"):
        count()
    assert out == list(range(300))  # stopped at the next look, item 300


@pytest.mark.slow  # ~2 s: 200,000 rows written twice
def test_a_stop_lands_between_two_parts_of_a_large_file(tmp_path: Path) -> None:
    # old code: one to_csv / to_parquet call (71 s for a million rows of answers.csv)
    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    n = 3 * max(CSV_ROWS, PARQUET_ROWS) + 5
    frame = pd.DataFrame({"key": [f"k{i}" for i in range(n)], "answer": np.arange(n) / 3})
    st.write_table("t", "answers", frame)  # the same file as one call wrote
    pd.testing.assert_frame_equal(pd.read_parquet(st.release_dir("t") / "answers.parquet"), frame)
    one = tmp_path / "one.csv"
    frame.to_csv(one, index=False, float_format="%.17g", lineterminator="\r\n")
    assert (st.release_dir("t") / "answers.csv").read_bytes() == one.read_bytes()
    st.write_csv("t", "empty.csv", frame.iloc[:0])  # no rows: the header alone
    assert (st.release_dir("t") / "empty.csv").read_text() == "key,answer\n"
    stopping.request_stop()
    with pytest.raises(Stopped, match=r"writing again\.csv stopped"):
        st.write_csv("t", "again.csv", frame)
    with pytest.raises(Stopped, match=r"writing again\.parquet stopped"):
        st.write_frame("t", "again.parquet", frame)


def test_formatting_a_large_table_stops() -> None:
    values = np.arange(10 * stopping.EVERY, dtype=np.float64)
    assert len(as_text(values, np.zeros_like(values))) == values.size
    stopping.request_stop()
    with pytest.raises(Stopped, match="stopped: the run was interrupted"):
        as_text(values, np.zeros_like(values))
