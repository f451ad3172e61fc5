"""The human-readable ``report.md`` of a run and the budget table shown as a Prefect artifact.

Everything here is built from public values (config, costs, noisy releases, ledger head); no
exact statistic of the private data reaches a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dp.budget import PrivacyCost, zcdp_of_pure, zcdp_to_dp

__all__ = ["budget_rows", "budget_table", "guarantee_statement", "render_report"]


def budget_rows(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per release: name, kind, mechanism, epsilon, delta, sensitivity, DP or not."""
    return [
        {
            "release": s["name"],
            "kind": s["kind"],
            "mechanism": s["mechanism"],
            "epsilon": s["epsilon"],
            "delta": s["delta"],
            "sensitivity": s.get("sensitivity"),
            "guarantee": "differential privacy" if s["is_dp"] else f"{s['guarantee']} (not DP)",
        }
        for s in summaries
    ]


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:g}" if isinstance(v, float) else str(v)


def budget_table(
    summaries: Sequence[dict[str, Any]],
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
        *_zcdp_line(summaries, total),
        f"- dataset budget: epsilon = {budget.epsilon:g}, delta = {budget.delta:g}",
        f"- remaining after this run: epsilon = {remaining.epsilon:g}, delta = {remaining.delta:g}",
    ]
    return "\n".join(lines)


def guarantee_statement(
    covered: Sequence[str], syntactic: Sequence[str], total: PrivacyCost
) -> dict[str, Any]:
    """Which releases the differential-privacy guarantee covers, in words and as lists."""
    text = (
        f"Differential privacy (epsilon = {total.epsilon:g}, delta = {total.delta:g}, "
        f"neighbours differ by one row) covers: {', '.join(covered) or 'no release'}."
    )
    if syntactic:
        text += (
            f" Not covered: {', '.join(syntactic)} -- a k-anonymous table is a syntactic "
            "release whose generalization was chosen from the data; its rows are not "
            "protected by the DP guarantee."
        )
    return {"dp_releases": list(covered), "not_dp_releases": list(syntactic), "statement": text}


def _zcdp_line(summaries: Sequence[dict[str, Any]], total: PrivacyCost) -> list[str]:
    """With Gaussian releases, the tighter zCDP total beside basic composition (informative:
    the ledger charges basic composition)."""
    if total.delta <= 0:
        return []
    rho = sum(s.get("zcdp_rho") or zcdp_of_pure(s["epsilon"]) for s in summaries if s["is_dp"])
    eps = zcdp_to_dp(rho, total.delta)
    return [
        f"- zCDP accounting (Bun & Steinke 2016): rho = {rho:.4g}, i.e. epsilon = {eps:.4g} at "
        f"delta = {total.delta:g} (the ledger charges the basic composition above)"
    ]


def _release_section(s: dict[str, Any]) -> list[str]:
    out = [f"### {s['name']} ({s['kind']})", ""]
    if s["kind"] == "workload":
        out.append(
            f"{s['queries']} queries over {s['cells']} cells; strategy `{s['strategy']}`, "
            f"reconstruction `{s['reconstruction']}`. Expected per-query RMSE of the "
            f"least-squares answers: {s['expected_rmse']:.4g} (SVD lower bound for any "
            f"strategy: {s['svd_bound_rmse']:.4g})."
        )
    elif s["kind"] in ("regression", "clustering"):
        target = f"`{s['target']}` on " if s.get("target") else ""
        features = ", ".join(f"`{f}`" for f in s["features"])
        parts = f"; {len(s['partitions'])} disjoint tasks" if s.get("partitions") else ""
        out.append(
            f"{s['kind'].capitalize()} model of {target}{features} ({s['mechanism']}{parts}); "
            "bounds from the config, parameters and per-part sensitivities in `model.json`."
        )
    else:
        out.append(
            "**Not differentially private**: a syntactic k-anonymity release whose "
            "generalization was chosen by looking at the data."
        )
        out += ["", s["report"]]
    out += ["", "Files: " + ", ".join(f"`{f}`" for f in s["files"]), ""]
    return out


def render_report(
    *,
    dataset: str,
    run_id: str,
    summaries: Sequence[dict[str, Any]],
    table: str,
    ledger_head: tuple[int, str],
    guarantee: dict[str, Any],
) -> str:
    """The run's ``report.md``."""
    lines = [
        f"# dppub release — dataset `{dataset}`, run `{run_id}`",
        "",
        "## Privacy guarantee",
        "",
        guarantee["statement"],
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
        lines += _release_section(s)
    return "\n".join(lines) + "\n"
