"""A mechanism and its twin audited alike: the same claim, the same pair of neighbouring
inputs, the same seeded draws (:func:`dppub.dp.reference.empirical_privacy.audit`). The twin is
the mechanism mis-calibrated (half the sensitivity, or twice the epsilon it claims): it must be
rejected, so a passing real mechanism is not a vacuous audit's pass.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from dppub.dp.reference.empirical_privacy import AuditResult, BatchSampler, audit

__all__ = ["audit_twins", "check_twins"]

T = TypeVar("T")


def audit_twins(
    real: BatchSampler[T],
    twin: BatchSampler[T],
    *,
    seed: int,
    dataset: T,
    neighbour: T,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 100_000,
    selection_samples: int | None = None,
) -> tuple[AuditResult, AuditResult]:
    """``real`` and ``twin`` audited for ``(epsilon, delta)`` on ``dataset`` and
    ``neighbour``, each from a generator seeded with ``seed``."""
    results = [
        audit(
            sampler,
            dataset=dataset,
            neighbour=neighbour,
            epsilon=epsilon,
            delta=delta,
            samples=samples,
            selection_samples=selection_samples,
            rng=np.random.default_rng(seed),
        )
        for sampler in (real, twin)
    ]
    return results[0], results[1]


def check_twins(real: AuditResult, twin: AuditResult, *, tight: float) -> None:
    """The real mechanism passes, nearly attaining its epsilon (at least ``tight`` of it: the
    inputs are its worst case, not a vacuous pass), and its twin is rejected."""
    assert real.passed, real.summary()
    assert real.eps_lb > tight * real.epsilon, real.summary()
    assert not twin.passed, twin.summary()
