"""``dppub audit --html FILE``: a self-contained page for people who audit the budget.

One file, no scripts, no external assets (:mod:`dp.pipeline.html`): the chain check, each
dataset's budget and spending, a step chart of its spending over time against its budget,
its spending per period, the runs that were charged but not published, its amendments, its
releases by label (a trace regression's tasks as ``release[task]``, as the ledger records
them), and the latest release rows.

A run counts what the budget check counts: committed and pending runs their reservation,
charged runs the composition of their draws (from the audit), aborted runs nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from dppub.dp.pipeline.html import render_page
from dppub.dp.pipeline.html.figures import style
from dppub.dp.pipeline.html.spending_chart import RunPoint, Series, spending_chart

__all__ = ["MAX_RELEASE_ROWS", "dataset_runs", "release_labels", "render_audit_html"]

MAX_RELEASE_ROWS = 2000
"""Release rows listed at the end of the page (the latest ones)."""


def _key_names(payload: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The audited dataset (its current name) each ledger identity key belongs to.

    History rows carry the name a dataset had when they were written and the identity key
    (the source it was first declared with); the audit names datasets as they are now.
    """
    datasets: Mapping[str, Mapping[str, Any]] = payload["datasets"]
    by_source = {str(d.get("key", d["source"])): name for name, d in datasets.items()}
    out: dict[str, str] = {}
    for h in history:
        key = str(h["source"])
        if key in by_source:
            out[key] = by_source[key]
        elif h["dataset"] in datasets:  # a source amended since: the name still says
            out.setdefault(key, str(h["dataset"]))
    return out


def dataset_runs(
    payload: Mapping[str, Any], history: Sequence[Mapping[str, Any]]
) -> dict[str, list[RunPoint]]:
    """Each audited dataset's runs that cost something, oldest first."""
    keys = _key_names(payload, history)
    charged = {
        c["run_id"]: float(c["epsilon"]) for d in payload["datasets"].values() for c in d["charged"]
    }
    out: dict[str, list[RunPoint]] = defaultdict(list)
    for h in history:
        if h["event"] != "reserve" or h["state"] == "aborted" or h["source"] not in keys:
            continue
        run_id = str(h["run_id"])
        epsilon = charged.get(run_id, 0.0) if h["state"] == "charged" else float(h["epsilon"])
        out[keys[str(h["source"])]].append(
            RunPoint(
                ts=datetime.fromisoformat(str(h["ts"])),
                epsilon=epsilon,
                state=str(h["state"]),
                period=str(h["period"]),
            )
        )
    return dict(out)


def release_labels(
    payload: Mapping[str, Any], history: Sequence[Mapping[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Per dataset, one row per published release label: how often, at what cost, when."""
    keys = _key_names(payload, history)
    rows: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for h in history:
        if h["event"] != "release" or h["state"] != "committed" or h["source"] not in keys:
            continue
        label = str(h["release"])
        row = rows[keys[str(h["source"])]].setdefault(
            label,
            {"label": label, "kind": h["kind"], "mechanism": h["mechanism"], "runs": 0,
             "epsilon": 0.0, "first": h["ts"], "is_dp": bool(h["is_dp"]),
             "neighbours": h.get("neighbours") or "one row"},
        )  # fmt: skip
        row["runs"] += 1
        row["epsilon"] += float(h["epsilon"])
        row["last"] = h["ts"]
        row["last_epsilon"] = float(h["epsilon"])
        row["neighbours"] = h.get("neighbours") or "one row"  # as of the latest release
    return {name: list(labels.values()) for name, labels in rows.items()}


def _draws(history: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The releases each run recorded a draw for (what a charged run paid for)."""
    out: dict[str, list[str]] = defaultdict(list)
    for h in history:
        if h["event"] == "draw":
            out[str(h["run_id"])].append(str(h["release"]))
    return out


def render_audit_html(payload: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> str:
    """The audit page for an ``audit --json`` payload and the ledger's history rows."""
    runs = dataset_runs(payload, history)
    charts = {}
    with style():
        for name, d in payload["datasets"].items():
            if not runs.get(name):
                continue
            policy = d["budget"]
            series = Series(
                name=name,
                runs=runs[name],
                budget=float(d["budget_epsilon"]),
                renew=bool(policy.get("renew")),
                cap=None if policy.get("cap") is None else float(policy["cap"][0]),
            )
            charts[name] = spending_chart(series)
    releases = [h for h in history if h["event"] == "release"]
    return render_page(
        "audit.html.j2",
        payload=payload,
        charts=charts,
        labels=release_labels(payload, history),
        draws=_draws(history),
        releases=list(reversed(releases[-MAX_RELEASE_ROWS:])),
        release_count=len(releases),
    )
