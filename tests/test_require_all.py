"""Under DPPUB_REQUIRE_ALL=1 (what .ci/run sets) a skipped test fails: CI always runs the browser
and PostgreSQL tests, which skip on a machine without Chromium or the pgserver wheel."""

from __future__ import annotations

from typing import Literal

import pytest

from tests import conftest


def _through_hook(report: pytest.TestReport) -> pytest.TestReport:
    hook = conftest.pytest_runtest_makereport(item=None, call=None)  # type: ignore[arg-type]
    next(hook)
    with pytest.raises(StopIteration) as done:
        hook.send(report)
    result: pytest.TestReport = done.value.value
    return result


def _report(
    outcome: Literal["passed", "failed", "skipped"], longrepr: tuple[str, int, str] | None
) -> pytest.TestReport:
    return pytest.TestReport(
        "tests/x.py::t",
        ("tests/x.py", 1, "t"),
        {},
        outcome,
        longrepr,
        "setup",
    )


def test_a_skip_fails_where_every_prerequisite_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPPUB_REQUIRE_ALL", "1")
    why = "Skipped: the browser tests need Chromium, not on PATH: apt-get install chromium"
    report = _through_hook(_report("skipped", ("tests/x.py", 1, why)))
    assert report.failed
    assert report.longrepr == f"DPPUB_REQUIRE_ALL=1: a skipped test fails. {why}"
    assert _through_hook(_report("passed", None)).passed


def test_a_skip_stays_a_skip_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPPUB_REQUIRE_ALL", raising=False)
    assert _through_hook(_report("skipped", ("tests/x.py", 1, "Skipped: no"))).skipped
    monkeypatch.setenv("DPPUB_REQUIRE_ALL", "0")
    assert _through_hook(_report("skipped", ("tests/x.py", 1, "Skipped: no"))).skipped
