"""Test-wide setup: an isolated Prefect home (set before prefect is imported), sample data, and
skipped tests failing where every prerequisite is required (DPPUB_REQUIRE_ALL=1)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]

# prefect_test_harness isolates Prefect's database but not its cached results: give every test
# session its own PREFECT_HOME. The temporary server's first start can take ~20 s on 2 cores.
_PREFECT_HOME = tempfile.mkdtemp(prefix="dppub-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dppub_generate", ROOT / "data" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dppub_generate"] = module
    spec.loader.exec_module(module)
    return module


generate = _load_generator()

# The servers, one per test process, whichever folder its tests are in: registered here once
# (a fixture imported into two conftests is two fixtures, and would start two servers).
from tests.pg import postgres  # noqa: E402, F401 (the fixture)
from tests.prefect_server import prefect_server  # noqa: E402, F401 (the fixture)

# The tiers: `make test-fast` runs what is not `slow`, under a minute on two cores. Whole
# folders are slow by nature (they start Prefect, subprocesses, Chromium, or run seeded privacy
# audits); so is a test using a server or the published demo (module-scoped: the first test of
# a module to use it pays for it); elsewhere a test is marked where it stands (the slowest
# measured: a few seconds of CPU or more each).
_SLOW_FOLDERS = frozenset({"flows", "browser", "empirical_privacy"})
_SLOW_FIXTURES = frozenset({"postgres", "prefect_server", "demo"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"`` the slow folders are not even imported (Prefect, typer and
    Chromium's helpers cost seconds of collection in every worker before being deselected)."""
    if config.getoption("markexpr") == "not slow" and collection_path.parent == ROOT / "tests":
        return collection_path.name in _SLOW_FOLDERS or None
    return None


# The files that take longest (seconds of one worker, `--durations` of a whole run on 2 cores,
# 2026-12-02): run first, so that the two workers finish together. xdist's `loadfile` hands out
# whole files, by default those with the most tests first, which left the slowest files (a
# served schedule that waits for the next minute: 2 tests, 100 s) to the end, one worker idle.
_LONGEST_FIRST = (
    "flows/test_serve.py",
    "flows/test_operations.py",
    "dppub/test_cli.py",
    "flows/test_prefect_path.py",
    "flows/test_deploy.py",
    "browser/test_serve_ui.py",
    "browser/test_pages.py",
    "flows/test_hostile_input.py",
    "flows/test_publish_flow.py",
    "flows/test_hostile_data.py",
    "dp/regression/test_uncertainty.py",
    "flows/test_synthetic_interrupt.py",
    "empirical_privacy/test_models.py",
    "flows/test_server_ui.py",
    "dp/engine/test_unit_bounding.py",
)


def _longest_first(items: list[pytest.Item]) -> None:
    """Files in the order above, then the others with the most tests first (xdist's own order,
    kept with ``--no-loadscope-reorder`` in pyproject); each file's tests stay together and in
    order. Every worker sorts alike (xdist checks that the collections agree)."""
    rank = {ROOT / "tests" / name: i for i, name in enumerate(_LONGEST_FIRST)}
    counts: dict[Path, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    first = {path: rank.get(path, len(rank)) for path in counts}
    order = {path: i for i, path in enumerate(counts)}
    items.sort(key=lambda it: (first[it.path], -counts[it.path], order[it.path]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _longest_first(items)
    for item in items:
        path = Path(str(item.fspath))
        parts = (
            path.relative_to(ROOT / "tests").parts if path.is_relative_to(ROOT / "tests") else ()
        )
        params = getattr(getattr(item, "callspec", None), "params", {})
        uses_server = not _SLOW_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        uses_server |= "postgresql" in map(str, params.values())
        if (parts and parts[0] in _SLOW_FOLDERS) or uses_server:
            item.add_marker(pytest.mark.slow)


# A missing prerequisite (Chromium; the pgserver wheel, which `make setup` installs) skips its
# tests with one line naming the install command. CI (.ci/run) sets DPPUB_REQUIRE_ALL=1: there a
# skipped test fails, so the browser and PostgreSQL tests always run.
REQUIRE_ALL = "DPPUB_REQUIRE_ALL"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if os.environ.get(REQUIRE_ALL) == "1" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_ALL}=1: a skipped test fails. {reason}"
    return report


@pytest.fixture(scope="session")
def census_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3,000-row census-like Parquet file (seeded)."""
    path = tmp_path_factory.mktemp("data") / "census.parquet"
    generate.write(3000, 7, path, row_group_size=1000)
    return path


@pytest.fixture(scope="session")
def census_frame(census_small: Path) -> pd.DataFrame:
    return pd.read_parquet(census_small)
