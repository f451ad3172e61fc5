"""Tasks are thin and private: nothing they return is cached or persisted by Prefect, and only
reading retries, on I/O errors only (a retried noise draw would be a second, independent draw).

Prefect is imported inside the tests, so that collecting this file stays cheap for the fast tier.
"""

from __future__ import annotations

from pathlib import Path
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


@pytest.mark.slow
def test_a_tables_summaries_pass_prefects_parameter_traversal(
    tmp_path: Path, census_small: Path
) -> None:
    """A task's parameters (release summaries among them) are walked by Prefect, which reads a
    pydantic model through ``dict(model)``: a result field named ``keys`` (a table's key
    columns) made that call ``model.keys()``, a tuple, and failed every run with a table
    under Prefect (``TypeError: 'tuple' object is not callable``)."""
    import yaml
    from prefect.utilities.collections import visit_collection

    from tests.dp.pipeline.published_run import publish_in_process
    from tests.examples import example

    raw = example("tables.yaml")
    raw["dataset"]["path"] = str(census_small)
    raw.pop("schedule", None)
    config = tmp_path / "tables.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    summaries = publish_in_process(config, tmp_path / "ledger", tmp_path / "out").summaries
    assert {s.kind for s in summaries} == {"table"}
    walked = visit_collection(summaries, visit_fn=lambda x: x, return_data=True)
    assert walked == summaries
