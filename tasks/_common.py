"""Settings shared by every task that touches private data.

* ``cache_policy=NONE``: no cache key is ever computed from (hashed) private inputs — a key
  derived from an exact count can be inverted by brute force.
* ``persist_result=False``: nothing a task returns (tables, exact statistics) reaches Prefect's
  result storage.
* No retries on tasks that draw noise: a retry would draw a second, independent noisy answer.
  Only pure I/O (reading the input) retries, and only on I/O errors.
"""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from prefect import Task, get_run_logger
from prefect.cache_policies import NONE, CachePolicy
from prefect.client.schemas.objects import State, TaskRun
from prefect.exceptions import MissingContextError

from dppub.tasks.retries import retryable


class Private(TypedDict):
    """The settings of a task that touches private data."""

    cache_policy: CachePolicy
    persist_result: bool
    retries: int


PRIVATE = Private(cache_policy=NONE, persist_result=False, retries=0)


def retry_on_io_error(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry condition: transient OS errors only; validation errors are final. (Prefect's
    retry condition takes a task and a state of any result: its own ``Any``.)"""
    return retryable(state.result(raise_on_failure=False))


def run_logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's run logger inside a run; a plain ``dppub`` logger when a task body is called
    directly (tests, or reuse outside Prefect)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("dppub")
