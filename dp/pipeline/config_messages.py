"""One line for a config pydantic refuses, in the words of the file the user wrote.

pydantic reports every way a value failed: a misspelt key is an unknown key *and* a missing
required one (``epsilom`` read as "epsilon: Field required"), and a value that matches no
alternative of a union fails once per alternative, each under a tag of pydantic's own
(``measures.1."literal['count']"``). :func:`validation_message` reads them back from the
model's types: an unknown key names the nearest allowed key (difflib), a value that matches
no alternative names the alternatives, and pydantic's tags never show.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

__all__ = ["validation_message"]

_Loc = tuple[int | str, ...]
_SCALARS = {str: "text", float: "a number", int: "a whole number", bool: "true or false"}


def _strip(t: Any) -> Any:
    while typing.get_origin(t) is typing.Annotated:
        t = typing.get_args(t)[0]
    return t


def _alternatives(t: Any) -> list[Any]:
    """A union's alternatives (``None`` left out: pydantic tags only real choices), else [t]."""
    t = _strip(t)
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return [_strip(a) for a in typing.get_args(t) if a is not type(None)]
    return [t]


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _keys(model: type[BaseModel], hidden: Collection[str]) -> dict[str, Any]:
    """The keys a model accepts (as written in YAML) and their types."""
    return {f.alias or n: f.annotation for n, f in model.model_fields.items() if n not in hidden}


def _step(t: Any, part: int | str) -> Any:
    """The type one location part below ``t`` (None once it is not a container or a model)."""
    choices = _alternatives(t)
    if len(choices) > 1:  # pydantic names the alternative it tried: a model by its class name
        return next((c for c in choices if _is_model(c) and c.__name__ == part), None)
    (t,) = choices
    if _is_model(t):
        return _keys(t, ()).get(str(part))
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin in (list, tuple, set, frozenset, Sequence) and args and isinstance(part, int):
        return args[0] if len(args) == 1 or args[-1] is Ellipsis else args[min(part, len(args) - 1)]
    return None


def _types(root: type[BaseModel], loc: _Loc) -> list[Any]:
    """``out[i]``: the type of the value at ``loc[:i]``."""
    out: list[Any] = [root]
    for part in loc:
        out.append(None if out[-1] is None else _step(out[-1], part))
    return out


def _union_at(root: type[BaseModel], loc: _Loc) -> int | None:
    """Where the first union with a choice lies on ``loc`` (``loc[i]`` is then pydantic's tag)."""
    along = _types(root, loc)
    return next((i for i in range(len(loc)) if len(_alternatives(along[i])) > 1), None)


def _where(loc: _Loc) -> str:
    parts = (str(p) if str(p).isidentifier() or isinstance(p, int) else repr(p) for p in loc)
    return ".".join(parts) or "(top level)"


def _nearest(word: object, allowed: Collection[str]) -> str | None:
    close = difflib.get_close_matches(str(word), list(allowed), n=1, cutoff=0.6)
    return close[0] if close else None


def _unknown_key(parent: _Loc, key: object, allowed: Collection[str]) -> tuple[str, str | None]:
    near = _nearest(key, allowed)
    if near is not None:
        return f"{_where(parent)}: unknown key {key!r} (did you mean {near!r}?)", near
    return f"{_where(parent)}: unknown key {key!r}; allowed: {', '.join(sorted(allowed))}", None


def _plain(loc: _Loc, e: ErrorDetails) -> str:
    msg = str(e["msg"]).removeprefix("Value error, ")
    if e["type"] == "literal_error":  # echo the bad value: `engine: pandas` is no more
        msg += f", got {e['input']!r}"
    return f"{_where(loc)}: {msg}"


def _describe(t: Any) -> str:
    if typing.get_origin(t) is typing.Literal:
        return ", ".join(repr(v) for v in typing.get_args(t))
    if _is_model(t):
        required = [k for k, f in t.model_fields.items() if f.is_required()]
        return "{" + ", ".join(f"{k}: ..." for k in required) + "}"
    return _SCALARS.get(t, getattr(t, "__name__", str(t)))


def _one_of(loc: _Loc, choices: list[Any], value: object, found: bool) -> str:
    """``measures.1: expected one of 'count', {sum: ...}, ...; got {'avg': 'income'}``."""
    names = [
        str(v)
        for c in choices
        if typing.get_origin(c) is typing.Literal
        for v in typing.get_args(c)
    ]
    names += [next(iter(c.model_fields)) for c in choices if _is_model(c)]
    said = next(iter(value)) if isinstance(value, dict) and len(value) == 1 else value
    near = _nearest(said, names) if isinstance(said, str) else None
    got = f"; got {value!r}" if found else ""
    hint = f" (did you mean {near!r}?)" if near is not None else ""
    return f"{_where(loc)}: expected one of {', '.join(map(_describe, choices))}{got}{hint}"


def _union(
    root: type[BaseModel], errors: list[ErrorDetails], u: int, loc: _Loc, hidden: Collection[str]
) -> tuple[str, list[ErrorDetails]]:
    """The line for a value at ``loc[:u]`` that matched no alternative, and the errors it
    explains."""
    at = loc[:u]
    group = [e for e in errors if tuple(e["loc"][:u]) == at and len(e["loc"]) > u]
    choices = _alternatives(_types(root, loc)[u])
    # The value itself: a scalar alternative's error (or a model's "not a mapping") is on the
    # value; a model alternative's missing key is reported with the mapping it is missing from.
    found = [e for e in group if len(e["loc"]) == u + 1 or e["type"] == "missing"]
    value = found[0]["input"] if found else None
    models = [c for c in choices if _is_model(c)]
    if isinstance(value, dict) and models:
        best = max(models, key=lambda m: len(set(value) & set(_keys(m, hidden))))
        own = [e for e in group if e["loc"][u] == best.__name__]
        if own and set(value) & set(_keys(best, hidden)):  # the alternative it was meant as
            e = next((x for x in own if x["type"] == "extra_forbidden"), own[0])
            rest = at + tuple(e["loc"][u + 1 :])
            if e["type"] == "extra_forbidden":
                return _unknown_key(rest[:-1], rest[-1], _keys(best, hidden))[0], group
            return _plain(rest, e), group
    return _one_of(at, choices, value, bool(found)), group


def validation_message(
    path: Path,
    exc: ValidationError,
    model: type[BaseModel],
    *,
    hidden: Collection[str] = (),
    dataset_file: Path | None = None,
) -> str:
    """One line for the first problem pydantic found in the config at ``path`` (validated
    against ``model``; ``hidden`` fields are set by the loader, never written): an unknown key
    first, as it explains the missing one it was meant to be.

    A problem under ``dataset`` names ``dataset_file`` when the config refers to one.
    """
    errors = exc.errors()
    unknown = [
        e
        for e in errors
        if e["type"] == "extra_forbidden" and _union_at(model, tuple(e["loc"])) is None
    ]
    explained: list[ErrorDetails]
    if unknown:
        e = unknown[0]
        parent = tuple(e["loc"][:-1])
        owner = _types(model, parent)[-1]
        allowed = _keys(owner, hidden) if _is_model(owner) else {}
        line, meant = _unknown_key(parent, e["loc"][-1], allowed)
        explained = [e] + [
            x for x in errors if x["type"] == "missing" and tuple(x["loc"]) == (*parent, meant)
        ]
    else:
        e = errors[0]
        loc = tuple(e["loc"])
        u = _union_at(model, loc)
        line, explained = (
            (_plain(loc, e), [e]) if u is None else _union(model, errors, u, loc, hidden)
        )
    more = len(errors) - len(explained)
    where = dataset_file if dataset_file is not None and e["loc"][:1] == ("dataset",) else path
    return f"{where}: {line}" + (f" (and {more} more)" if more > 0 else "")
