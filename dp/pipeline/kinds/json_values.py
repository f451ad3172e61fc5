"""JSON values as a kind's files hold them, and reading one back checked (a model's
``model.json``, a plan's facts, the manifest): :func:`as_str`, :func:`as_float`... raise
:class:`~dp.errors.InvariantError` on anything else. A release's own result is a typed model
(:class:`dp.pipeline.kinds.release_file.Result`), never read this way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

from dppub.dp.errors import InvariantError

__all__ = ["JSON", "as_float", "as_list", "as_object", "as_str", "as_strs"]

JSON: TypeAlias = "str | int | float | bool | Sequence[JSON] | Mapping[str, JSON] | None"
"""A JSON-ready value (str, number, bool, None, list, dict). Read-only containers
(``Sequence``, ``Mapping``), so a ``list[str]`` or a ``dict[str, float]`` is one too. Reading
one back, :func:`as_str`, :func:`as_float`, :func:`as_object`... check what it is."""


def _wrong(value: JSON, want: str) -> InvariantError:
    return InvariantError(f"expected {want} in a release record, got {value!r}")


def as_str(value: JSON) -> str:
    """A JSON string."""
    if not isinstance(value, str):
        raise _wrong(value, "a string")
    return value


def as_float(value: JSON) -> float:
    """A JSON number (an integer too, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(value, "a number")
    return float(value)


def as_list(value: JSON) -> Sequence[JSON]:
    """A JSON list."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise _wrong(value, "a list")
    return value


def as_strs(value: JSON) -> tuple[str, ...]:
    """A JSON list of strings."""
    return tuple(as_str(v) for v in as_list(value))


def as_object(value: JSON) -> Mapping[str, JSON]:
    """A JSON object."""
    if not isinstance(value, Mapping):
        raise _wrong(value, "an object")
    return value
