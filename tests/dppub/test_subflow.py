"""``dppub.publish_flow`` as a subflow of a user's own flow (one temporary Prefect server)."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prefect import flow
from prefect.settings import get_current_settings
from prefect.testing.utilities import prefect_test_harness

import dppub
from dp.ledger import Ledger
from dp.ledger.summary import spending_summary
from tests.flows.conftest import small_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def harness() -> Iterator[None]:
    with prefect_test_harness(server_startup_timeout=120):
        yield


@flow
def users_flow(config: str, ledger: str, out: str) -> dppub.Publication:
    """What a data engineer writes: their steps, then dppub's publication."""
    return dppub.publish_flow(config, ledger, out)  # type: ignore[no-any-return]


def _stored(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


def test_subflow_returns_the_publication_and_persists_nothing(
    tmp_path: Path, census_small: Path
) -> None:
    config = small_config(tmp_path, census_small)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    storage = Path(get_current_settings().results.local_storage_path)
    before = _stored(storage)
    done = users_flow(str(config), str(ledger), str(out))
    assert isinstance(done, dppub.Publication)
    assert done.path == out / "census_demo" / done.run_id
    assert done.manifest == json.loads((done.path / "manifest.json").read_text())
    assert done.cost.epsilon == pytest.approx(done.manifest["total_epsilon"]) == 1.5
    spent = spending_summary(Ledger(str(ledger)))["census_demo"]
    assert (spent["runs"], spent["lifetime_spent_epsilon"]) == (1, pytest.approx(1.5))
    assert _stored(storage) == before  # Prefect kept no result of either flow


def test_subflow_spends_only_in_the_configs_ledger(tmp_path: Path, census_small: Path) -> None:
    config = small_config(tmp_path, census_small)
    raw = yaml.safe_load(config.read_text())
    raw["ledger"] = "own.sqlite"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    other = tmp_path / "fresh.sqlite"  # a fresh ledger would be a fresh budget
    with pytest.raises(dppub.ConfigError, match="is not the config's ledger"):
        users_flow(str(config), str(other), str(tmp_path / "out"))
    assert not other.exists()
    done = users_flow(str(config), str(tmp_path / "own.sqlite"), str(tmp_path / "out"))
    assert Ledger(str(tmp_path / "own.sqlite")).reservation(done.run_id).state == "committed"
