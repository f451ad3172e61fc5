"""The k-anonymous table's typed result: what ``release.json`` states (levels, guarantee)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.pipeline.kinds.base import (
    JSON,
    as_int,
    as_object,
    as_str,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class KAnonymityResult:
    """The released table's public account: its guarantee, levels and ``report.md`` text."""

    guarantee: str
    """``k=5``."""
    levels: Mapping[str, int]
    """The generalization level chosen per quasi-identifier."""
    report: str
    """Its markdown report (utility and risk)."""

    def to_json(self) -> dict[str, JSON]:
        return {"guarantee": self.guarantee, "levels": dict(self.levels), "report": self.report}

    @classmethod
    def from_json(cls, data: Mapping[str, JSON]) -> KAnonymityResult:
        return cls(
            guarantee=as_str(data["guarantee"]),
            levels={k: as_int(v) for k, v in as_object(data["levels"]).items()},
            report=as_str(data["report"]),
        )
