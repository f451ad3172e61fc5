"""``dppub audit --html FILE``: a self-contained page for people who audit the budget.

One file, no scripts, no external assets: the spending table per dataset and period, an inline
SVG step chart of cumulative epsilon per dataset over time (pending runs count, aborted runs do
not — exactly what the budget check counts), and the list of releases.
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import datetime
from typing import Any

__all__ = ["render_audit_html"]

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
_W, _H, _PAD = 760, 280, 48
MAX_RELEASE_ROWS = 2000


def _series(history: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Cumulative epsilon per dataset at each reservation (aborted runs excluded)."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    total: dict[str, float] = defaultdict(float)
    for h in history:
        if h["event"] != "reserve" or h["state"] in ("aborted", "charged"):
            continue
        total[h["dataset"]] += float(h["epsilon"])
        t = datetime.fromisoformat(str(h["ts"])).timestamp()
        out[h["dataset"]].append((t, total[h["dataset"]]))
    return dict(out)


def _chart(series: dict[str, list[tuple[float, float]]]) -> str:
    if not series:
        return "<p>No reservations yet.</p>"
    times = [t for pts in series.values() for t, _ in pts]
    t0, t1 = min(times), max(times)
    t1 = t1 if t1 > t0 else t0 + 1.0
    top = max(e for pts in series.values() for _, e in pts) * 1.05 or 1.0

    def x(t: float) -> float:
        return _PAD + (t - t0) / (t1 - t0) * (_W - 2 * _PAD)

    def y(e: float) -> float:
        return _H - _PAD + -e / top * (_H - 2 * _PAD)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" '
        'aria-label="cumulative epsilon per dataset">',
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#333"/>',
        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#333"/>',
        f'<text x="{_PAD}" y="{_PAD - 10}" font-size="12">epsilon spent (cumulative)</text>',
        f'<text x="{_PAD - 6}" y="{_PAD + 4}" font-size="11" text-anchor="end">{top:.3g}</text>',
        f'<text x="{_PAD - 6}" y="{_H - _PAD}" font-size="11" text-anchor="end">0</text>',
        f'<text x="{_PAD}" y="{_H - _PAD + 18}" font-size="11">'
        f"{datetime.fromtimestamp(t0).isoformat(timespec='minutes')}</text>",
        f'<text x="{_W - _PAD}" y="{_H - _PAD + 18}" font-size="11" text-anchor="end">'
        f"{datetime.fromtimestamp(t1).isoformat(timespec='minutes')}</text>",
    ]
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = _COLOURS[i % len(_COLOURS)]
        path, prev = [f"M{x(pts[0][0]):.1f},{y(0):.1f}"], 0.0
        for t, e in pts:  # a step: spending jumps at each reservation
            path += [f"L{x(t):.1f},{y(prev):.1f}", f"L{x(t):.1f},{y(e):.1f}"]
            prev = e
        parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        ly = _PAD + 16 * i
        parts.append(
            f'<text x="{_W - _PAD - 4}" y="{ly}" font-size="12" fill="{colour}" '
            f'text-anchor="end">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_audit_html(payload: dict[str, Any], history: list[dict[str, Any]]) -> str:
    """The audit page for an ``audit --json`` payload and the ledger's history."""
    spend_rows = [
        [
            name,
            d["budget_text"],
            f"{d['lifetime_spent_epsilon']:.6g}",
            f"{d['remaining_epsilon']:.6g}",
            d["runs"],
            d["charged_runs"],
            d["pending_runs"],
        ]
        for name, d in payload["datasets"].items()
    ]
    releases = [h for h in history if h["event"] == "release"]
    shown = releases[-MAX_RELEASE_ROWS:]
    release_rows = [
        [
            h["ts"],
            h["dataset"],
            h["period"],
            h["run_id"],
            h["release"],
            h["kind"],
            h["mechanism"],
            f"{h['epsilon']:.6g}",
            f"{h['delta']:.3g}",
            "yes" if h["is_dp"] else "no (syntactic)",
            h["state"],
        ]
        for h in reversed(shown)
    ]
    chain = "intact" if payload["chain_ok"] else "BROKEN"
    problems = "".join(f"<li>{html.escape(p)}</li>" for p in payload["problems"])
    note = (
        f"<p>Showing the latest {len(shown)} of {len(releases)} releases.</p>"
        if len(shown) < len(releases)
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dppub budget audit</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }}
th {{ background: #f3f3f3; }}
.ok {{ color: #2a7a2a; }} .bad {{ color: #b00020; font-weight: bold; }}
</style></head><body>
<h1>dppub privacy-budget audit</h1>
<p>Hash chain: <span class="{"ok" if payload["chain_ok"] else "bad"}">{chain}</span>
({payload["rows"]} rows, head <code>{html.escape(payload["head"])}</code>)</p>
<ul>{problems}</ul>
<h2>Spending per dataset and period</h2>
{
        _table(
            [
                "dataset",
                "budget",
                "spent ε (lifetime)",
                "remaining ε",
                "runs",
                "charged",
                "pending",
            ],
            spend_rows,
        )
    }
<h2>Cumulative spending</h2>
{_chart(_series(history))}
<h2>Releases</h2>
{note}
{
        _table(
            [
                "time",
                "dataset",
                "period",
                "run",
                "release",
                "kind",
                "mechanism",
                "ε",
                "δ",
                "DP",
                "run state",
            ],
            release_rows,
        )
    }
</body></html>
"""
