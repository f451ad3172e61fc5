"""``report.html``: the run's report for people, one self-contained page.

It says what ``report.md`` says -- the privacy guarantee, the budget table, each release's
summary -- and adds the budget in the context of the dataset's allowance and a plot per
release (:mod:`dp.pipeline.html.sections`). It reads only public values: the manifest, the
release summaries and the released files in the run folder; it is written into that folder
before the folder is published, so it is covered by the run's output hash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger import BudgetPolicy
from dppub.dp.pipeline.html import render_page
from dppub.dp.pipeline.html.figures import BAND, BUDGET, INK, MUTED, new_figure, style, to_svg
from dppub.dp.pipeline.html.markdown import markdown_html
from dppub.dp.pipeline.html.sections import Section, release_section
from dppub.dp.pipeline.kinds import JSON, ReleaseSummary
from dppub.dp.pipeline.kinds.base import as_float, as_object, as_str
from dppub.dp.pipeline.plan import Plan
from dppub.dp.pipeline.registry import kind_of
from dppub.dp.pipeline.report import budget_rows, budget_table, manifest, render_report, zcdp_lines
from dppub.dp.runs import Run

__all__ = ["BudgetContext", "RunReports", "budget_context", "render_report_html", "write_reports"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReports:
    """What a composed run publishes about itself."""

    manifest: dict[str, JSON]
    report: str
    """``report.md``."""
    table: str
    """The budget table (Markdown), also the Prefect artifact."""


def write_reports(
    plan: Plan, run: Run, summaries: Sequence[ReleaseSummary], head: tuple[int, str]
) -> RunReports:
    """The manifest and ``report.md`` of a composed run; writes ``report.html`` into its
    staging folder (so the run's output hash covers it)."""
    cfg = plan.config
    table = budget_table(summaries, total=plan.total, budget=cfg.budget, remaining=run.remaining)
    man = manifest(
        plan,
        summaries,
        run_id=run.run_id,
        reservation=run.reservation,
        remaining=run.remaining,
        head=head,
    )
    report = render_report(
        dataset=cfg.dataset.name,
        run_id=run.run_id,
        summaries=summaries,
        table=table,
        ledger_head=head,
        guarantee=as_object(man["guarantee"]),
    )
    page = render_report_html(manifest=man, summaries=summaries, folder=run.staging.dir)
    (run.staging.dir / "report.html").write_text(page, encoding="utf-8")
    return RunReports(manifest=man, report=report, table=table)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetContext:
    """The run's cost against the allowance it was charged to (epsilon)."""

    scope: str
    """``lifetime``, or ``period 2026-11`` for a budget that renews each period."""
    policy: str
    """The budget policy in words."""
    budget: float
    """The allowance of the scope."""
    run: float
    """This run's composed cost."""
    remaining: float
    """What the next run may spend."""
    spent_before: float | None
    """Spent in the scope before this run; None when a per-period cap makes ``budget -
    remaining`` something else than what was spent."""


def budget_context(manifest: Mapping[str, JSON]) -> BudgetContext:
    """The budget context of a run, from its manifest."""
    policy = BudgetPolicy.from_json(dict(as_object(manifest["budget"])))
    budget, run = as_float(manifest["budget_epsilon"]), as_float(manifest["total_epsilon"])
    remaining = as_float(manifest["remaining_epsilon"])
    scope = as_str(manifest.get("budget_scope", "all"))
    before = None if policy.cap is not None else max(budget - remaining - run, 0.0)
    return BudgetContext(
        scope="lifetime" if scope == "all" else f"period {scope}",
        policy=policy.describe(),
        budget=budget,
        run=run,
        remaining=remaining,
        spent_before=before,
    )


def _budget_figure(ctx: BudgetContext) -> Markup:
    """One stacked bar: spent before, this run, what is left; the allowance as a line."""
    fig = new_figure(7.0, 1.3, left=0.2, right=1.7, bottom=0.5, top=0.15)
    ax = fig.subplots()
    left = 0.0
    parts = [
        ("spent before", ctx.spent_before, MUTED),
        ("this run", ctx.run, INK),
        ("left", ctx.remaining, BAND),
    ]
    for label, width, colour in parts:
        if width is None:
            continue
        ax.barh([0], [width], left=[left], color=colour, height=0.6, label=f"{label}: {width:g}")
        left += width
    ax.axvline(ctx.budget, color=BUDGET, linewidth=1.6, label=f"budget: {ctx.budget:g}")
    ax.set_xlim(0.0, max(ctx.budget, left) * 1.04)
    ax.set_ylim(-0.6, 0.6)
    ax.set_yticks([])
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(f"epsilon ({ctx.scope})")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_svg(fig, key="budget")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Release:
    summary: ReleaseSummary
    text: Markup
    section: Section


def render_report_html(
    *, manifest: Mapping[str, JSON], summaries: Sequence[ReleaseSummary], folder: Path
) -> str:
    """The page for a run whose releases are in ``folder`` (the staging or run folder).

    Args:
        manifest: the run's manifest (:func:`dp.pipeline.report.manifest`).
        summaries: its releases, in manifest order.
        folder: where the released files are (paths in ``summary.files`` are relative to it).
    """
    ctx = budget_context(manifest)
    total = PrivacyCost(
        epsilon=as_float(manifest["total_epsilon"]), delta=as_float(manifest["total_delta"])
    )
    with style():
        chart = _budget_figure(ctx)
        releases = [
            _Release(
                summary=s,
                text=markdown_html(kind_of(s.kind).report(s)),
                section=release_section(kind_of(s.kind).plot, s, folder),
            )
            for s in summaries
        ]
    context: dict[str, Any] = {
        "manifest": manifest,
        "guarantee": as_object(manifest["guarantee"])["statement"],
        "rows": budget_rows(summaries),
        "zcdp": zcdp_lines(summaries, total),
        "ctx": ctx,
        "budget_chart": chart,
        "releases": releases,
    }
    return render_page("report.html.j2", **context)
