"""Release kind ``anonymize``: the k-anonymous table, a syntactic release that is *not* DP.

The generalization is chosen by looking at the data (a globally optimal full-domain search on
the QI leaf counts), so the ledger records this release as not differentially private and DP
releases never read its levels. The counting pass and the writing pass go through the engine;
with fewer than k records (no admissible node) every record is suppressed -- the run still
publishes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from dp.budget import PrivacyCost
from dp.engine import Aggregate, DistinctValuesAggregate, TableSource, anonymize_stream
from dp.errors import ConfigError
from dp.pipeline.config import Flag, Integer, Model, Name, Number, PipelineConfig
from dp.pipeline.domains import (
    declared_columns,
    declared_hierarchy,
    hierarchy_from_values,
    leaves_from_data,
)
from dp.pipeline.kinds import JSON, Executed, ReleasePlan, ReleaseSummary
from dp.pipeline.units import Bounding
from dp.publication import Staging

__all__ = ["AnonymityKind", "AnonymizeModel"]


class AnonymizeModel(Model):
    name: Name = "k_anonymous_table"
    quasi_identifiers: list[str] = Field(min_length=1)
    k: Integer = Field(ge=1)
    max_suppression: Number = Field(default=0.0, ge=0.0, le=1.0)
    metric: Literal["loss", "dm", "dm_star", "entropy"] = "loss"
    include: list[str] = Field(default_factory=list)
    """Further columns released unchanged beside the generalized quasi-identifiers."""
    publish: Flag = True


class AnonymityKind:
    """See the module docstring."""

    section = "anonymize"
    label = "k-anonymity"
    many = False
    model = AnonymizeModel

    def plan(self, cfg: PipelineConfig, item: AnonymizeModel) -> ReleasePlan:
        qis = item.quasi_identifiers
        columns = declared_columns(cfg, [*qis, *item.include])
        missing = [q for q in qis if q not in cfg.hierarchies]
        if missing:
            raise ConfigError(f"quasi-identifiers without a hierarchy: {missing}")
        declared = {q: declared_hierarchy(cfg, q) for q in qis if not leaves_from_data(cfg, q)}
        from_data = tuple(q for q in qis if leaves_from_data(cfg, q))
        return ReleasePlan(
            name=item.name,
            kind=self.label,
            mechanism="generalization",
            cost=PrivacyCost.zero(),
            is_dp=False,
            columns=columns,
            bounding=Bounding(),  # not DP: it publishes every row, units or not
            spec=(cfg, item, declared, from_data),
        )

    def describe(self, plan: ReleasePlan) -> Mapping[str, JSON]:
        return plan.facts

    def aggregates(self, plan: ReleasePlan) -> Sequence[Aggregate[Any, Any]]:
        """The distinct codes of the QIs whose hierarchy takes its leaves from the data, over
        the rows this release reads (complete in all of its columns)."""
        from_data = plan.spec[3]
        return [DistinctValuesAggregate(q, also=plan.columns) for q in from_data]

    def execute(
        self, plan: ReleasePlan, exact: Sequence[Any], data: TableSource, out: Staging
    ) -> Executed:
        cfg, item, declared, from_data = plan.spec
        built = {q: hierarchy_from_values(cfg, q, v) for q, v in zip(from_data, exact, strict=True)}
        hierarchies = {
            q: declared[q] if q in declared else built[q] for q in item.quasi_identifiers
        }
        result = anonymize_stream(
            data.path,
            data.schema,
            hierarchies,
            out=out.release_dir(plan.name) / "table.parquet",
            include=item.include,
            k=item.k,
            max_suppression=item.max_suppression,
            metric=item.metric,
            suppress_if_impossible=True,
            backend=data.backend,
        )
        out.write_json(plan.name, "metrics.json", result.metrics)
        details = {
            "guarantee": f"k={item.k}",
            "levels": result.levels,
            "report": result.to_markdown(),
        }
        return Executed(details=details)

    def report(self, summary: ReleaseSummary) -> list[str]:
        return [str(summary.details["report"])]
