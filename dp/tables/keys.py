"""Private keys: which groups of a table may appear, chosen with (epsilon, delta).

A ``keys: private`` table publishes only groups present in the data, and only some of them: a
group seen in few units could reveal that one unit is there. Each rule below looks at one exact
aggregate per key -- the number of privacy units with a row in it (:attr:`KeyWeights.units`) and
the sum of the units' quantised weights (:attr:`KeyWeights.weights`) -- and releases a key with
a probability that two neighbouring tables (one unit apart) cannot tell apart beyond
(epsilon, delta). A key absent from the data is never a candidate, so it never appears.

Rules (data-independent: chosen from epsilon, delta and ``max_partitions`` only):

* ``threshold`` -- the optimal partition selection of Desfontaines, Voss, Gipson & Mandayam
  (PoPETs 2022, Thm. 1): a key with ``n`` units is released with probability ``pi(n)``,
  ``pi(0) = 0``, ``pi(n) = min(e^eps pi(n-1) + delta, 1 - e^-eps (1 - pi(n-1) - delta), 1)``.
  These are exactly the largest probabilities that keep every pair ``(n, n+1)`` within
  (eps, delta) in both directions; no rule on the count releases a key more often. When one unit
  touches one key (row-level, or ``max_partitions = 1``) this is the whole release. Under a unit
  touching up to ``m`` keys it runs at ``(eps/m, delta/m)`` per key (basic composition over the
  unit's keys) -- what PipelineDP does.
* ``gaussian`` -- weighted Gaussian selection (Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin,
  ICML 2020, "Differentially private set union"): a unit with ``k`` kept keys gives each of them
  the weight ``q(k) = floor(G / sqrt(k)) / G`` (grid ``G = 2^20``: sums are exact integers in
  grid units, bit-identical across engines; rounding *down* keeps ``sum q(k)^2 <= 1``, so a unit's
  weight vector has L2 norm at most 1 and the rounding needs no extra sensitivity). A key is
  released when its weight plus ``N(0, sigma^2)`` exceeds ``rho``. Delta derivation: keys present
  in both neighbours see a Gaussian mechanism of L2 sensitivity 1, ``(eps, delta_1)`` with the
  analytic sigma (Balle & Wang 2018); keys present only where the unit is (at most ``t <= m``
  keys, each of weight ``q(k) <= q(t)``) are released with probability at most
  ``1 - Phi((rho - q(t)) / sigma)^t``, so ``rho = max_t q(t) + sigma Phi^-1((1 - delta_2)^(1/t))``
  bounds it by ``delta_2``; delta = delta_1 + delta_2. The split of delta is the one (on a fixed
  grid) with the smallest ``rho``.

* ``policy`` -- adaptive weights, the policy Gaussian of the same paper (its L2-descent): units
  in turn fill their keys up to a cutoff ``Gamma = rho + 3 sigma``, so a unit spends nothing on
  a key already certain to show (:mod:`dp.tables.policy_keys`, with the proof that a neighbour
  still moves the weight vector by at most 1 in L2, up to a stated floating-point slack). The
  threshold and the delta split are the ``gaussian`` rule's, with a new key's weight bounded by
  ``1/sqrt(t)`` as there.

``selection: auto`` (the default): with ``m > 1`` the one of ``threshold`` and ``gaussian``
needing fewer units (each in ``m`` keys) to release a key with probability 1/2; with ``m = 1``
always ``threshold`` (it is optimal there). ``policy`` is not the default: it released 16% more
keys than ``gaussian`` on ``bench/tables.py``'s ``visits`` file but about 9% fewer on
``bench/keys.py``'s clinic tables, where it moves weight to keys far below the threshold
(``bench/RESULTS.md``). A config may name any rule.

Budget: a private-keys table spends ``(eps_select, delta)`` on the keys and the rest of epsilon
on its measures, ``eps_select = eps / (1 + number of measures)`` -- the same share as one measure
(PipelineDP's default accountant splits the same way), so the selection and each measure are
equally loud; all of delta goes to the selection (the measures are pure-DP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from itertools import pairwise
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import opendp.prelude as odp
from scipy.special import ndtr, ndtri

from dppub.dp.calibration import gaussian_delta, gaussian_sigma
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.mechanisms import gaussian
from dppub.dp.tables.policy_keys import policy_sensitivity, policy_weights
from dppub.dp.validation import check_delta, check_epsilon

__all__ = [
    "GRID",
    "KeyRule",
    "KeyWeights",
    "Selection",
    "key_rule",
    "new_key_delta",
    "rule_weights",
    "select_keys",
    "selection_budget",
    "threshold_delta",
    "threshold_probabilities",
    "unit_weight",
]

odp.enable_features("contrib")

GRID = 1 << 20
"""Weights are integers in units of ``1/GRID`` (exact sums, bit-identical merges)."""
_SLACK = 1e-6
"""Fraction of delta left unspent by the threshold rule: covers the sampler's float rounding."""
_SPLITS = tuple(i / 20 for i in range(1, 20))
"""The fractions of delta tried for the Gaussian rule's delta_1 (data-independent)."""
_CUTOFF_SIGMAS = 3.0
"""``policy``: the cutoff ``Gamma = rho + 3 sigma``, where a key is released 99.9% of the time
(chosen on bench/tables.py's ``visits`` file, not on the benchmark's own table)."""

Selection = Literal["auto", "threshold", "gaussian", "policy"]
"""A rule by name (the tables kind's ``selection:``), or ``auto``."""

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def unit_weight(k: int) -> int:
    """``floor(GRID / sqrt(k))``, exactly (integer square root), for a unit in ``k`` keys.

    >>> unit_weight(1), unit_weight(4), unit_weight(2) ** 2 * 2 <= GRID**2
    (1048576, 524288, True)
    """
    if k < 1:
        raise InvariantError(f"a unit has at least one key, got {k!r}")
    # floor(sqrt(x)) == isqrt(floor(x)) for real x >= 0, so this is floor(G / sqrt(k)) exactly.
    return math.isqrt(GRID * GRID // k)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyWeights:
    """The exact per-key aggregate a selection reads (never published)."""

    labels: tuple[str, ...]
    """Each key present in the data, sorted."""
    units: IntArray
    """Per key: the number of distinct units (rows when row-level) with a row in it."""
    weights: IntArray
    """Per key: the sum of its units' weights :func:`unit_weight`, in ``1/GRID`` units."""
    single: IntArray | None = None
    """Per key: the units with rows in it alone (``None``: all of :attr:`units`, row-level)."""
    spread_keys: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The key indices of each unit in more than one key, unit after unit (``policy``)."""
    spread_offsets: IntArray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    """Where each of those units starts in :attr:`spread_keys`, and the end. The units come by
    number of keys, then by id: any two units' order depends on those two alone, which the
    ``policy`` rule's proof needs (:mod:`dp.tables.policy_keys`)."""


_MAX_EXP_EPSILON = 700.0
"""The largest epsilon whose ``e^eps`` the threshold rule computes (a smaller e^eps is a
stronger requirement: the probabilities stay (epsilon, delta)-DP)."""


def threshold_probabilities(epsilon: float, delta: float) -> tuple[float, ...]:
    """``pi(0..N)`` of the optimal rule (Desfontaines et al. 2022, Thm. 1), up to ``pi(N) = 1``.

    Built with ``delta (1 - 1e-6)`` so the sampler's float rounding stays inside ``delta``
    (:func:`threshold_delta` checks the probabilities actually drawn).

    >>> p = threshold_probabilities(1.0, 1e-6); p[0], len(p) - 1
    (0.0, 28)
    """
    eps, dl = check_epsilon(epsilon), check_delta(delta)
    if dl <= 0.0:
        raise ConfigError(f"private keys need delta > 0, got {delta!r}")
    d = dl * (1.0 - _SLACK)
    # A rule built for a smaller epsilon is DP at the larger one too; e^eps overflows a float
    # above 709 (the config allows 1000), and from 700 on the rule is (0, delta', 1) anyway.
    eps = min(eps, _MAX_EXP_EPSILON)
    up, down = math.exp(eps), math.exp(-eps)
    e = Fraction(up) * (1 - Fraction(1, 1 << 50))  # as threshold_delta checks it
    probs = [0.0]
    while probs[-1] < 1.0:
        q = probs[-1]
        p = min(up * q + d, 1.0 - down * (1.0 - q - d), 1.0)
        # The probabilities the sampler draws (_drawn) differ from the floats by up to a step
        # of 1.0 (1.1e-16), which e^eps magnifies beyond delta's slack at a large epsilon (at
        # 20, by 1.3%; at 40 / 3, by 0.004%; old code then refused the rule: an internal
        # error). Cap p exactly: both conditions on the drawn pair bound p from above.
        a = _drawn(q)
        cap = min(e * a + Fraction(dl), 1 - ((1 - a) - Fraction(dl)) / e)
        if _drawn(p) > cap:
            p = max(q, min(p, float(cap)))
            while p > q and _drawn(p) > cap:
                # one step down of what is drawn: below 1/2 that is 1 - fl(1 - p), whose
                # steps are 1.0's, not p's
                p = math.nextafter(p, 0.0) if p >= 0.5 else 1.0 - math.nextafter(1.0 - p, 2.0)
            p = max(p, q)
        probs.append(p)
    return tuple(probs)


def _drawn(p: float) -> Fraction:
    """The probability :func:`_bernoulli` really releases with, as an exact rational."""
    if p <= 0.0 or p >= 1.0:
        return Fraction(1 if p >= 1.0 else 0)
    if p >= 0.5:
        return Fraction(p)
    return 1 - Fraction(1.0 - p)


def threshold_delta(probabilities: tuple[float, ...], epsilon: float) -> float:
    """The smallest delta for which the drawn probabilities are (epsilon, delta)-DP, exactly.

    Checks both directions of every neighbouring pair of counts in rational arithmetic, with
    ``e^eps`` rounded down (so the delta returned is never too small).
    """
    e = Fraction(math.exp(min(epsilon, _MAX_EXP_EPSILON))) * (1 - Fraction(1, 1 << 50))
    p = [_drawn(x) for x in probabilities] + [Fraction(1)]
    worst = Fraction(0)
    for a, b in pairwise(p):
        if b < a:
            raise InvariantError("threshold probabilities must not decrease")
        worst = max(worst, b - e * a, (1 - a) - e * (1 - b))
    return float(worst) if worst == 0 else math.nextafter(float(worst), 1.0)


def new_key_delta(rule: KeyRule) -> float:
    """``max_t 1 - Phi((rho - w(t)) / sigma)^t``: the chance a removed unit's own keys show,
    ``w(t)`` the most weight each of its ``t`` keys alone can have (:func:`_new_key_weight`)."""
    worst = 0.0
    for t in range(1, rule.max_partitions + 1):
        tail = float(ndtr(-(rule.rho - _new_key_weight(rule, t)) / rule.sigma))
        worst = max(worst, -math.expm1(t * math.log1p(-tail)))
    return worst


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRule:
    """A data-independent selection rule with its proven (epsilon, delta)."""

    kind: Literal["threshold", "gaussian", "policy"]
    epsilon: float
    delta: float
    max_partitions: int
    probabilities: tuple[float, ...] = ()
    """``threshold``: release probability by unit count (at ``eps/m, delta/m``)."""
    sigma: float = 0.0
    """``gaussian``: the noise's standard deviation (weights in units of 1)."""
    rho: float = 0.0
    """``gaussian``: the release threshold."""
    delta_noise: float = 0.0
    """``gaussian``: the Gaussian mechanism's share of delta (the rest bounds new keys)."""
    sensitivity: float = 1.0
    """``gaussian``, ``policy``: the weights' L2 sensitivity the noise is calibrated for."""
    cutoff: float = 0.0
    """``policy``: the weight ``Gamma`` a unit fills its keys up to."""

    @property
    def mechanism(self) -> str:
        """The selection's name in the ledger, the manifest and ``release.json``: the optimal
        threshold on unit counts, or the Gaussian threshold on (adaptive) weights."""
        return {
            "threshold": "optimal_threshold",
            "gaussian": "gaussian_threshold",
            "policy": "policy_gaussian_threshold",
        }[self.kind]

    def units_for_half(self) -> float:
        """Units (each in ``max_partitions`` keys) a key needs to be released half the time."""
        if self.kind == "threshold":
            return float(next(n for n, p in enumerate(self.probabilities) if p >= 0.5))
        # policy: a key whose units are all in m keys of the same gap gets 1/sqrt(m) from each.
        return self.rho / (unit_weight(self.max_partitions) / GRID)

    def describe(self) -> dict[str, Any]:
        """What ``release.json`` states about the rule."""
        out: dict[str, Any] = {
            "rule": self.kind,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "max_partitions_per_unit": self.max_partitions,
        }
        if self.kind == "gaussian":
            out |= {"sigma": self.sigma, "threshold": self.rho, "weight_grid": GRID}
        elif self.kind == "policy":
            out |= {
                "sigma": self.sigma,
                "threshold": self.rho,
                "cutoff": self.cutoff,
                "l2_sensitivity": self.sensitivity,
            }
        else:
            out |= {"always_released_from_units": len(self.probabilities) - 1}
        return out


def _threshold_rule(eps: float, delta: float, m: int) -> KeyRule:
    probs = threshold_probabilities(eps / m, delta / m)
    spent = threshold_delta(probs, eps / m)
    if spent * m > delta:
        raise InvariantError(f"threshold rule spends delta {spent * m!r} > {delta!r}")
    return KeyRule(
        kind="threshold", epsilon=eps, delta=delta, max_partitions=m, probabilities=probs
    )


def _new_key_weight(rule: KeyRule, t: int) -> float:
    """The most weight a key held by one unit alone gets, when that unit holds ``t`` such keys:
    ``q(t)`` (``gaussian``), ``sensitivity / sqrt(t)`` (``policy``, :mod:`dp.tables.policy_keys`,
    with its floating-point slack)."""
    if rule.kind == "policy":
        return rule.sensitivity / math.sqrt(t)
    return unit_weight(t) / GRID


def _weighted_rule(
    eps: float, delta: float, m: int, kind: Literal["gaussian", "policy"], sensitivity: float
) -> KeyRule:
    """The ``gaussian`` or ``policy`` rule: the delta split with the smallest threshold."""
    best: KeyRule | None = None
    for share in _SPLITS:
        d1 = delta * share
        d2 = (delta - d1) * (1.0 - _SLACK)
        sigma = gaussian_sigma(l2_sensitivity=sensitivity, epsilon=eps, delta=d1)
        rule = KeyRule(
            kind=kind,
            epsilon=eps,
            delta=delta,
            max_partitions=m,
            sigma=sigma,
            delta_noise=d1,
            sensitivity=sensitivity,
        )
        rho = max(
            _new_key_weight(rule, t) + sigma * -float(ndtri(-math.expm1(math.log1p(-d2) / t)))
            for t in range(1, m + 1)
        )
        if best is None or rho < best.rho:
            cutoff = rho + _CUTOFF_SIGMAS * sigma if kind == "policy" else 0.0
            best = replace(rule, rho=rho, cutoff=cutoff)
    if best is None:  # pragma: no cover - _SPLITS is not empty
        raise InvariantError("no delta split")
    spent = gaussian_delta(sigma=best.sigma, l2_sensitivity=sensitivity, epsilon=eps)
    spent += new_key_delta(best)
    if spent > delta:
        raise InvariantError(f"{kind} key rule spends delta {spent!r} > {delta!r}")
    return best


def _policy_rule(eps: float, delta: float, m: int) -> KeyRule:
    """The ``policy`` rule, calibrated for a sensitivity that covers the floating-point slack of
    its own cutoff (:func:`dp.tables.policy_keys.policy_sensitivity`; two rounds suffice)."""
    sensitivity = 1.0
    for _ in range(4):
        rule = _weighted_rule(eps, delta, m, "policy", sensitivity)
        need = policy_sensitivity(cutoff=rule.cutoff, max_partitions=m)
        if need <= sensitivity:
            return rule
        sensitivity = 2.0 * need - 1.0  # twice the slack: the cutoff grows with it, barely
    raise InvariantError("the policy rule's sensitivity did not settle")  # pragma: no cover


@lru_cache(maxsize=64)
def key_rule(
    epsilon: float, delta: float, max_partitions: int = 1, selection: Selection = "auto"
) -> KeyRule:
    """The rule for (epsilon, delta) and up to ``max_partitions`` keys per unit.

    ``selection`` names a rule, or ``auto`` (see the module docstring).

    >>> key_rule(1.0, 1e-6).kind, key_rule(0.5, 1e-6, 4, "gaussian").kind
    ('threshold', 'gaussian')
    """
    eps, dl = check_epsilon(epsilon), check_delta(delta)
    if dl <= 0.0:
        raise ConfigError(f"private keys need delta > 0, got {delta!r}")
    if max_partitions < 1:
        raise ConfigError(f"max_partitions_per_unit must be >= 1, got {max_partitions!r}")
    if selection == "threshold" or (selection == "auto" and max_partitions == 1):
        return _threshold_rule(eps, dl, max_partitions)
    if selection == "gaussian":
        return _weighted_rule(eps, dl, max_partitions, "gaussian", 1.0)
    if selection == "policy":
        return _policy_rule(eps, dl, max_partitions)
    if selection != "auto":
        raise ConfigError(
            f"selection must be auto, threshold, gaussian or policy, got {selection!r}"
        )
    rule = _threshold_rule(eps, dl, max_partitions)
    other = _weighted_rule(eps, dl, max_partitions, "gaussian", 1.0)
    return other if other.units_for_half() < rule.units_for_half() else rule


def selection_budget(epsilon: float, delta: float, measures: int) -> tuple[float, float, float]:
    """``(eps_select, delta_select, eps_measures)``: the selection costs as much as one measure.

    >>> selection_budget(1.0, 1e-6, 3)
    (0.25, 1e-06, 0.75)
    """
    eps = check_epsilon(epsilon)
    if measures < 1:
        raise ConfigError(f"a table needs at least one measure, got {measures!r}")
    select = eps / (1 + measures)
    return select, check_delta(delta), eps - select


@lru_cache(maxsize=64)
def _bernoulli_measurement(prob: float) -> Any:
    return odp.m.make_randomized_response_bool(prob=prob)


def _bernoulli(p: float, rng: np.random.Generator | None) -> bool:
    """True with probability :func:`_drawn` ``(p)``: OpenDP's exact randomized response (a
    Bernoulli draw from the OS's CSPRNG), or a seeded generator in tests."""
    if p <= 0.0 or p >= 1.0:
        return p >= 1.0
    if rng is not None:
        return bool(rng.random() < float(_drawn(p)))
    if p >= 0.5:
        return bool(_bernoulli_measurement(p)(True))
    return bool(_bernoulli_measurement(1.0 - p)(False))


def rule_weights(data: KeyWeights, rule: KeyRule) -> npt.NDArray[np.float64]:
    """The weights a ``gaussian`` or ``policy`` rule adds its noise to (units of 1)."""
    if rule.kind == "gaussian":
        return data.weights.astype(np.float64) / GRID
    single = data.units if data.single is None else data.single
    return policy_weights(single, data.spread_keys, data.spread_offsets, cutoff=rule.cutoff)


def select_keys(
    data: KeyWeights, rule: KeyRule, *, rng: np.random.Generator | None = None
) -> BoolArray:
    """Which keys of ``data`` the rule releases (one draw per key present in the data).

    Args:
        data: the exact per-key aggregate.
        rule: from :func:`key_rule`.
        rng: ``None`` for release-grade randomness; a seeded generator for tests only.
    """
    n = len(data.labels)
    if len(data.units) != n or len(data.weights) != n:
        raise InvariantError("key weights are not aligned with their labels")
    if rule.kind != "threshold":
        noisy = gaussian(
            rule_weights(data, rule),
            l2_sensitivity=rule.sensitivity,
            epsilon=rule.epsilon,
            delta=rule.delta_noise,
            rng=rng,
        )
        return np.asarray(noisy > rule.rho, dtype=np.bool_)
    probs = rule.probabilities
    last = len(probs) - 1
    return np.fromiter(
        (_bernoulli(probs[min(int(c), last)], rng) for c in data.units), dtype=np.bool_, count=n
    )
