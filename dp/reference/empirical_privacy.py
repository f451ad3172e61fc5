"""Empirical privacy: a confidence lower bound on a mechanism's privacy loss, from samples.

This is black-box privacy auditing in the literature's sense, used by the tests to refute a
mechanism's claimed epsilon; it has nothing to do with ``dppub audit`` (the budget ledger check).

A mechanism ``M`` is ``(epsilon, delta)``-DP when, for every pair of neighbouring inputs ``D``,
``D'`` (add or remove one record, the dppub-wide convention) and every event ``E``,
``P[M(D) in E] <= e^epsilon P[M(D') in E] + delta``. Given samples of ``M(D)`` and ``M(D')``, an
auditor picks an event and bounds both probabilities with exact binomial confidence intervals
(Clopper & Pearson 1934); then

    eps_lb = ln((p_lower(D) - delta) / p_upper(D'))

is a lower confidence bound on the mechanism's true privacy loss, and ``eps_lb > epsilon``
refutes the claim (Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021; the
hypothesis-testing view of Ding et al., CCS 2018, "StatDP"). Both directions (``D`` over ``D'``
and ``D'`` over ``D``) are tested.

Event selection. The event is a threshold set ``{s(y) > t}`` on a one-dimensional statistic of
the output. A first, *selection* batch from each input chooses the statistic and the threshold
that maximise the bound; an independent second, *test* batch then evaluates only that event.
Because the event is fixed before the test batch is drawn, the Clopper-Pearson intervals are
exact for it and the choice does not bias the bound. Candidate statistics (both learnt from the
selection batch only):

* ``linear``: the projection ``y . w`` onto the difference of the batch means ``w``;
* ``corner`` (vector outputs): ``min_j sign(w_j) (y_j - m_j) / s_j`` over the coordinates whose
  mean difference is significant (more than four standard errors), with ``m`` the coordinatewise
  median of the numerator's batch and ``s`` the pooled standard deviation. For product Laplace
  noise this is the event on which the privacy loss attains ``||mu - mu'||_1 / b``, where the
  linear projection loses a polynomial factor.

Guarantee. If ``M`` satisfies its claim then every event obeys the inequality above, so a
rejection needs one of the two one-sided bounds of the tested direction to miss; with two-sided
intervals at ``confidence`` this happens with probability at most ``1 - confidence`` per
direction, ``2 (1 - confidence)`` per audit.

Sampling is vectorised: a *batch sampler* ``sampler(dataset, n, rng)`` returns ``n`` independent
outputs at once (shape ``(n,)`` or ``(n, d)``), e.g. by passing an ``(n, d)`` array of identical
statistics to :func:`dp.mechanisms.laplace` with a seeded generator (the reproducible path, which
uses the same discrete construction as the release path). :func:`looped` adapts a per-call
mechanism ``M(dataset, rng)`` for mechanisms that cannot be batched.

>>> import numpy as np
>>> from dppub.dp.mechanisms import laplace
>>> def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
...     return laplace(np.full(n, x), sensitivity=1.0, epsilon=1.0, rng=rng)
>>> res = audit(sampler, dataset=0.0, neighbour=1.0, epsilon=1.0, rng=np.random.default_rng(0))
>>> res.passed, 0.8 < res.eps_lb <= 1.0
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt
from scipy.stats import beta

from dppub.dp.errors import ConfigError, InputError
from dppub.dp.validation import check_delta, check_epsilon

__all__ = [
    "AuditResult",
    "BatchSampler",
    "DirectionalBound",
    "Event",
    "audit",
    "clopper_pearson",
    "looped",
    "loss_lower_bound",
]

T = TypeVar("T")
FloatArray = npt.NDArray[np.float64]
BatchSampler = Callable[[T, int, np.random.Generator], npt.ArrayLike]
"""``sampler(dataset, n, rng)``: ``n`` independent outputs of the mechanism on ``dataset``."""

# Thresholds tried on the selection batch: quantiles of the numerator's statistic whose upper
# tail holds between _MIN_HITS samples and all of them. 256 candidates resolve the optimum well.
_CANDIDATES = 256
_MIN_HITS = 20
# A coordinate enters the corner statistic if its selection-batch mean difference exceeds this
# many standard errors (a pure-noise coordinate does so with probability ~6e-5).
_SIGNIFICANT_SE = 4.0


def clopper_pearson(
    hits: npt.ArrayLike, n: int, *, confidence: float
) -> tuple[FloatArray, FloatArray]:
    """Exact two-sided binomial confidence interval (Clopper & Pearson, Biometrika 1934).

    Each one-sided bound misses with probability at most ``(1 - confidence) / 2``.

    >>> lo, hi = clopper_pearson([0, 5, 10], 10, confidence=0.95)
    >>> [round(float(v), 4) for v in lo], [round(float(v), 4) for v in hi]
    ([0.0, 0.1871, 0.6915], [0.3085, 0.8129, 1.0])
    """
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    k = np.asarray(hits, dtype=np.float64)
    if n < 1 or np.any(k < 0) or np.any(k > n):
        raise ConfigError(f"hits must lie in [0, n] with n >= 1, got n={n!r}")
    tail = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(tail, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1.0 - tail, k + 1, n - k), 1.0)
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)


def loss_lower_bound(p_lower: npt.ArrayLike, p_upper: npt.ArrayLike, *, delta: float) -> FloatArray:
    """``ln((p_lower - delta) / p_upper)``, ``-inf`` where ``p_lower <= delta``.

    >>> round(float(loss_lower_bound(0.5, 0.25, delta=0.0)), 6)  # ln 2
    0.693147
    """
    num = np.asarray(p_lower, dtype=np.float64) - delta
    den = np.asarray(p_upper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(num > 0, np.log(np.maximum(num, 1e-300) / den), -np.inf)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """A threshold set ``{y : s(y) > threshold}`` on a one-dimensional statistic ``s``."""

    statistic: Literal["linear", "corner"]
    """``"linear"``: ``s(y) = y . weights``; ``"corner"``: ``min_j weights_j (y_j - centre_j)``
    over the coordinates in ``support``."""
    weights: tuple[float, ...]
    """Projection direction (linear) or signed inverse spreads (corner), one per coordinate."""
    centre: tuple[float, ...]
    """Offsets subtracted before the corner minimum (zeros for linear)."""
    support: tuple[int, ...]
    """Coordinates the statistic reads."""
    threshold: float
    """The event is ``s(y) > threshold``."""

    def score(self, outputs: FloatArray) -> FloatArray:
        """The statistic ``s`` of each row of ``outputs`` (shape ``(n, d)``)."""
        idx = list(self.support)
        w = np.asarray(self.weights)[idx]
        y = outputs[:, idx]
        if self.statistic == "linear":
            return np.asarray(y @ w, dtype=np.float64)
        c = np.asarray(self.centre)[idx]
        return np.asarray(np.min((y - c) * w, axis=1), dtype=np.float64)

    def contains(self, outputs: FloatArray) -> npt.NDArray[np.bool_]:
        """Membership of each row of ``outputs`` in the event."""
        return self.score(outputs) > self.threshold

    def describe(self) -> str:
        """One line naming the statistic, its coordinates and the threshold."""
        coords = ",".join(str(j) for j in self.support[:8]) + (
            "..." if len(self.support) > 8 else ""
        )
        return f"{self.statistic}[{coords}] > {self.threshold:.6g}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectionalBound:
    """The test-batch bound for one direction: ``ln((P[M(A) in E] - delta) / P[M(B) in E])``."""

    direction: Literal["D over D'", "D' over D"]
    """Which input is ``A`` (numerator) and which is ``B``."""
    event: Event
    """The event chosen on the selection batch."""
    p_hat: float
    """Empirical ``P[M(A) in E]`` on the test batch."""
    p_hat_neighbour: float
    """Empirical ``P[M(B) in E]`` on the test batch."""
    interval: tuple[float, float]
    """Clopper-Pearson interval for ``P[M(A) in E]``."""
    interval_neighbour: tuple[float, float]
    """Clopper-Pearson interval for ``P[M(B) in E]``."""
    eps_lb: float
    """``ln((interval[0] - delta) / interval_neighbour[1])`` (``-inf`` if not positive)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult:
    """Outcome of :func:`audit`; ``passed`` is ``False`` iff the claim was refuted."""

    eps_lb: float
    """Lower confidence bound on the privacy loss: the larger of the two directions."""
    forward: DirectionalBound
    """``D`` over ``D'``."""
    backward: DirectionalBound
    """``D'`` over ``D``."""
    epsilon: float
    """Claimed epsilon."""
    delta: float
    """Claimed delta."""
    confidence: float
    """Confidence of each Clopper-Pearson interval."""
    selection_samples: int
    """Samples per input in the selection batch."""
    samples: int
    """Samples per input in the test batch."""
    passed: bool
    """``eps_lb <= epsilon``."""

    @property
    def worst(self) -> DirectionalBound:
        """The direction that attains :attr:`eps_lb`."""
        return self.forward if self.forward.eps_lb >= self.backward.eps_lb else self.backward

    @property
    def total_samples(self) -> int:
        """Mechanism invocations over both batches and both inputs."""
        return 2 * (self.selection_samples + self.samples)

    def summary(self) -> str:
        """One line for logs and test messages."""
        w = self.worst
        verdict = "pass" if self.passed else "REJECT"
        return (
            f"{verdict}: eps_lb={self.eps_lb:.4f} vs claimed eps={self.epsilon:g} "
            f"(delta={self.delta:g}) [{w.direction}] event {w.event.describe()}, "
            f"p={w.p_hat:.5f} in [{w.interval[0]:.5f}, {w.interval[1]:.5f}], "
            f"p'={w.p_hat_neighbour:.5f} in [{w.interval_neighbour[0]:.5f}, "
            f"{w.interval_neighbour[1]:.5f}], n={self.samples}"
        )


def looped(mechanism: Callable[[T, np.random.Generator], npt.ArrayLike]) -> BatchSampler[T]:
    """Batch sampler calling a per-call mechanism ``M(dataset, rng)`` ``n`` times (slow path)."""

    def sampler(dataset: T, n: int, rng: np.random.Generator) -> FloatArray:
        return np.stack([np.asarray(mechanism(dataset, rng), dtype=np.float64) for _ in range(n)])

    return sampler


def _draw(sampler: BatchSampler[T], dataset: T, n: int, rng: np.random.Generator) -> FloatArray:
    out = np.asarray(sampler(dataset, n, rng))
    if out.dtype == np.bool_:
        out = out.astype(np.float64)
    out = np.asarray(out, dtype=np.float64)
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or out.shape[0] != n:
        raise InputError(f"sampler must return shape (n,) or (n, d) with n={n}, got {out.shape}")
    if not np.all(np.isfinite(out)):
        raise InputError("sampler returned NaN or inf")
    return out


def _candidates(num: FloatArray, den: FloatArray) -> list[Event]:
    """Statistics learnt from the selection batch (threshold still unset)."""
    n_num, n_den = num.shape[0], den.shape[0]
    diff = num.mean(axis=0) - den.mean(axis=0)
    se = np.sqrt(num.var(axis=0) / n_num + den.var(axis=0) / n_den)
    d = num.shape[1]
    zeros = (0.0,) * d
    if not np.any(diff != 0.0):
        diff = np.ones(d)
    events = [
        Event(
            statistic="linear",
            weights=tuple(float(v) for v in diff),
            centre=zeros,
            support=tuple(range(d)),
            threshold=0.0,
        )
    ]
    support = np.flatnonzero(np.abs(diff) > _SIGNIFICANT_SE * se)
    if d > 1 and support.size > 0:
        spread = np.sqrt((num.var(axis=0) + den.var(axis=0)) / 2.0)
        spread = np.where(spread > 0, spread, 1.0)
        events.append(
            Event(
                statistic="corner",
                weights=tuple(float(v) for v in np.sign(diff) / spread),
                centre=tuple(float(v) for v in np.median(num, axis=0)),
                support=tuple(int(j) for j in support),
                threshold=0.0,
            )
        )
    return events


def _best_threshold(
    event: Event, num: FloatArray, den: FloatArray, *, delta: float, confidence: float
) -> tuple[Event, float]:
    """Threshold maximising the selection-batch bound for ``event``'s statistic."""
    s_num = np.sort(event.score(num))
    s_den = np.sort(event.score(den))
    n = s_num.size
    # Upper tails holding from _MIN_HITS samples to (almost) all of the numerator's batch.
    tail = np.unique(np.geomspace(min(_MIN_HITS, n), n, _CANDIDATES).astype(np.int64))
    picked = s_num[np.clip(n - tail, 0, n - 1)]
    # Both {s > v} and {s >= v} for each picked value v: discrete outputs (ties) need the latter.
    thresholds = np.unique(np.concatenate([picked, np.nextafter(picked, -np.inf)]))
    hits_num = n - np.searchsorted(s_num, thresholds, side="right")
    hits_den = s_den.size - np.searchsorted(s_den, thresholds, side="right")
    lo, _ = clopper_pearson(hits_num, n, confidence=confidence)
    _, hi = clopper_pearson(hits_den, s_den.size, confidence=confidence)
    bounds = loss_lower_bound(lo, hi, delta=delta)
    i = int(np.argmax(bounds))
    return _with_threshold(event, float(thresholds[i])), float(bounds[i])


def _with_threshold(event: Event, threshold: float) -> Event:
    return Event(
        statistic=event.statistic,
        weights=event.weights,
        centre=event.centre,
        support=event.support,
        threshold=threshold,
    )


def _select(num: FloatArray, den: FloatArray, *, delta: float, confidence: float) -> Event:
    scored = [
        _best_threshold(ev, num, den, delta=delta, confidence=confidence)
        for ev in _candidates(num, den)
    ]
    return max(scored, key=lambda pair: pair[1])[0]


def _test(
    event: Event,
    num: FloatArray,
    den: FloatArray,
    *,
    direction: Literal["D over D'", "D' over D"],
    delta: float,
    confidence: float,
) -> DirectionalBound:
    k_num = int(event.contains(num).sum())
    k_den = int(event.contains(den).sum())
    lo, hi = clopper_pearson([k_num], num.shape[0], confidence=confidence)
    lo_d, hi_d = clopper_pearson([k_den], den.shape[0], confidence=confidence)
    eps_lb = float(loss_lower_bound(lo[0], hi_d[0], delta=delta))
    return DirectionalBound(
        direction=direction,
        event=event,
        p_hat=k_num / num.shape[0],
        p_hat_neighbour=k_den / den.shape[0],
        interval=(float(lo[0]), float(hi[0])),
        interval_neighbour=(float(lo_d[0]), float(hi_d[0])),
        eps_lb=eps_lb,
    )


def audit(
    sampler: BatchSampler[T],
    *,
    dataset: T,
    neighbour: T,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 100_000,
    selection_samples: int | None = None,
    confidence: float = 1.0 - 1e-6,
    rng: np.random.Generator,
) -> AuditResult:
    """Audit the claim that ``sampler`` is ``(epsilon, delta)``-DP on one neighbouring pair.

    Args:
        sampler: batch sampler ``(dataset, n, rng) -> (n,) or (n, d)`` outputs.
        dataset: input ``D``.
        neighbour: input ``D'`` (``D`` with one record added or removed).
        epsilon: claimed epsilon.
        delta: claimed delta (0 for pure DP).
        samples: test-batch samples per input.
        selection_samples: selection-batch samples per input (default: ``samples``).
        confidence: confidence of each Clopper-Pearson interval; a mechanism that meets its
            claim is rejected with probability at most ``2 (1 - confidence)``.
        rng: seeded generator driving the sampler (reproducible audits).

    Returns:
        The :class:`AuditResult`; ``passed`` is ``False`` iff ``eps_lb > epsilon``.
    """
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    n_sel = samples if selection_samples is None else selection_samples
    for name, value in (("samples", samples), ("selection_samples", n_sel)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 2 * _MIN_HITS:
            raise ConfigError(f"{name} must be an integer >= {2 * _MIN_HITS}, got {value!r}")
    # Selection batch: used only to fix the events of both directions.
    sel_d, sel_n = _draw(sampler, dataset, n_sel, rng), _draw(sampler, neighbour, n_sel, rng)
    if sel_d.shape[1] != sel_n.shape[1]:
        raise InputError(f"outputs on D and D' differ in shape: {sel_d.shape} vs {sel_n.shape}")
    fwd_event = _select(sel_d, sel_n, delta=dl, confidence=confidence)
    bwd_event = _select(sel_n, sel_d, delta=dl, confidence=confidence)
    # Test batch: independent draws, so the intervals are exact for the fixed events.
    test_d, test_n = _draw(sampler, dataset, samples, rng), _draw(sampler, neighbour, samples, rng)
    if test_d.shape[1] != sel_d.shape[1] or test_n.shape[1] != sel_d.shape[1]:
        raise InputError("sampler output dimension changed between batches")
    fwd = _test(fwd_event, test_d, test_n, direction="D over D'", delta=dl, confidence=confidence)
    bwd = _test(bwd_event, test_n, test_d, direction="D' over D", delta=dl, confidence=confidence)
    eps_lb = max(fwd.eps_lb, bwd.eps_lb)
    return AuditResult(
        eps_lb=eps_lb,
        forward=fwd,
        backward=bwd,
        epsilon=eps,
        delta=dl,
        confidence=confidence,
        selection_samples=n_sel,
        samples=samples,
        passed=eps_lb <= eps,
    )
