"""What a release's computation may call back while it runs, given by the step computing it.

The step (:func:`dp.pipeline.publish.compute`: its logger, and :func:`stop_requested`) gives
:func:`dp.pipeline.execute.compute_release` its :class:`Hooks`, which hands them to the kind's
``execute`` in its explicit :class:`~dp.pipeline.kinds.base.ExecuteContext`; a kind with a long
loop calls them -- AIM's rounds (:mod:`dp.pipeline.kinds.synthetic.kind`).

:func:`request_stop` is the process's one stop request: ``dppub run``'s signal handler
(:mod:`dppub.interrupts`) makes it when a signal interrupts the run, so releases still
computing stop at their next safe point and the run settles now, not after work it will not
publish. It lives in :mod:`dp.stopping` (foundations), where the privacy core's long loops
consult it too. Stdlib only: the CLI imports this before anything heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dppub.dp.stopping import clear_stop, request_stop, stop_requested

__all__ = ["Hooks", "clear_stop", "request_stop", "stop_requested"]


def _quiet(_line: str) -> None:
    return None


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Hooks:
    """The step's callbacks for one release (inert by default)."""

    progress: Callable[[str], None] = _quiet
    """Logs one line of progress. Public values only (a round's number, a share of the
    budget): never a count, a value or anything else computed from the data."""
    should_stop: Callable[[], bool] = _never
    """True once the run was interrupted: stop at the next safe point and raise
    :class:`~dp.errors.Stopped` (what was drawn stays charged)."""
