"""``report.html``: the run's report for people, one self-contained page.

It says what ``report.md`` says -- the privacy guarantee, the budget table, each release's
summary -- and adds the budget in the context of the dataset's allowance and a plot per
release (:mod:`dp.pipeline.html.sections`). It reads only public values: the manifest, the
release summaries and the released files in the run folder; it is written into that folder
before the folder is published, so it is covered by the run's output hash.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger import BudgetPolicy
from dppub.dp.pipeline.comparisons import comparison_plots
from dppub.dp.pipeline.html import render_page
from dppub.dp.pipeline.html.figures import BAND, BUDGET, INK, MUTED, style
from dppub.dp.pipeline.html.markdown import markdown_html
from dppub.dp.pipeline.html.sections import Section, release_section
from dppub.dp.pipeline.kinds import JSON, ReleaseSummary
from dppub.dp.pipeline.manifest_file import ManifestFile
from dppub.dp.pipeline.plan import Plan
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
    typed = manifest(
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
        guarantee=typed.guarantee,
        folder=run.staging.dir,
    )
    page = render_report_html(manifest=typed, summaries=summaries, folder=run.staging.dir)
    (run.staging.dir / "report.html").write_text(page, encoding="utf-8")
    return RunReports(manifest=typed.to_json(), report=report, table=table)


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


def budget_context(manifest: ManifestFile | Mapping[str, JSON]) -> BudgetContext:
    """The budget context of a run, from its manifest."""
    man = ManifestFile.read(manifest)
    policy = BudgetPolicy.from_json(man.budget.model_dump())
    budget, run, remaining = man.budget_epsilon, man.total_epsilon, man.remaining_epsilon
    scope = man.budget_scope
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
    """One stacked bar: spent before, this run, what is left; the allowance as a line.

    Drawn as SVG here, in the pages' look (:mod:`dp.pipeline.html.figures`), not by
    matplotlib: the bar is in every report, and importing matplotlib for it cost a quarter
    of a second of a small run; only releases that plot import it now.
    """
    width, height = 504.0, 93.6  # 7 x 1.3 inches in points, as the other figures
    x0, x1, y0, y1 = 14.4, width - 122.4, 10.8, height - 36.0  # the axes' box
    parts = [
        ("spent before", ctx.spent_before, MUTED),
        ("this run", ctx.run, INK),
        ("left", ctx.remaining, BAND),
    ]
    shown = [(label, w, colour) for label, w, colour in parts if w is not None]
    top = max(ctx.budget, sum(w for _, w, _ in shown)) * 1.04

    def x(value: float) -> float:
        return x0 + (x1 - x0) * value / top

    out = [
        f'<svg role="img" aria-label="budget" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width:g}pt" height="{height:g}pt" viewBox="0 0 {width:g} {height:g}" '
        'font-size="9" font-family="sans-serif">'
    ]
    raw = top / 9.0  # matplotlib's tick steps on an axis this long
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * magnitude >= raw)
    for i in range(int(top / step + 1e-9) + 1):  # grid line, tick, label
        tx = x(i * step)
        out.append(
            f'<path d="M{tx:.2f} {y0}V{y1}" stroke="#e6e6e6" stroke-width="0.6"/>'
            f'<path d="M{tx:.2f} {y1}v3.5" stroke="black" stroke-width="0.8"/>'
            f'<text x="{tx:.2f}" y="{y1 + 13}" text-anchor="middle">{i * step:g}</text>'
        )
    left, bar = 0.0, (y1 - y0) / 4.0
    for _, w, colour in shown:
        out.append(
            f'<rect x="{x(left):.2f}" y="{y0 + bar:.2f}" width="{max(x(w) - x0, 0.0):.2f}" '
            f'height="{2 * bar:.2f}" fill="{colour}"/>'
        )
        left += w
    bx = x(ctx.budget)
    out.append(f'<path d="M{bx:.2f} {y0}V{y1}" stroke="{BUDGET}" stroke-width="1.6"/>')
    out.append(f'<path d="M{x0} {y0}V{y1}H{x1}" fill="none" stroke="black" stroke-width="0.8"/>')
    label = escape(f"epsilon ({ctx.scope})")
    out.append(f'<text x="{(x0 + x1) / 2:.2f}" y="{y1 + 27}" text-anchor="middle">{label}</text>')
    legend = [(f"budget: {ctx.budget:g}", BUDGET, True)]
    legend += [(f"{lab}: {w:g}", colour, False) for lab, w, colour in shown]
    ly = (y0 + y1) / 2 - 6.5 * (len(legend) - 1)
    for i, (text, colour, is_line) in enumerate(legend):
        y, lx = ly + 13 * i, x1 + 8
        mark = (
            f'<path d="M{lx} {y:.2f}h14" stroke="{colour}" stroke-width="1.6"/>'
            if is_line
            else f'<rect x="{lx}" y="{y - 3.5:.2f}" width="14" height="7" fill="{colour}"/>'
        )
        out.append(f'{mark}<text x="{lx + 19}" y="{y + 3.2:.2f}">{escape(text)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Release:
    summary: ReleaseSummary
    text: Markup
    section: Section


def render_report_html(
    *,
    manifest: ManifestFile | Mapping[str, JSON],
    summaries: Sequence[ReleaseSummary],
    folder: Path,
) -> str:
    """The page for a run whose releases are in ``folder`` (the staging or run folder).

    Args:
        manifest: the run's manifest (:func:`dp.pipeline.report.manifest`).
        summaries: its releases, in manifest order.
        folder: where the released files are (paths in ``summary.files`` are relative to it).
    """
    man = ManifestFile.read(manifest)
    ctx = budget_context(man)
    total = PrivacyCost(epsilon=man.total_epsilon, delta=man.total_delta)
    with style():
        chart = _budget_figure(ctx)
        compared = comparison_plots(summaries, folder)
        releases = [
            _Release(
                summary=s,
                text=markdown_html(s.release_kind.report(s)),
                section=release_section(compared.get(s.name, s.release_kind.plot), s, folder),
            )
            for s in summaries
        ]
    context: dict[str, Any] = {
        "manifest": man,
        "guarantee": man.guarantee.statement,
        "rows": budget_rows(summaries),
        "zcdp": zcdp_lines(summaries, total),
        "ctx": ctx,
        "budget_chart": chart,
        "releases": releases,
    }
    return render_page("report.html.j2", **context)
