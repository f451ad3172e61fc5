"""Narrowing helpers for tests that read JSON-like values (plan details, release records,
audit payloads): each checks what the value is and returns it typed, so a test states the
shape it expects rather than silencing the type checker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def obj(value: object) -> Mapping[str, object]:
    """A JSON object."""
    assert isinstance(value, Mapping), value
    return value


def seq(value: object) -> Sequence[object]:
    """A JSON list."""
    assert isinstance(value, Sequence) and not isinstance(value, str), value
    return value


def num(value: object) -> float:
    """A JSON number (an integer too, not a bool)."""
    assert isinstance(value, int | float) and not isinstance(value, bool), value
    return value


def text(value: object) -> str:
    """A JSON string."""
    assert isinstance(value, str), value
    return value
