"""Keep dppub's own (expected) errors to one line in Prefect's logs.

Prefect logs every task/flow failure with its traceback. For a :class:`DPPubError` — bad input,
bad config, budget refused — or an ``OSError`` from the machine (a full disk, an I/O error) the
message is the whole story, so the traceback is dropped from the console and from the logs
Prefect stores; so is every traceback once SIGINT/SIGTERM interrupted ``dppub run`` (whatever
Prefect's engine raises then is the interruption's consequence, and the command's one line
says how the run was settled). Unexpected exceptions keep theirs.
"""

from __future__ import annotations

import logging

from dppub.dp.errors import DPPubError
from dppub.dp.pipeline.hooks import stop_requested

__all__ = ["quiet_expected_errors"]


class _DropExpectedTracebacks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, DPPubError | OSError | KeyboardInterrupt) or (
            exc is not None and stop_requested()  # a signal interrupted the run
        ):
            record.exc_info = None
            record.exc_text = None
        return True


_FILTER = _DropExpectedTracebacks()


def quiet_expected_errors() -> None:
    """Attach the filter to every handler configured so far (call after importing prefect)."""
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for lg in loggers:
        for handler in lg.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
