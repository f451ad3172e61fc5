"""What a run publishes besides the releases: the manifest, ``report.md``, the budget table.

Everything here is built from public values (config, costs, noisy releases, ledger head); no
exact statistic of the private data reaches a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dppub.dp.budget import PrivacyCost, zcdp_of_pure, zcdp_to_dp
from dppub.dp.ledger import Reservation
from dppub.dp.pipeline.kinds import JSON, ReleaseSummary
from dppub.dp.pipeline.manifest_file import (
    BudgetFile,
    Guarantee,
    LedgerHead,
    ManifestFile,
    ManifestRelease,
)
from dppub.dp.pipeline.plan import Plan

__all__ = [
    "accounting",
    "budget_rows",
    "budget_table",
    "guarantee_statement",
    "manifest",
    "render_report",
    "tightest_epsilon",
    "zcdp_lines",
]


def budget_rows(summaries: Sequence[ReleaseSummary]) -> list[dict[str, JSON]]:
    """One row per release: name, kind, mechanism, epsilon, delta, sensitivity, DP or not."""
    return [
        {
            "release": s.name,
            "kind": s.kind,
            "mechanism": s.mechanism,
            "epsilon": s.cost.epsilon,
            "delta": s.cost.delta,
            "sensitivity": s.sensitivity,
            "guarantee": s.release_kind.guarantee(s),
        }
        for s in summaries
    ]


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:g}" if isinstance(v, float) else str(v)


def budget_table(
    summaries: Sequence[ReleaseSummary],
    *,
    total: PrivacyCost,
    budget: PrivacyCost,
    remaining: PrivacyCost,
) -> str:
    """Markdown table of the run's releases and the dataset's budget after the run."""
    head = "| release | kind | mechanism | epsilon | delta | sensitivity | guarantee |"
    lines = [head, "|---|---|---|---:|---:|---:|---|"]
    for r in budget_rows(summaries):
        lines.append("| " + " | ".join(_fmt(v) for v in r.values()) + " |")
    lines += [
        "",
        f"- run total (composed): epsilon = {total.epsilon:g}, delta = {total.delta:g}",
        *(f"- {line}" for line in zcdp_lines(summaries, total)),
        f"- dataset budget (lifetime): epsilon = {budget.epsilon:g}, delta = {budget.delta:g}",
        f"- remaining after this run: epsilon = {remaining.epsilon:g}, delta = {remaining.delta:g}",
    ]
    return "\n".join(lines)


def accounting(summary: ReleaseSummary) -> str:
    """How a release's cost was accounted: zCDP (its noise calibrated to rho), ``(epsilon,
    delta)``, or pure epsilon -- at the unit-level cost its neighbours are stated for."""
    stated = summary.result.accounting
    if stated:
        return stated
    if not summary.is_dp:
        return "not DP"
    return "(epsilon, delta)" if summary.cost.delta > 0 else "pure epsilon-DP"


def _unit_rho(summary: ReleaseSummary) -> float | None:
    """A DP release's unit-level rho-zCDP, or None where none is proven (an approximate-DP
    release that states no rho). Pure epsilon-DP at the unit level is ``epsilon^2 / 2``."""
    rho = summary.result.zcdp_rho
    if rho is not None:
        return rho
    return zcdp_of_pure(summary.cost.epsilon) if summary.cost.delta == 0 else None


def tightest_epsilon(
    summaries: Sequence[ReleaseSummary], total: PrivacyCost
) -> tuple[float | None, float | None, float]:
    """``(rho, epsilon_zcdp, stated)``: the run's zCDP total (the sum of every DP release's
    unit-level rho; None if one has none), its ``(epsilon, delta)`` conversion at the run's
    delta (Bun & Steinke 2016, Prop. 1.3), and the epsilon to state: the smaller of that and
    basic composition -- both are proven, so the report never states less than either.

    >>> from dppub.dp.pipeline.kinds import ReleaseSummary as S
    >>> from dppub.dp.pipeline.kinds.workload import WorkloadKind
    >>> from dppub.dp.pipeline.kinds.base import Result
    >>> def s(eps, rho): return S(name="r", release_kind=WorkloadKind(), mechanism="m",
    ...     is_dp=True, cost=PrivacyCost(epsilon=eps, delta=1e-6), sensitivity=None, parts=(),
    ...     files=(), output_hash="", result=Result(zcdp_rho=rho))
    >>> tightest_epsilon([s(0.3, 0.045)] * 10, PrivacyCost(epsilon=3.0, delta=1e-5))[2]
    3.0
    """
    if total.delta <= 0:
        return None, None, total.epsilon
    rhos = [_unit_rho(s) for s in summaries if s.is_dp]
    if any(r is None for r in rhos):
        return None, None, total.epsilon
    rho = sum(r for r in rhos if r is not None)
    eps = zcdp_to_dp(rho, total.delta) if rho > 0 else 0.0
    return rho, eps, min(eps, total.epsilon)


def zcdp_lines(summaries: Sequence[ReleaseSummary], total: PrivacyCost) -> list[str]:
    """With a delta, the zCDP total beside basic composition (informative: the ledger charges
    basic composition) and the smaller of the two; nothing for a pure epsilon-DP run. Every
    release's rho is unit-level (a row-level one is scaled by ``m^2``, zCDP's group privacy),
    so the figure holds for the run's neighbours."""
    rho, eps, stated = tightest_epsilon(summaries, total)
    if rho is None or eps is None:
        return []
    tighter = (
        "tighter than basic composition"
        if eps < total.epsilon
        else "no tighter than basic composition, which is stated"
    )
    return [
        f"zCDP accounting (Bun & Steinke 2016): rho = {rho:.4g}, i.e. epsilon = {eps:.4g} at "
        f"delta = {total.delta:g} ({tighter}); the run is (epsilon = {stated:.4g}, delta = "
        f"{total.delta:g})-DP (the ledger charges the basic composition above)"
    ]


def guarantee_statement(summaries: Sequence[ReleaseSummary], total: PrivacyCost) -> Guarantee:
    """Which releases the differential-privacy guarantee covers, in words and as lists."""
    covered = [s.name for s in summaries if s.is_dp]
    syntactic = [s.name for s in summaries if not s.is_dp]
    relations = sorted({s.neighbours for s in summaries if s.is_dp}) or ["one row"]
    names = ", ".join(covered) or "no release"
    text = (
        f"Differential privacy (epsilon = {total.epsilon:g}, delta = {total.delta:g}, "
        f"neighbours differ by {'; '.join(relations)}) covers: {names}."
    )
    if syntactic:
        why = dict.fromkeys(s.release_kind.not_covered(s) for s in summaries if not s.is_dp)
        text += f" Not covered: {', '.join(syntactic)} -- {' '.join(why)}"
    return Guarantee(dp_releases=covered, not_dp_releases=syntactic, statement=text)


def manifest(
    plan: Plan,
    summaries: Sequence[ReleaseSummary],
    *,
    run_id: str,
    reservation: Reservation,
    remaining: PrivacyCost,
    head: tuple[int, str],
) -> ManifestFile:
    """The run's ``manifest.json``."""
    cfg = plan.config
    releases = [
        ManifestRelease(
            name=s.name,
            kind=s.kind,
            mechanism=s.mechanism,
            epsilon=s.cost.epsilon,
            delta=s.cost.delta,
            sensitivity=s.sensitivity,
            is_dp=s.is_dp,
            neighbours=s.neighbours,
            files=list(s.files),
            accounting=accounting(s),
            output_hash=s.output_hash,
        )
        for s in summaries
    ]
    return ManifestFile(
        run_id=run_id,
        dataset=cfg.dataset.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        config_hash=cfg.config_hash,
        releases=releases,
        guarantee=guarantee_statement(summaries, plan.total),
        total_epsilon=plan.total.epsilon,
        total_delta=plan.total.delta,
        budget=BudgetFile.model_validate(cfg.budget_policy.to_json()),
        budget_epsilon=cfg.budget.epsilon,
        budget_delta=cfg.budget.delta,
        remaining_epsilon=remaining.epsilon,
        budget_period=reservation.period,
        budget_scope=reservation.scope,
        ledger_head=LedgerHead(seq=head[0], hash=head[1]),
    )


def render_report(
    *,
    dataset: str,
    run_id: str,
    summaries: Sequence[ReleaseSummary],
    table: str,
    ledger_head: tuple[int, str],
    guarantee: Guarantee,
    folder: Path | None = None,
) -> str:
    """The run's ``report.md``; with ``folder`` (the run folder), each release's results
    too (:meth:`~dp.pipeline.kinds.base.ReleaseKind.results`)."""
    lines = [
        f"# dppub release — dataset `{dataset}`, run `{run_id}`",
        "",
        "## Privacy guarantee",
        "",
        guarantee.statement,
        "",
        "## Privacy budget",
        "",
        table,
        "",
        f"Ledger head after recording this run's releases: seq {ledger_head[0]}, "
        f"`{ledger_head[1]}` (keep it: `dppub audit` checks the chain against it).",
        "",
        "## Releases",
        "",
    ]
    for s in summaries:
        lines += [f"### {s.name} ({s.kind})", "", *s.release_kind.report(s), ""]
        shown = [] if folder is None else s.release_kind.results(s, folder)
        lines += [*shown, ""] if shown else []
        if s.is_dp:
            lines += [
                f"Cost: epsilon = {s.cost.epsilon:g}, delta = {s.cost.delta:g} for neighbours "
                f"that differ by {s.neighbours}; accounting: {accounting(s)}.",
                "",
            ]
        lines += ["Files: " + ", ".join(f"`{f}`" for f in s.files), ""]
    return "\n".join(lines) + "\n"
