"""Synthetic data's expected errors: per workload marginal, from AIM's measurements (before
the fit), and the bootstrap error range (:mod:`dp.synthetic.utility`) published in
``utility.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.synthetic import project_answer
from dppub.dp.synthetic.aim import Measurement
from dppub.dp.synthetic.pgm import Clique

FloatArray = npt.NDArray[np.float64]


BIAS = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|


REPLICATES = 2
"""Bootstrap replicates per end of the error range (:mod:`dp.synthetic.utility`): one refit and
one sample each; the mean over the workload marginals varies little between them."""


def marginal_label(clique: Sequence[str]) -> str:
    return " x ".join(clique)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A table's error on one workload marginal, bounded from a noisy measurement covering
    it: ``distance`` is the table's L1 distance to the measurement summed onto the marginal,
    ``noise`` the expected L1 of that measurement's noise there; the error lies about within
    ``distance -/+ noise`` (the triangle inequality, with the noise at its expected size)."""

    marginal: Clique
    source: Clique
    distance: float
    noise: float


def estimated_errors(
    measurements: Sequence[Measurement],
    domain: Mapping[str, int],
    workload: Sequence[Clique],
    table: Mapping[Clique, FloatArray],
) -> list[Estimate | None]:
    """Per workload marginal, from the public noisy measurements only (never the data): the
    :class:`Estimate` against the most precise measurement covering it (its noisy counts
    summed onto the marginal: Gaussian noise of std ``sigma sqrt(c)`` per cell, ``c`` cells
    summed), or None if no measurement covers it."""
    out: list[Estimate | None] = []
    for w in workload:
        best: Estimate | None = None
        for m in measurements:
            if not set(w) <= set(m.clique):
                continue
            noisy = project_answer({m.clique: m.noisy}, domain, w)
            noise = BIAS * m.sigma * math.sqrt(m.noisy.size / noisy.size) * noisy.size
            if best is None or noise < best.noise:
                distance = float(np.abs(table[w] - noisy).sum())
                best = Estimate(w, m.clique, distance, noise)
        out.append(best)
    return out


MARGINAL_RANGE = (
    "bootstrap range, not a calibrated 95% interval: the lower and higher of the warm-started "
    "and from-scratch refits' mean errors, widened by the replicates' spread"
)
"""What ``utility.csv``'s per-marginal ``error_low``/``error_high`` are (its ``error_range``)."""


def marginal_error_range(low: FloatArray, high: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per workload marginal, a range for the published rows' error from the bootstrap's
    replicates (rows) of the warm-started (``low``) and from-scratch (``high``) refits.

    Either refit's mean can be the larger on one marginal (the old range, warm mean to scratch
    mean, had its ends reversed on about a quarter of the marginals), and a marginal's true
    error varies about its expectation by the sampling of the rows and the noise: the range is
    the lower of the two means times the 2.5% point of every replicate's error relative to its
    marginal's mean (all marginals pooled: two replicates per refit say little alone; the
    deviations stretched by ``sqrt((n + 1) / (n - 1))`` for ``n`` replicates, the spread of a
    new error about their mean), to the higher times the 97.5% point. ``error_low <=
    error_high`` always. On simulated replicates (each marginal's error gamma-distributed with
    relative sd 0.35, the warm refit's mean 0.9x and the scratch refit's 1.1x the truth's, 2
    replicates each, 10 marginals) the range held a new error 0.95 of the time; the old range
    (warm mean to scratch mean) 0.24, reversed on 0.30 of the marginals. With mbi the release's
    own coverage is measured by ``bench/coverage.py``.

    >>> lo, hi = marginal_error_range(np.array([[0.2, 0.1]]), np.array([[0.1, 0.3]]))
    >>> bool(np.all(lo <= hi)), lo.round(3).tolist(), hi.round(3).tolist()
    (True, [0.016, 0.016], [0.369, 0.553])
    """
    both = np.vstack([low, high])
    n, mean = both.shape[0], both.mean(axis=0)
    # A deviation from the mean of n replicates has variance (n - 1) / n of one replicate's,
    # a new error's from that mean (n + 1) / n: scaled, the spread is a prediction range.
    stretch = math.sqrt((n + 1) / (n - 1)) if n > 1 else 1.0
    relative = 1.0 + stretch * (both / np.where(mean > 0, mean, 1.0) - 1.0)[:, mean > 0]
    q_lo, q_hi = (
        (float(np.quantile(relative, 0.025)), float(np.quantile(relative, 0.975)))
        if relative.size
        else (1.0, 1.0)
    )
    warm, scratch = low.mean(axis=0), high.mean(axis=0)
    return (
        np.minimum(warm, scratch) * min(q_lo, 1.0),
        np.maximum(warm, scratch) * max(q_hi, 1.0),
    )


def utility_frame(
    workload: Sequence[Clique],
    domain: Mapping[str, int],
    low: FloatArray,
    high: FloatArray,
    estimates: Sequence[Estimate | None],
    total: float,
) -> pd.DataFrame:
    """``utility.parquet``: per workload marginal, the bootstrap's range ``error_low`` to
    ``error_high`` (:func:`marginal_error_range`), ``error`` the two refits' mean (the
    release's ``error`` is its mean over the marginals), ``error_range`` what
    the range is (:data:`MARGINAL_RANGE`), and where a measurement covers it the check
    ``[max(distance - noise, 0), distance + noise] / total`` (NaN where nothing covers it)."""
    scale = max(total, 1.0)
    nan = float("nan")
    lo, hi = marginal_error_range(low, high)
    return pd.DataFrame(
        {
            "marginal": [marginal_label(w) for w in workload],
            "cells": [math.prod(domain[c] for c in w) for w in workload],
            "error": (low.mean(axis=0) + high.mean(axis=0)) / 2.0,
            "error_low": lo,
            "error_high": hi,
            "error_range": MARGINAL_RANGE,
            "check_low": [
                nan if e is None else max(e.distance - e.noise, 0.0) / scale for e in estimates
            ],
            "check_high": [nan if e is None else (e.distance + e.noise) / scale for e in estimates],
            "covered_by": [
                "not measured" if e is None else marginal_label(e.source) for e in estimates
            ],
        }
    )
