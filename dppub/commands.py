"""What ``dppub audit``, ``recover`` and ``budget amend`` do, apart from parsing arguments and
printing (:mod:`dppub.cli`); ``plan`` and ``run`` are :mod:`dppub.api` and :mod:`dppub.run`,
``serve`` and ``deploy`` :mod:`flows.deploy`.

Each function raises dppub's own errors; the CLI turns them into one line and an exit code
(:mod:`dppub.failures`). None imports Prefect.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dppub.dp.errors import InvariantError
from dppub.dp.ledger import Declaration, Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.kinds.series.series_store import series_runs

if TYPE_CHECKING:
    from dppub.dp.pipeline.kinds import JSON
    from dppub.dp.runs import Recovered

# The pipeline is imported by the commands that plan, the run protocol (pandas) by those that
# settle: `dppub audit` needs only the ledger.

__all__ = [
    "amend",
    "audit_lines",
    "audit_payload",
    "settle_dead",
    "write_audit_page",
]


def settle_dead(ledger: str, dataset: str | None) -> list[Recovered]:
    """Settle every pending run of a dead process (of one dataset, or all)."""
    from dppub.dp.runs import recover

    book = Ledger(ledger, create=False)
    keys = [d.key for d in book.declarations() if dataset in (None, d.name)]
    return [r for k in keys for r in recover(book, key=k)]


def audit_payload(ledger: str, dataset: str | None) -> dict[str, JSON]:
    """The whole chain verified, and each dataset's spending (``audit --json``)."""
    book = Ledger(ledger, create=False)
    chain = book.verify()
    return {
        "chain_ok": chain.ok,
        "rows": chain.rows,
        "head": chain.head,
        "problems": list(chain.problems),
        "datasets": spending_summary(book, dataset),
        "series": series_runs(book, dataset),  # type: ignore[dict-item]
    }


def audit_lines(payload: Mapping[str, JSON]) -> list[str]:
    """The text form of an audit (:func:`audit_payload`)."""
    line = "{:<24} {:>8} {:>9} {:>9} {:>5} {:>7} {:>7} {:>7}"
    heads = ("dataset", "budget", "spent", "remaining", "runs", "charged", "pending", "aborted")
    out = [line.format(*heads)]
    for name, value in _object(payload["datasets"]).items():
        d = _object(value)
        spent, left = d["lifetime_spent_epsilon"], d["remaining_epsilon"]
        counts = (d["runs"], d["charged_runs"], d["pending_runs"], d["aborted_runs"])
        out.append(
            line.format(name, f"{d['budget_epsilon']:g}", f"{spent:g}", f"{left:g}", *counts)
        )
        out.append(f"  neighbours: {'; '.join(_texts(d['neighbours'])) or 'nothing published yet'}")
        for a in map(_object, _list(d["amendments"])):
            changes = "; ".join(_texts(a["changes"]))
            out.append(f"  amended {a['ts']} by {a['who']}: {changes} ({a['why']})")
        for s in map(_object, _list(payload.get("series", []))):
            if s["dataset"] == name:  # one line per series: each run's last period
                periods = _texts(s["periods"])
                out.append(
                    f"  series {s['series']}: {len(periods)} run(s) published up to "
                    f"{', '.join(periods)}; epsilon {s['epsilon']:g}"
                )
    state = "ok" if payload["chain_ok"] else "BROKEN"
    head = payload["head"]
    if not isinstance(head, str):
        raise InvariantError(f"expected the chain head as text in an audit, got {head!r}")
    out.append(f"hash chain: {state} ({payload['rows']} rows, head {head[:16]}…)")
    out += [f"  {p}" for p in _list(payload["problems"])]
    return out


def _object(value: JSON) -> Mapping[str, JSON]:
    if not isinstance(value, Mapping):
        raise InvariantError(f"expected an object in an audit, got {value!r}")
    return value


def _list(value: JSON) -> Sequence[JSON]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvariantError(f"expected a list in an audit, got {value!r}")
    return value


def _texts(value: JSON) -> list[str]:
    texts = [v for v in _list(value) if isinstance(v, str)]
    if len(texts) != len(_list(value)):
        raise InvariantError(f"expected a list of text in an audit, got {value!r}")
    return texts


def write_audit_page(ledger: str, payload: dict[str, JSON], target: Path) -> None:
    """The self-contained audit page."""
    from dppub.dp.pipeline.audit_page import render_audit_html

    history = Ledger(ledger, create=False).history()
    try:
        target.write_text(render_audit_html(payload, history), encoding="utf-8")
    except OSError as exc:  # a write error carries no file name: name the page
        raise OSError(exc.errno, exc.strerror, str(target)) from None


def amend(config: Path, ledger: str | None, reason: str, timeout: float) -> Declaration:
    """Record the config's budget, name and source for its data (``budget amend``)."""
    from dppub.dp.pipeline.plan import ledger_for, load_plan

    cfg = load_plan(config).config
    book = Ledger(ledger_for(cfg, ledger), timeout=timeout, create=False)
    return book.amend(
        data=cfg.data_identity, policy=cfg.budget_policy, who=getpass.getuser(), why=reason
    )
