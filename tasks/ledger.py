"""Task: the flow-level composition check (the other ledger steps are the run's own methods).

It does not retry: the ledger refuses to record a run's releases twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prefect import task

from dp.budget import PrivacyCost
from dp.ledger import ReleaseRecord
from dp.runs import Run
from tasks._common import PRIVATE, run_logger


def _records(summary: dict[str, Any]) -> list[ReleaseRecord]:
    """The ledger rows of one release: one row, or one per disjoint partition it spans."""
    common = {
        "kind": summary["kind"],
        "mechanism": summary["mechanism"],
        "sensitivity": summary.get("sensitivity"),
        "is_dp": bool(summary["is_dp"]),
        "output_hash": summary["output_hash"],
    }
    parts = summary.get("partitions") or []
    if not parts:
        cost = PrivacyCost(epsilon=summary["epsilon"], delta=summary["delta"])
        return [ReleaseRecord(name=summary["name"], cost=cost, **common)]
    return [
        ReleaseRecord(
            name=p["name"],
            cost=PrivacyCost(epsilon=p["epsilon"], delta=p["delta"]),
            partition=(str(p["partition"][0]), str(p["partition"][1])),
            **common,
        )
        for p in parts
    ]


@task(name="composition-check", **PRIVATE)
def check_composition(
    run: Run, *, summaries: Sequence[dict[str, Any]], planned: PrivacyCost
) -> tuple[int, str]:
    """Record the computed releases, recompute the run's cost *from the ledger rows*, and block
    publication unless it equals both the plan and the reservation. Returns the ledger head."""
    head = run.compose([r for s in summaries for r in _records(s)], planned)
    run_logger().info("composition check passed: epsilon=%g", planned.epsilon)
    return head
