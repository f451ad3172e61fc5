"""Ledger faults and ledger paths through the real CLI (issue 29, items 4, 6 and 7): one line,
exit 2, nothing published, and the ledger exactly as it was.

Every case fails while the run is opened, before Prefect starts, so no Prefect server is needed.
"""

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from dppub.dp.ledger import Ledger
from tests.dp.ledger.disk import mounted_small_disk
from tests.flows.conftest import small_config


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli.app, list(args))


def _published(out: Path) -> list[str]:
    folder = out / "census_demo"
    return (
        [p.name for p in folder.iterdir() if not p.name.startswith(".")] if folder.exists() else []
    )


def _one_line(result: Any, message: str) -> str:
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1, result.stderr
    assert message in errors[0], errors[0]
    assert "Traceback" not in result.stderr and "not a dppub ledger" not in errors[0]
    return str(errors[0])


@pytest.mark.parametrize("name", [":memory:", "file:l.sqlite", ""])
def test_a_ledger_that_is_not_a_file_path_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, census_small: Path, name: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config = small_config(tmp_path, census_small)
    out = tmp_path / "out"
    for args in (
        ["run", str(config), "--ledger", name, "--out", str(out)],
        ["audit", "--ledger", name],
        ["plan", str(config), "--ledger", name],
    ):
        _one_line(_invoke(*args), "is not a file path")
    assert list(work.iterdir()) == []  # nothing stray where the path was relative to


@pytest.mark.slow
def test_a_full_disk_is_named_and_the_ledger_kept(tmp_path: Path, census_small: Path) -> None:
    config = small_config(tmp_path, census_small)
    with mounted_small_disk(tmp_path / "disk") as disk:
        ledger = disk.path / "ledger.sqlite"
        Ledger(ledger)
        before = ledger.read_bytes()
        disk.fill()
        result = _invoke("run", str(config), "--ledger", str(ledger), "--out", str(tmp_path / "o"))
        _one_line(result, "no space left on the disk (0 bytes free")
        disk.free()
        assert ledger.read_bytes() == before and Ledger(ledger).verify().ok
    assert _published(tmp_path / "o") == []


_HOLD_EXCLUSIVELY = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA locking_mode=EXCLUSIVE")
con.execute("BEGIN EXCLUSIVE")
con.execute("DELETE FROM meta WHERE key = 'nothing'")
con.execute("COMMIT")  # the exclusive lock stays held in this locking mode
print("ready", flush=True)
sys.stdin.read()  # until the test closes our stdin
con.close()
"""


@pytest.mark.slow
def test_a_lock_held_by_another_process_is_named(
    tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = small_config(tmp_path, census_small)
    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger)
    monkeypatch.setenv("DPPUB_LEDGER_TIMEOUT", "0.5")
    # Another process (not a fork: this worker may hold JAX's threads) holds the lock.
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_EXCLUSIVELY, str(ledger)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = _invoke("run", str(config), "--ledger", str(ledger), "--out", str(tmp_path / "o"))
        _one_line(result, "is locked by another process: waited 0.5 s")
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert Ledger(ledger).verify().ok and Ledger(ledger).runs() == []


def test_an_extreme_epsilon_is_refused_and_writes_nothing(
    tmp_path: Path, census_small: Path
) -> None:
    config = small_config(tmp_path, census_small)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["budget"]["epsilon"] = 1e308
    raw["workloads"][0]["epsilon"] = 1e308
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    result = _invoke("run", str(config), "--ledger", str(ledger), "--out", str(out))
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1 and "1e+308" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    if ledger.exists():  # refused by the ledger itself (or earlier, by the config)
        led = Ledger(ledger)
        assert led.head()[0] == 0 and led.verify().ok
    assert _published(out) == []
