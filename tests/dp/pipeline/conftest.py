from pathlib import Path

import pytest

from tests.dp.pipeline.published_run import Demo, publish_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, census_small: Path) -> Demo:
    """The demo config published in-process on the small sample, then a charged run."""
    return publish_demo(tmp_path_factory.mktemp("demo"), census_small)
