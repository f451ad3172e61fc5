"""Browser tests: Chromium (a prerequisite, never installed here) started once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.chromium import Browser, find_chromium
from tests.dp.pipeline.published_run import Demo, publish_demo


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(find_chromium(), tmp_path_factory.mktemp("chromium") / "profile")
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, census_small: Path) -> Demo:
    """The demo config published in-process on the small sample, then a charged run."""
    return publish_demo(tmp_path_factory.mktemp("demo"), census_small)
