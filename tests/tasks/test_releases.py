"""Tasks are thin and private: nothing they return is cached or persisted by Prefect, and only
reading retries, on I/O errors only (a retried noise draw would be a second, independent draw).

Prefect is imported inside the tests, so that collecting this file stays cheap for the fast tier.
"""

from __future__ import annotations

from typing import Any

import pytest

from dppub.dp.errors import DPPubError, InputError


@pytest.mark.slow
def test_every_task_is_uncached_unpersisted_and_only_reading_retries() -> None:
    from prefect import Task
    from prefect.cache_policies import NONE

    import dppub.tasks.releases

    found = {name: t for name, t in vars(dppub.tasks.releases).items() if isinstance(t, Task)}
    assert set(found) == set(dppub.tasks.releases.__all__)
    for name, t in found.items():
        assert isinstance(t.cache_policy, type(NONE)), name
        assert t.persist_result is False, name
        reads = name == "read_source"
        assert t.retries == (2 if reads else 0), name
        assert (t.retry_condition_fn is not None) == reads, name


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def result(self, raise_on_failure: bool) -> Any:
        assert raise_on_failure is False
        return self.exc


class _DPPubOSError(DPPubError, OSError):
    """A deliberate dppub error that is also an OS error: final, like every DPPubError."""


@pytest.mark.slow
def test_only_os_errors_that_dppub_did_not_raise_on_purpose_are_retried() -> None:
    from dppub.tasks._common import retry_on_io_error

    def retried(exc: BaseException) -> bool:
        # The condition reads only the state; Prefect's task and task run are not needed.
        return retry_on_io_error(None, None, _Failed(exc))  # type: ignore[arg-type]

    assert retried(OSError("transient"))
    assert retried(TimeoutError("slow disk"))
    assert not retried(InputError("bad value"))
    assert not retried(_DPPubOSError("refused"))
    assert not retried(ValueError("bug"))
