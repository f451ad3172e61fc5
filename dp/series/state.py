"""What a series keeps between its runs: already-private values only, sealed by a digest.

A run of a series needs the noisy measurements of every earlier period (to estimate the new
one consistently with them) and, without revisions, the values published so far. Both are
outputs of the mechanism: storing them costs no privacy. Nothing else is kept -- no exact value,
no raw noise, no row: a measurement that needs earlier periods' data reads them again from the
source (:meth:`dp.series.period_release.SeriesRelease.measure`).

The state is one JSON document; its :attr:`SeriesState.digest` (SHA-256 of the canonical form,
floats written exactly as ``repr``) is what the ledger records with each run, so the next run
refuses a state that was lost, replaced or edited (:func:`load_state`) before it reserves
anything.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppub.dp.errors import InputError
from dppub.dp.series.workloads import FloatArray

__all__ = ["SeriesState", "load_state"]

_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesState:
    """A series after its latest run."""

    name: str
    """The series' name in the config."""
    strategy: str
    """The strategy's name (a state belongs to one strategy over one horizon)."""
    horizon: int
    periods: tuple[str, ...]
    """The labels of the periods published, in order (a skipped period is not among them)."""
    last: int
    """The index in the horizon of the last period measured."""
    columns: tuple[str, ...]
    """One label per series (a group of the declared keys and a measure)."""
    measurements: FloatArray
    """Every noisy row measured so far (``rows x columns``)."""
    published: FloatArray
    """The period values published so far (``(last + 1) x columns``; without revisions they
    never change), at full precision: the published files show them rounded, and later
    periods are estimated from these."""

    def to_json(self) -> str:
        """The canonical document (sorted keys, floats exactly as ``repr``)."""
        body: dict[str, Any] = {
            "format": _FORMAT,
            "name": self.name,
            "strategy": self.strategy,
            "horizon": self.horizon,
            "periods": list(self.periods),
            "last": self.last,
            "columns": list(self.columns),
            "measurements": self.measurements.tolist(),
            "published": self.published.tolist(),
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)

    @property
    def digest(self) -> str:
        """SHA-256 of :meth:`to_json`: what the ledger records with the run."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()


def load_state(text: str, digest: str, *, name: str, strategy: str, horizon: int) -> SeriesState:
    """The state the ledger's ``digest`` seals, for the series ``name`` under ``strategy``.

    Raises:
        InputError: one line: the document does not match the digest (edited or replaced), is
            not a state document, or belongs to another series, strategy or horizon.
    """
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
        raise InputError(
            f"series {name!r}: the stored state does not match the ledger's digest "
            "(edited or replaced): nothing published"
        )
    try:
        raw = json.loads(text)
        if raw["format"] != _FORMAT:
            raise ValueError("another format")
        state = SeriesState(
            name=str(raw["name"]),
            strategy=str(raw["strategy"]),
            horizon=int(raw["horizon"]),
            periods=tuple(str(p) for p in raw["periods"]),
            last=int(raw["last"]),
            columns=tuple(str(c) for c in raw["columns"]),
            measurements=_matrix(raw["measurements"], len(raw["columns"])),
            published=_matrix(raw["published"], len(raw["columns"])),
        )
    except (KeyError, TypeError, ValueError):
        raise InputError(f"series {name!r}: the stored state is not a series state") from None
    if (state.name, state.strategy, state.horizon) != (name, strategy, horizon):
        raise InputError(
            f"series {name!r}: the stored state is of series {state.name!r} under "
            f"{state.strategy} over {state.horizon} periods, not {strategy} over {horizon}"
        )
    return state


def _matrix(rows: Any, columns: int) -> FloatArray:
    out = np.asarray(rows, dtype=np.float64).reshape(-1, columns)
    if not np.all(np.isfinite(out)):
        raise ValueError("not finite")
    out.setflags(write=False)
    return out
