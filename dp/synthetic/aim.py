"""AIM: adaptive, workload-aware select-measure-generate (McKenna, Mullins, Sheldon & Miklau,
VLDB 2022), on exact marginal counts computed elsewhere (dppub's one shared scan).

The loop, under rho-zCDP with a neighbour moving any marginal's vector by at most
``sensitivity`` in L1 and in L2 (1 for one row; m for a privacy unit of at most m rows):

1. (``rows`` not given) a noisy row count, Gaussian, at ``count_share`` of rho; the rest,
   ``rho' = rho - count_rho``, is AIM's (``rho' = rho`` with ``rows`` given).
2. Every one-way marginal measured with ``sigma_0 = sensitivity * sqrt(T / (2 * 0.9 * rho'))``,
   ``T = 4 d`` planned rounds by default for d columns (the paper's ``16 d`` took more rounds,
   each a compiled fit, for the same error on Adult at epsilon 1: ``bench/RESULTS.md``;
   :class:`Schedule`); a model fitted (Private-PGM, :mod:`dp.synthetic.pgm`).
3. Each round: a candidate chosen by the exponential mechanism at ``epsilon_t`` among the
   workload's downward closure that keeps the model within ``max_model_size * spent / rho'`` MB,
   scored ``w_r (||x_r - xhat_r||_1 - sqrt(2/pi) sigma_t n_r)`` (``w_r``: its overlap with the
   workload; sensitivity ``max_r (sensitivity * w_r + its float64 rounding allowance)``,
   :func:`quality_allowance`); measured with Gaussian noise ``sigma_t``;
   the model refitted, warm-started. If the model moved less on the measured clique than the
   noise's expected L1, ``sigma_t`` halves and ``epsilon_t`` doubles (annealing). The round that
   would leave less than two rounds' cost (or the ``max_rounds``-th) spends exactly what is
   left. Each round costs ``epsilon_t^2 / 8 + sensitivity^2 / (2 sigma_t^2)``.

Noise and selection come from :mod:`dp.mechanisms` (OpenDP for releases; ``rng`` only for tests
and benchmarks). Everything after the measurements (the model, the rows) is post-processing.
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.calibration import zcdp_gaussian_sigma
from dppub.dp.errors import ConfigError, InvariantError, Stopped
from dppub.dp.mechanisms import exponential, gaussian
from dppub.dp.numerics.fixedpoint import MAX_ROWS, float_allowance
from dppub.dp.synthetic import pgm
from dppub.dp.synthetic.pgm import Clique

__all__ = [
    "AimResult",
    "Measurement",
    "Schedule",
    "candidates",
    "marginal_answers",
    "project_answer",
    "quality",
    "quality_allowance",
    "run_aim",
    "workload_cliques",
]

FloatArray = npt.NDArray[np.float64]
_BIAS = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|
PLANNED_ROUNDS_PER_COLUMN = 4
"""AIM's default ``T / d`` (the paper's is 16)."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """One noisy marginal: public, the input of the model."""

    clique: Clique
    noisy: FloatArray
    """Noisy counts, flattened in C order over the clique's columns."""
    sigma: float
    """The noise's standard deviation, in counts."""
    rho: float
    """What measuring it cost (zCDP)."""
    round: int
    """0: the one-way start; 1, 2, ...: AIM's rounds."""
    selection_rho: float
    """What selecting it cost (zCDP; 0 in round 0)."""


@dataclass(frozen=True, slots=True)
class AimResult:
    model: Any
    """The fitted Private-PGM model (mbi ``MarkovRandomField``)."""
    measurements: tuple[Measurement, ...]
    synthetic: dict[str, npt.NDArray[np.int64]]
    """The sampled rows: codes in ``range(domain[column])`` per column."""
    rows: int
    """How many rows were sampled (``rows``, or the rounded noisy count)."""
    noisy_count: float | None
    """The noisy row count, where one was measured."""
    count_rho: float
    rho: float
    """The budget given."""
    rho_used: float
    """What was spent: the count, every selection and every measurement."""
    rounds: int

    def marginal(self, clique: Clique) -> FloatArray:
        """The model's marginal counts on ``clique`` (post-processing)."""
        return pgm.model_marginal(self.model, clique)


def workload_cliques(
    columns: Sequence[str], workload: int | Sequence[Sequence[str]]
) -> tuple[Clique, ...]:
    """All ``k``-way column sets of ``columns`` (``workload=k``), or the listed sets, each in
    the order of ``columns``."""
    order = {c: i for i, c in enumerate(columns)}
    if isinstance(workload, int):
        if not 1 <= workload <= len(columns):
            raise ConfigError(f"workload marginals must lie in 1..{len(columns)}, got {workload}")
        return tuple(itertools.combinations(columns, workload))
    out: list[Clique] = []
    for cl in workload:
        unknown = [c for c in cl if c not in order]
        if unknown or not cl or len(set(cl)) != len(cl):
            raise ConfigError(f"a workload marginal must name distinct declared columns: {cl!r}")
        clique = tuple(sorted(cl, key=order.__getitem__))
        if clique not in out:
            out.append(clique)
    return tuple(out)


def candidates(workload: Sequence[Clique]) -> dict[Clique, float]:
    """The workload's downward closure, each with its weight ``sum_s |r & s|`` (AIM, eq. 5)."""
    closure = {
        sub
        for cl in workload
        for r in range(1, len(cl) + 1)
        for sub in itertools.combinations(cl, r)
    }
    ordered = sorted(closure, key=lambda c: (len(c), c))
    return {r: float(sum(len(set(r) & set(s)) for s in workload)) for r in ordered}


def marginal_answers(
    codes: Mapping[str, npt.ArrayLike], domain: Mapping[str, int], cliques: Sequence[Clique]
) -> dict[Clique, FloatArray]:
    """Exact marginal counts of encoded data (codes in ``range(domain[c])``), for benchmarks
    and tests; releases take theirs from the shared scan."""
    out: dict[Clique, FloatArray] = {}
    for cl in cliques:
        shape = tuple(domain[c] for c in cl)
        flat = np.ravel_multi_index([np.asarray(codes[c], dtype=np.int64) for c in cl], shape)
        out[cl] = np.bincount(flat, minlength=math.prod(shape)).astype(np.float64)
    return out


def project_answer(
    answers: Mapping[Clique, npt.ArrayLike], domain: Mapping[str, int], clique: Clique
) -> FloatArray:
    """The exact counts of ``clique``: given, or summed from a given clique containing it."""
    if clique in answers:
        return np.asarray(answers[clique], dtype=np.float64).ravel()
    for cl, counts in answers.items():
        if set(clique) <= set(cl):
            table = np.asarray(counts, dtype=np.float64).reshape([domain[c] for c in cl])
            drop = tuple(i for i, c in enumerate(cl) if c not in clique)
            kept = [c for c in cl if c in clique]
            summed = table.sum(axis=drop).transpose([kept.index(c) for c in clique])
            return np.asarray(summed, dtype=np.float64).ravel()
    raise ConfigError(f"no exact answer covers the marginal {clique!r}")


def quality(weight: float, exact: FloatArray, estimate: FloatArray, sigma: float) -> float:
    """AIM's score of a candidate: ``w_r (||x_r - xhat_r||_1 - sqrt(2/pi) sigma n_r)``, the
    model's error on it less the error measuring it would leave. One neighbour moves ``x_r``
    by at most ``m`` in L1 (``m`` rows per unit), hence the score by ``m w_r``; ``xhat_r`` (the
    model) and ``sigma`` are public. The L1 norm is summed correctly rounded (``math.fsum``), so
    the float64 score is the exact one up to :func:`quality_allowance`."""
    return weight * (math.fsum(np.abs(exact - estimate)) - _BIAS * sigma * exact.size)


def quality_allowance(weight: float, estimate: FloatArray, sigma: float) -> float:
    """How much further than ``m w_r`` float64 rounding can move :func:`quality` between
    neighbours, from public values only. Each ``|x_j - xhat_j|`` is rounded once, the sum once
    (correctly), the subtraction and the product by ``w`` once each: together at most
    ``5 u w B`` per table with ``u = 2^-53`` and ``B = n + ||xhat||_1 + sqrt(2/pi) sigma k``
    bounding every magnitude involved (``n <= MAX_ROWS`` rows; the slack absorbs second-order
    terms), so ``10 u w B`` between neighbours: five roundings' allowance
    (:func:`dp.numerics.fixedpoint.float_allowance`) scaled to ``B``."""
    public = math.fsum(np.abs(estimate)) + _BIAS * sigma * estimate.size
    return weight * float_allowance(5) * (1.0 + public / MAX_ROWS)


class Schedule:
    """AIM's budget schedule under zCDP, in the units of one row (sensitivity 1; a unit's
    counts scale by its own), apart from the data so that its accounting stands alone.

    Of the budget ``rho``, ``spent`` is already spent (a noisy count); the rest pays the one-way
    start and the rounds. With ``T`` planned rounds and ``d`` columns the start measures each
    column at ``sigma_0 = sqrt(T / (2 * 0.9 * rest))`` (rho ``1 / (2 sigma^2)`` each, ``0.9 d /
    T`` of the rest in all: ``T >= d`` leaves some) and a round selects at ``epsilon_0 =
    sqrt(0.8 rest / T)`` (rho ``epsilon^2 / 8``) and measures at ``sigma``: ``rest / T`` a
    round. Annealing halves ``sigma`` and doubles ``epsilon`` (4x the cost). The round that
    would leave less than two rounds' cost, or the ``max_rounds``-th, spends what is left,
    1/10 on its selection and 9/10 on its measurement; ``spent`` never exceeds ``rho``.
    """

    def __init__(
        self,
        rho: float,
        *,
        spent: float,
        columns: int,
        planned_rounds: int,
        max_rounds: int | None,
    ) -> None:
        if not (0.0 <= spent < rho and planned_rounds >= columns >= 1):
            raise ConfigError(
                f"an AIM schedule needs 0 <= spent < rho and planned rounds >= columns >= 1, "
                f"got rho={rho!r}, spent={spent!r}, T={planned_rounds!r}, d={columns!r}"
            )
        rest = rho - spent
        self.rho, self.spent, self.columns = rho, spent, columns
        self.sigma = math.sqrt(planned_rounds / (2.0 * 0.9 * rest))
        self.epsilon = math.sqrt(8.0 * 0.1 * rest / planned_rounds)
        self.max_rounds = max_rounds
        self.round = 0
        self.last = False

    def start(self) -> float:
        """The rho of each one-way measurement of the start (charged here, ``d`` of them)."""
        each = 0.5 / self.sigma**2
        self.spent += self.columns * each
        return each

    def next(self) -> tuple[float, float]:
        """The next round's ``(selection rho, measurement rho)``, charged; sets ``sigma`` and
        ``epsilon`` to the round's, and ``last`` if it is the last."""
        self.round += 1
        left = self.rho - self.spent
        selection, measurement = self.epsilon**2 / 8.0, 0.5 / self.sigma**2
        if left < 2.0 * (selection + measurement) or self.round == self.max_rounds:
            selection = 0.1 * left
            measurement = left - selection
            self.sigma = math.sqrt(0.5 / measurement)
            self.epsilon = math.sqrt(8.0 * selection)
            self.last = True
        self.spent += selection + measurement
        return selection, measurement

    def anneal(self) -> None:
        """The model hardly moved on the last measurement: finer noise from the next round."""
        self.sigma /= 2.0
        self.epsilon *= 2.0


def run_aim(
    answers: Mapping[Clique, npt.ArrayLike],
    domain: Mapping[str, int],
    workload: Sequence[Clique],
    rho: float,
    *,
    sensitivity: float = 1.0,
    rows: int | None = None,
    count_share: float = 0.01,
    max_rows: int | None = None,
    max_model_size: float = 80.0,
    max_rounds: int | None = None,
    planned_rounds: int | None = None,
    iters: int = 1000,
    rng: np.random.Generator | None = None,
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> AimResult:
    """AIM on exact marginal counts; returns the model, its measurements and sampled rows.

    Args:
        answers: exact counts per clique (flattened C order over the clique's columns, as
            ``marginal_answers`` gives them); a clique's sub-marginals are summed from it, so
            the workload's cliques suffice.
        domain: column -> number of codes, in the column order of every clique.
        workload: the marginals the table must preserve (``workload_cliques``).
        rho: the zCDP budget (``dp.synthetic.accounting.cdp_rho(epsilon, delta)``).
        sensitivity: how far one neighbour moves a marginal (L1 and L2): 1 for a row, m for a
            privacy unit of at most m rows.
        rows: rows to sample; ``None``: a noisy count at ``count_share * rho``.
        max_rows: the most rows sampled from the noisy count (it is clamped to
            ``[1, max_rows]``, post-processing); ``None``: no bound.
        max_model_size: the model's final size limit in MB (the junction tree's cells).
        max_rounds: a cap on AIM's rounds (the last spends what is left); ``None``: AIM's own.
        planned_rounds: ``T``, which sets the first rounds' share of the budget (``rho' / T``
            each, ``rho'`` the rho left after the row count, until annealing raises it); at
            least the number of columns. ``None``: ``4 d`` (the paper's ``16 d`` spends more
            rounds, hence compiled fits, on the same error: ``bench/RESULTS.md``).
        iters: Private-PGM's iterations per fit.
        rng: ``None`` for release-grade noise (OpenDP); a seeded generator for tests and
            benchmarks (it also seeds the sampling).
        progress: called after each round with one public line (the round's number and the
            share of rho spent so far).
        should_stop: asked before each round; ``True`` raises :class:`~dp.errors.Stopped`
            (what was measured stays spent: the caller's ledger has charged it).
    """
    if not (rho > 0.0 and math.isfinite(rho)):
        raise ConfigError(f"AIM needs a budget rho > 0, got {rho!r}")
    if not sensitivity >= 1.0:
        raise ConfigError(f"a marginal's sensitivity is at least 1, got {sensitivity!r}")
    if rows is not None and rows < 1:
        raise ConfigError(f"rows must be at least 1, got {rows!r}")
    if max_rounds is not None and max_rounds < 1:
        raise ConfigError(f"max_rounds must be at least 1, got {max_rounds!r}")
    if planned_rounds is not None and planned_rounds < len(domain):
        raise ConfigError(
            f"planned_rounds must be at least the {len(domain)} columns, got {planned_rounds!r}"
        )
    if rows is None and not 0.0 < count_share < 1.0:
        raise ConfigError(f"count_share must lie in (0, 1), got {count_share!r}")
    if max_model_size <= 0.0:
        raise ConfigError(f"max_model_size must be > 0 MB, got {max_model_size!r}")
    say = progress or (lambda _msg: None)
    stop = should_stop or (lambda: False)
    cands = candidates(workload)
    attrs = tuple(domain)
    oneway = [(a,) for a in attrs]
    exact = {cl: project_answer(answers, domain, cl) for cl in [*oneway, *cands]}
    measured: list[Measurement] = []

    def measure(cl: Clique, rho_i: float, t: int, sel: float) -> None:
        noisy = gaussian(exact[cl], l2_sensitivity=sensitivity, rho=rho_i, rng=rng)
        sigma = zcdp_gaussian_sigma(l2_sensitivity=sensitivity, rho=rho_i)
        measured.append(Measurement(cl, noisy, sigma, rho_i, t, sel))

    noisy_count: float | None = None
    count_rho = 0.0
    if rows is None:
        count_rho = count_share * rho
        n = float(exact[oneway[0]].sum())
        noisy_count = float(gaussian(n, l2_sensitivity=sensitivity, rho=count_rho, rng=rng))
    budget = rho - count_rho

    def triples() -> list[tuple[Clique, FloatArray, float]]:
        return [(m.clique, m.noisy, m.sigma) for m in measured]

    plan = Schedule(
        rho,
        spent=count_rho,
        columns=len(attrs),
        planned_rounds=planned_rounds or PLANNED_ROUNDS_PER_COLUMN * len(attrs),
        max_rounds=max_rounds,
    )
    start = plan.start()
    for cl in oneway:
        measure(cl, start, 0, 0.0)
    model = pgm.fit(domain, triples(), iters=iters)
    while not plan.last:
        if stop():  # between rounds: nothing of this round is drawn yet
            raise Stopped(f"AIM stopped before round {plan.round + 1}: the run was interrupted")
        sel_rho, meas_rho = plan.next()
        limit = max_model_size * (plan.spent - count_rho) / budget
        in_model = {
            sub
            for cl in model.cliques
            for r in range(1, len(cl) + 1)
            for sub in itertools.combinations(cl, r)
        }
        small = [
            cl
            for cl in cands
            if cl in in_model or pgm.model_size(domain, [*model.cliques, cl]) <= limit
        ]
        sigma_counts = plan.sigma * sensitivity
        before = {cl: pgm.model_marginal(model, cl) for cl in small}
        scores = [quality(cands[cl], exact[cl], before[cl], sigma_counts) for cl in small]
        bound = max(
            sensitivity * cands[cl] + quality_allowance(cands[cl], before[cl], sigma_counts)
            for cl in small
        )
        chosen = small[
            exponential(
                scores,
                sensitivity=bound,
                rho=sel_rho,
                rng=rng,
            )
        ]
        measure(chosen, meas_rho, plan.round, sel_rho)
        model = pgm.fit(domain, triples(), iters=iters, warm_start=model)
        moved = np.abs(pgm.model_marginal(model, chosen) - before[chosen]).sum()
        say(f"round {plan.round}: {plan.spent / rho:.0%} of rho spent")
        if moved <= _BIAS * sigma_counts * exact[chosen].size:
            plan.anneal()
    spent = plan.spent
    if spent > rho * (1.0 + 1e-9):
        raise InvariantError(f"AIM spent rho {spent!r} of a budget of {rho!r}")
    clamped = min(max(1.0, noisy_count or 0.0), float(max_rows or math.inf))
    n_rows = rows if rows is not None else round(clamped)
    seed = int(rng.integers(2**32)) if rng is not None else secrets.randbits(32)
    return AimResult(
        model=model,
        measurements=tuple(measured),
        synthetic=pgm.sample(model, n_rows, seed),
        rows=n_rows,
        noisy_count=noisy_count,
        count_rho=count_rho,
        rho=rho,
        rho_used=spent,
        rounds=plan.round,
    )
