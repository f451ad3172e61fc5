"""The process's one stop request, where every long loop can look at it.

A run is interrupted by a signal, and a signal interrupts the whole process: ``dppub run``'s
handler (:mod:`flows.interrupts`) calls :func:`request_stop`, and a release still computing in
another thread (the thread pool, Prefect's task runner) stops at its next safe point, so the run
settles now, not after work it will not publish. The loops that can last long on inputs within
the documented limits -- a vector's noise drawn chunk by chunk (:mod:`dp.mechanisms`), a large
table's files written part by part -- call :func:`check_stop` between parts; what was drawn
before stays charged. Nothing here changes a value: it only decides whether a computation goes
on, and never depends on the data.

Stdlib only (foundations): the privacy core consults it without importing the pipeline, and
the CLI imports it before anything heavy. A release in a dask worker process does not see it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from threading import Event
from typing import TypeVar

from dppub.dp.errors import Stopped

__all__ = ["EVERY", "check_stop", "checked", "clear_stop", "request_stop", "stop_requested"]

_T = TypeVar("_T")
_stop = Event()
EVERY = 1024
"""Items of a Python loop between two looks at the stop request (:func:`checked`): a few
milliseconds of a loop that writes or formats a row."""


def request_stop() -> None:
    """The run of this process was interrupted: stop at the next safe point."""
    _stop.set()


def stop_requested() -> bool:
    """Whether :func:`request_stop` was called since the last :func:`clear_stop`."""
    return _stop.is_set()


def clear_stop() -> None:
    """A new command starts: nothing asks it to stop."""
    _stop.clear()


def check_stop(what: str) -> None:
    """A safe point of ``what`` (a public description, e.g. ``"drawing noise"``): raises
    :class:`~dp.errors.Stopped` once a stop was requested."""
    if _stop.is_set():
        raise Stopped(f"{what} stopped: the run was interrupted")


def checked(items: Iterable[_T], what: str, every: int = EVERY) -> Iterator[_T]:
    """``items``, with :func:`check_stop` before every ``every``-th one (the first included)."""
    for i, item in enumerate(items):
        if i % every == 0:
            check_stop(what)
        yield item
