"""``dppub.publish_flow`` as a subflow of a user's own flow, on a real Prefect server (the test
process's: ``prefect_server``).

Prefect is imported by the fixtures, not at collection: ``make test-fast`` collects this
folder and deselects these tests without paying for Prefect's import.
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import dppub
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.flows.conftest import small_config
from tests.prefect_server import PrefectServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def users_flow(prefect_server: PrefectServer) -> Iterator[Callable[..., Any]]:
    """What a data engineer writes: their steps, then dppub's publication, on their Prefect
    server."""
    from prefect import flow
    from prefect.settings import PREFECT_API_URL, temporary_settings

    @flow
    def nightly(config: str, ledger: str, out: str) -> dppub.Publication:
        return dppub.publish_flow(config, ledger, out)

    with temporary_settings(updates={PREFECT_API_URL: prefect_server.url}):
        yield nightly


def _stored(folder: Path) -> set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


def test_subflow_returns_the_publication_and_persists_nothing(
    tmp_path: Path, census_small: Path, users_flow: Callable[..., Any]
) -> None:
    from prefect.settings import get_current_settings

    config = small_config(tmp_path, census_small, light=True)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    storage = Path(get_current_settings().results.local_storage_path)
    before = _stored(storage)
    done = users_flow(str(config), str(ledger), str(out))
    assert isinstance(done, dppub.Publication)
    assert done.path == out / "census_demo" / done.run_id
    assert done.manifest == json.loads((done.path / "manifest.json").read_text())
    assert done.cost.epsilon == pytest.approx(done.manifest["total_epsilon"]) == 0.5
    spent = spending_summary(Ledger(str(ledger)))["census_demo"]
    assert (spent["runs"], spent["lifetime_spent_epsilon"]) == (1, pytest.approx(0.5))
    assert _stored(storage) == before  # Prefect kept no result of either flow


def test_subflow_spends_only_in_the_configs_ledger(
    tmp_path: Path, census_small: Path, users_flow: Callable[..., Any]
) -> None:
    config = small_config(tmp_path, census_small, light=True)
    raw = yaml.safe_load(config.read_text())
    raw["ledger"] = "own.sqlite"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    other = tmp_path / "fresh.sqlite"  # a fresh ledger would be a fresh budget
    with pytest.raises(dppub.ConfigError, match="is not the config's ledger"):
        users_flow(str(config), str(other), str(tmp_path / "out"))
    assert not other.exists()
    done = users_flow(str(config), str(tmp_path / "own.sqlite"), str(tmp_path / "out"))
    assert Ledger(str(tmp_path / "own.sqlite")).reservation(done.run_id).state == "committed"
