"""The one place an exception becomes what ``dppub`` says: one line and an exit code.

2 for configuration / environment / input / ledger / I/O errors, 3 when the budget refuses a
run, 70 for an internal error (a bug in dppub), 130 / 143 when SIGINT / SIGTERM interrupted a
run (after settling it). A run that did not publish (:class:`dppub.run.NotPublished`) says why,
then how it was settled. The Python API raises the exceptions themselves; a failed run's
exception carries this line (:func:`dppub.api.publish`).
"""

from __future__ import annotations

import signal

from dppub.dp.errors import BudgetExceededError, DPPubError
from dppub.run import NotPublished

__all__ = ["INTERNAL_ERROR", "failure", "io_error_line"]

INTERNAL_ERROR = 70
"""Exit code of an unexpected error (a bug in dppub; sysexits' EX_SOFTWARE): not 1, which
means a broken hash chain."""


def failure(exc: BaseException) -> tuple[str, int]:
    """The line (without ``dppub: error:``) and the exit code of ``exc``."""
    if not isinstance(exc, NotPublished):
        return _cause(exc, None)
    if exc.signum is not None:  # the signal decides, not what Prefect made of it
        line, code = f"interrupted by {signal.Signals(exc.signum).name}", 128 + exc.signum
    else:
        assert exc.cause is not None  # a run fails with a cause or a signal
        line, code = _cause(exc.cause, exc.api)
    return f"{line}; {exc.settled}", code


def _cause(exc: BaseException, api: str | None) -> tuple[str, int]:
    if isinstance(exc, BudgetExceededError):
        return str(exc), 3
    if isinstance(exc, DPPubError):
        return str(exc), 2
    if isinstance(exc, OSError):
        return io_error_line(exc), 2
    if api is not None and _prefect_api_failed(exc):
        return f"the Prefect API ({api}) failed: {exc}; check that server and retry", 2
    return f"internal error {type(exc).__name__}: {exc} (DPPUB_DEBUG=1 for more)", INTERNAL_ERROR


def io_error_line(exc: OSError) -> str:
    """``I/O error: No space left on device (/dev/full)``."""
    where = f" ({exc.filename})" if exc.filename else ""
    return f"I/O error: {exc.strerror or exc}{where}"


def _prefect_api_failed(exc: BaseException) -> bool:
    """Prefect could not talk to its API (the server went away, or is not a Prefect API)."""
    import httpx

    return isinstance(exc, httpx.HTTPError) or str(exc).startswith("Failed to reach API")
