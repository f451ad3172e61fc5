"""DP k-means on rows in memory, and the nearest centre of a row: what the tests compare the
live fit (:meth:`dp.kmeans.KMeans.fit_steps` over the engine's folds) against, never used by a
release. Both paths make the same release bit for bit for the same rows and seeded ``rng``."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dppub.dp import kmeans
from dppub.dp.errors import InputError
from dppub.dp.kmeans import KMeansFit, lloyd_step, nearest

__all__ = ["KMeans", "predict"]


class KMeans(kmeans.KMeans):
    """:class:`dp.kmeans.KMeans` with a fit on rows in memory."""

    def fit(self, X: object, *, rng: np.random.Generator | None = None) -> KMeansFit:
        """Run ``n_iter`` noisy Lloyd iterations on rows ``X`` ``(n, d)``.

        ``rng``: ``None`` for release-grade noise (and fresh public randomness for
        initialisation); a seeded generator for tests only.
        """
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] == 0:  # zero rows are fine: noisy counts of nothing
            raise InputError(f"X must be a 2-d array (n, d) with d >= 1, got shape {Xa.shape}")
        if not np.all(np.isfinite(Xa)):
            raise InputError("X must be finite (no NaN or inf)")
        domain = self.domain(Xa.shape[1])
        rows = domain.clip(Xa) - domain.midpoint()
        centred = domain.translated(domain.midpoint())
        return self.fit_steps(
            lambda centres: lloyd_step(rows, centred, centres), d=Xa.shape[1], rng=rng
        )


def predict(fit: KMeansFit, X: object) -> npt.NDArray[np.int64]:
    """Index of the nearest centre for each row."""
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim != 2 or Xa.shape[1] != fit.centres.shape[1]:
        raise InputError(f"X must have shape (n, {fit.centres.shape[1]}), got {Xa.shape}")
    return nearest(Xa, fit.centres)
