"""JSON values as a kind's files hold them, and reading one back checked (a model's
``model.json``, a table's component facts): :func:`as_str`, :func:`as_strs`,
:func:`as_object` raise :class:`~dp.errors.InvariantError` on anything else. A release's own
result and its plan's facts are typed models (:class:`dp.pipeline.kinds.release_file.Result`,
:class:`dp.pipeline.kinds.plan_facts.PlanFacts`), never read this way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

from dppub.dp.errors import InvariantError

__all__ = ["JSON", "as_object", "as_str", "as_strs"]

JSON: TypeAlias = "str | int | float | bool | Sequence[JSON] | Mapping[str, JSON] | None"
"""A JSON-ready value (str, number, bool, None, list, dict). Read-only containers
(``Sequence``, ``Mapping``), so a ``list[str]`` or a ``dict[str, float]`` is one too. Reading
one back, :func:`as_str`, :func:`as_strs`, :func:`as_object` check what it is."""


def _wrong(value: JSON, want: str) -> InvariantError:
    return InvariantError(f"expected {want} in a release record, got {value!r}")


def as_str(value: JSON) -> str:
    """A JSON string."""
    if not isinstance(value, str):
        raise _wrong(value, "a string")
    return value


def as_strs(value: JSON) -> tuple[str, ...]:
    """A JSON list of strings."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise _wrong(value, "a list")
    return tuple(as_str(v) for v in value)


def as_object(value: JSON) -> Mapping[str, JSON]:
    """A JSON object."""
    if not isinstance(value, Mapping):
        raise _wrong(value, "an object")
    return value
