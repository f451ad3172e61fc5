"""Release kind k-anonymity (config section ``anonymize:``, ledger label ``k-anonymity``): the
k-anonymous table, a syntactic release that is *not* DP.

The generalization is chosen by looking at the data (a globally optimal full-domain search on
the QI leaf counts), so the ledger records this release as not differentially private and DP
releases never read its levels. The counting pass and the writing pass go through the engine;
with fewer than k records (no admissible node) every record is suppressed -- the run still
publishes. The table is published as ``table.parquet`` and, copied batch by batch, as
``table.csv`` with the CSV conventions of every released table (RFC 4180 line ends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.anonymity import Hierarchy
from dppub.dp.budget import PrivacyCost
from dppub.dp.engine import DistinctValuesAggregate, anonymize_stream
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.declared_domains import (
    declared_columns,
    declared_hierarchy,
    hierarchy_from_values,
    leaves_from_data,
)
from dppub.dp.pipeline.kinds.base import (
    ExecuteContext,
    Executed,
    ReleaseKind,
    ReleasePlan,
    ReleaseSummary,
    Scan,
    scan_each,
)
from dppub.dp.pipeline.kinds.k_anonymity.item import KAnonymityModel
from dppub.dp.pipeline.kinds.k_anonymity.result import KAnonymityResult
from dppub.dp.pipeline.kinds.previews import Preview
from dppub.dp.pipeline.units import Bounding

__all__ = ["KAnonymityKind", "KAnonymitySpec"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class KAnonymitySpec:
    """What the search needs: the item, the declared hierarchies, and the QIs whose
    hierarchy takes its leaves from the data (their distinct values come from the scan)."""

    cfg: PipelineConfig
    item: KAnonymityModel
    declared: Mapping[str, Hierarchy]
    from_data: tuple[str, ...]


DistinctValues = tuple[list[str], ...]
"""Per QI in :attr:`KAnonymitySpec.from_data`: its distinct values in the rows read."""

_NOT_COVERED = (
    "a k-anonymous table is a syntactic release whose generalization was chosen from the "
    "data; its rows are not protected by the DP guarantee."
)


class KAnonymityKind(ReleaseKind[KAnonymityModel, KAnonymitySpec, DistinctValues]):
    """See the module docstring."""

    section = "anonymize"
    label = "k-anonymity"
    many = False
    model = KAnonymityModel
    result = KAnonymityResult
    plots = "k_anonymity_plot"
    previews = (Preview(file="table.csv", what=": the generalized table"),)

    def plan(self, cfg: PipelineConfig, item: KAnonymityModel) -> ReleasePlan[KAnonymitySpec]:
        qis = item.quasi_identifiers
        columns = declared_columns(cfg, [*qis, *item.include])
        missing = [q for q in qis if q not in cfg.hierarchies]
        if missing:
            raise ConfigError(f"quasi-identifiers without a hierarchy: {missing}")
        declared = {q: declared_hierarchy(cfg, q) for q in qis if not leaves_from_data(cfg, q)}
        from_data = tuple(q for q in qis if leaves_from_data(cfg, q))
        return ReleasePlan(
            name=item.name,
            release_kind=self,
            mechanism="generalization",
            cost=PrivacyCost.zero(),
            is_dp=False,
            columns=columns,
            bounding=Bounding(),  # not DP: it publishes every row, units or not
            spec=KAnonymitySpec(cfg=cfg, item=item, declared=declared, from_data=from_data),
        )

    def scan(self, plan: ReleasePlan[KAnonymitySpec]) -> Scan[DistinctValues]:
        """The distinct codes of the QIs whose hierarchy takes its leaves from the data, over
        the rows this release reads (complete in all of its columns)."""
        return scan_each(
            [DistinctValuesAggregate(q, also=plan.columns) for q in plan.spec.from_data]
        )

    def execute(
        self, plan: ReleasePlan[KAnonymitySpec], exact: DistinctValues, context: ExecuteContext
    ) -> Executed:
        data, out = context.data, context.out
        spec = plan.spec
        item = spec.item
        built = {
            q: hierarchy_from_values(spec.cfg, q, v)
            for q, v in zip(spec.from_data, exact, strict=True)
        }
        hierarchies = {
            q: spec.declared[q] if q in spec.declared else built[q] for q in item.quasi_identifiers
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
        out.copy_as_csv(plan.name, "table")
        out.write_json(plan.name, "metrics.json", result.metrics)
        return Executed(
            result=KAnonymityResult(
                guarantee=f"k={item.k}", levels=result.levels, report=result.to_markdown()
            )
        )

    def report(self, summary: ReleaseSummary) -> list[str]:
        return [
            summary.result_as(KAnonymityResult).report,
            "Published as `table.parquet` and `table.csv` (the same rows; RFC 4180 line ends, "
            "so a label holding a line break is quoted).",
        ]

    def guarantee(self, summary: ReleaseSummary) -> str:
        return f"{summary.result_as(KAnonymityResult).guarantee} (not DP)"

    def not_covered(self, summary: ReleaseSummary) -> str:
        return _NOT_COVERED
