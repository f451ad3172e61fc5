"""The synthetic table's workload error, estimated from public values only (post-processing).

A parametric bootstrap. A stand-in for the data -- the published rows (``surrogate``), or the
fitted model itself -- takes the data's place: each of AIM's measurements is redrawn around the
stand-in's marginal with the noise it was taken with (``sigma``, public), the model is fitted
afresh to the redrawn measurements (the same cliques, so mbi reuses its compiled program), and
as many rows as were published are sampled from it. The sampled rows' normalized L1 error
against the stand-in, per workload marginal, estimates the published table's against the data:
the noise's error carried through the model, the fit's own error, and the sampling error of
the rows.

Two choices matter (``bench/synthetic_utility.py``, ``bench/RESULTS.md``). The published rows
are the better stand-in: like the data they are rough (integer counts, empty cells) where the
model is smooth (the model as stand-in understated the true error 1.3-1.8x). And how the refit
starts: warm-started at the model (``warm=True``) it starts at the answer and understated the
true error (1.07-1.8x); from scratch (``warm=False``, ``iters`` iterations, where the release's
fit had many warm-started rounds) it overstated it (0.77-0.86x). The release states the two as
a range and their middle as the estimate. Structure of the data that the measured cliques
cannot express is in the true error, not in the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import Stopped
from dppub.dp.synthetic import pgm
from dppub.dp.synthetic.aim import Measurement
from dppub.dp.synthetic.pgm import Clique

__all__ = ["bootstrap_errors", "table_marginal"]

FloatArray = npt.NDArray[np.float64]


def table_marginal(
    codes: Mapping[str, npt.NDArray[np.int64]], domain: Mapping[str, int], clique: Clique
) -> FloatArray:
    """The counts of ``clique`` in a table of codes (flattened, C order)."""
    shape = tuple(domain[c] for c in clique)
    flat = np.ravel_multi_index([np.asarray(codes[c], dtype=np.int64) for c in clique], shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(np.float64)


def bootstrap_errors(
    model: Any,
    measurements: Sequence[Measurement],
    domain: Mapping[str, int],
    workload: Sequence[Clique],
    rows: int,
    *,
    iters: int,
    replicates: int = 1,
    seed: int = 0,
    surrogate: Mapping[str, npt.NDArray[np.int64]] | None = None,
    warm: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> FloatArray:
    """Per replicate (rows) and workload marginal (columns): the normalized L1 error (in
    [0, 2]) against the stand-in (``surrogate``'s codes, the published rows; ``None``: the
    model) of ``rows`` rows sampled from a model fitted to measurements redrawn around it
    (warm-started at ``model`` if ``warm``, else from scratch). Only public values enter: the
    model, the published rows, the cliques and their noise scales (the numpy noise here is
    not privacy noise: nothing private is in it). ``should_stop`` is asked before each
    replicate's refit (``True``: :class:`~dp.errors.Stopped`)."""
    rng = np.random.default_rng(seed)

    def stand_in(clique: Clique) -> FloatArray:
        if surrogate is None:
            return pgm.model_marginal(model, clique)
        return table_marginal(surrogate, domain, clique)

    truth = [stand_in(w) for w in workload]
    truth = [t / max(t.sum(), 1e-12) for t in truth]
    out = np.empty((replicates, len(workload)))
    for b in range(replicates):
        if should_stop is not None and should_stop():
            raise Stopped("the error bootstrap stopped: the run was interrupted")
        redrawn = [
            (
                m.clique,
                stand_in(m.clique) + rng.normal(0.0, m.sigma, m.noisy.size),
                m.sigma,
            )
            for m in measurements
        ]
        refit = pgm.fit(domain, redrawn, iters=iters, warm_start=model if warm else None)
        sampled = pgm.sample(refit, rows, int(rng.integers(2**32)))
        for j, w in enumerate(workload):
            counts = table_marginal(sampled, domain, w)
            out[b, j] = float(np.abs(counts / max(counts.sum(), 1.0) - truth[j]).sum())
    return out
