"""What ``dppub plan`` shows about a planned release beyond its cost, typed.

A kind states it in :meth:`~dp.pipeline.kinds.base.ReleaseKind.describe` as its own pydantic
model (the kind's ``facts``, in its package's ``facts`` module), a subclass of
:class:`PlanFacts`; ``dppub plan`` prints it in the kind's words
(:meth:`~dp.pipeline.kinds.base.ReleaseKind.plan_text`, reading the model's fields) and
``dppub plan --json`` writes its JSON (:meth:`PlanFacts.to_json`: fields in declaration order,
a None left out unless the model keeps it, as in ``release.json``). Data-independent: nothing
in it is computed from a row.
"""

from __future__ import annotations

from typing import TypeVar

from dppub.dp.errors import InvariantError
from dppub.dp.pipeline.kinds.release_file import Stated

__all__ = ["PlanFacts", "facts_as"]

F = TypeVar("F", bound="PlanFacts")


class PlanFacts(Stated):
    """A planned release's facts, as ``dppub plan`` shows them (the base of every kind's
    model; by itself, a kind that states nothing beyond its cost)."""


def facts_as(facts: PlanFacts, model: type[F]) -> F:
    """``facts`` as the kind's own model (what its :meth:`plan_text` reads them as)."""
    if not isinstance(facts, model):
        raise InvariantError(f"plan facts are a {type(facts).__name__}, not a {model.__name__}")
    return facts
