"""Tasks: the ledger steps of a run (reserve, composition check, commit, abort).

None of them retries: a reservation or commit that might have gone through must not be repeated
blindly (the ledger itself refuses a second reservation for the same run id).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prefect import task

from dp.budget import PrivacyCost
from dp.errors import InvariantError
from dp.ledger import Ledger, ReleaseRecord
from dp.periods import Period
from dp.publication import Staging
from dp.runs import open_run
from tasks._common import PRIVATE, run_logger


@task(name="reserve-budget", **PRIVATE)
def reserve_budget(
    ledger: Ledger,
    out_dir: str,
    *,
    dataset: str,
    cost: PrivacyCost,
    budget: PrivacyCost,
    config_hash: str,
    per: Period | None,
) -> tuple[Staging, PrivacyCost]:
    """Lock the run and hold its planned cost; raises BudgetExceededError if it does not fit."""
    staging, left = open_run(
        ledger,
        out_dir,
        dataset=dataset,
        cost=cost,
        budget=budget,
        config_hash=config_hash,
        per=per,
    )
    run_logger().info(
        "run %s reserved epsilon=%g delta=%g on %r; %g epsilon left",
        staging.run_id,
        cost.epsilon,
        cost.delta,
        dataset,
        left.epsilon,
    )
    return staging, left


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
    ledger: Ledger, *, run_id: str, summaries: Sequence[dict[str, Any]], planned: PrivacyCost
) -> tuple[int, str]:
    """Record the computed releases, recompute the run's cost *from the ledger rows*, and block
    publication unless it equals both the plan and the reservation. Returns the ledger head."""
    ledger.record_releases(run_id=run_id, releases=[r for s in summaries for r in _records(s)])
    reserved, recomputed = ledger.recorded_cost(run_id)
    for label, other in (("planned", planned), ("reserved", reserved)):
        if (
            abs(recomputed.epsilon - other.epsilon) > 1e-9
            or abs(recomputed.delta - other.delta) > 1e-12
        ):
            raise InvariantError(
                f"composition check failed: releases cost epsilon={recomputed.epsilon:g} "
                f"delta={recomputed.delta:g}, {label} epsilon={other.epsilon:g} "
                f"delta={other.delta:g}; nothing was published"
            )
    run_logger().info("composition check passed: epsilon=%g", recomputed.epsilon)
    return ledger.head()


@task(name="commit-run", **PRIVATE)
def commit_run(ledger: Ledger, *, run_id: str, output_hash: str) -> tuple[int, str]:
    ledger.commit(run_id=run_id, output_hash=output_hash)
    return ledger.head()


@task(name="abort-run", **PRIVATE)
def abort_run(ledger: Ledger, *, run_id: str) -> None:
    ledger.abort(run_id=run_id)
