from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def small_config(directory: Path, data: Path, *, budget: float = 4.0, **overrides: Any) -> Path:
    """The demo config, pointed at ``data`` (small sample) and with smaller domains."""
    raw = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["budget"]["epsilon"] = budget
    raw["workloads"][1]["attributes"][0]["bins"] = 16
    raw.pop("schedule")
    raw.update(overrides)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture
def config_factory(tmp_path: Path, census_small: Path):  # type: ignore[no-untyped-def]
    def make(**kwargs: Any) -> Path:
        return small_config(tmp_path, census_small, **kwargs)

    return make


from tests.pg import postgres  # noqa: E402, F401 (the fixture)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_at(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger location on each back end: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("postgres").schema_url())
