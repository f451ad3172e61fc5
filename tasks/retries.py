"""The one retry policy of a publication, free of Prefect: only reading the input retries, and
only on the machine's I/O errors (a task that draws noise never retries: a retry would draw a
second, independent noisy answer). The Prefect task (:func:`tasks.releases.read_source`) and a
run without Prefect (:mod:`dppub.run`) both take it from here."""

from __future__ import annotations

from dppub.dp.errors import DPPubError

__all__ = ["READ_RETRIES", "READ_RETRY_DELAY_SECONDS", "retryable"]

READ_RETRIES = 2
"""Retries of reading the source after its first attempt."""
READ_RETRY_DELAY_SECONDS = 1
"""Wait before each retry."""


def retryable(exc: BaseException | None) -> bool:
    """Transient OS errors only; dppub's own errors (validation, bad input) are final."""
    return isinstance(exc, OSError) and not isinstance(exc, DPPubError)
