"""The k-anonymous table's typed result: what ``release.json`` states (levels, guarantee)."""

from __future__ import annotations

from dppub.dp.pipeline.kinds.base import Result


class KAnonymityResult(Result):
    """The released table's public account: its guarantee, levels and ``report.md`` text."""

    guarantee: str
    """``k=5``."""
    levels: dict[str, int]
    """The generalization level chosen per quasi-identifier."""
    report: str
    """Its markdown report (utility and risk)."""
