"""A SQLite ledger is exactly the file its path names (issue 29, item 4).

The path used to be pasted into a ``file:`` URI: ``%6C`` was decoded (another file was charged),
``#`` and ``?`` cut the name short (a stray file, an unusable ledger), and ``:memory:`` became a
file of that name. Each case here opens the ledger by a relative path from its folder, runs a
reservation, and checks which files exist afterwards.
"""

import os
from pathlib import Path

import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import LedgerError
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ledger_location

DATA = DataIdentity(name="d", source="/data/d.parquet")


def _reserve(led: Ledger, run_id: str) -> None:
    led.reserve(
        run_id=run_id,
        data=DATA,
        policy=BudgetPolicy(total=PrivacyCost(epsilon=4.0)),
        cost=PrivacyCost(epsilon=1.0),
        config_hash="c",
    )


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    "name",
    ["%6Cedger.sqlite", "a#b/l.sqlite", "a?b/l.sqlite", "a%23b/l%3Fc.sqlite", "a b/#l?.sqlite"],
)
def test_the_file_written_is_exactly_the_path_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _reserve(Ledger(name), "r1")
    _reserve(Ledger(tmp_path / name), "r2")  # the same file by its absolute path
    parts = Path(name).parts
    assert _tree(tmp_path) == sorted(str(Path(*parts[: i + 1])) for i in range(len(parts)))
    assert [r["run_id"] for r in Ledger(tmp_path / name, create=False).runs()] == ["r1", "r2"]
    assert ledger_location(name) == str(tmp_path / name)


def test_a_percent_escape_never_charges_the_file_it_decodes_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    _reserve(Ledger("d/ledger.sqlite"), "other")
    before = (tmp_path / "d" / "ledger.sqlite").read_bytes()
    _reserve(Ledger("d/%6Cedger.sqlite"), "mine")
    assert (tmp_path / "d" / "ledger.sqlite").read_bytes() == before
    assert [r["run_id"] for r in Ledger("d/ledger.sqlite").runs()] == ["other"]
    assert [r["run_id"] for r in Ledger("d/%6Cedger.sqlite").runs()] == ["mine"]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (":memory:", "an in-memory database would forget every charge"),
        (":MEMORY:", "an in-memory database would forget every charge"),
        ("", "it is empty"),
        ("  ", "it is empty"),
        ("file:l.sqlite", "it is a SQLite URI"),
        ("file::memory:?cache=shared", "it is a SQLite URI"),
        ("sub", "it is a folder"),
        ("sub/", "it is a folder"),
        ("new/", "it is a folder"),
        ("l\x00.sqlite", "NUL character"),
    ],
)
def test_what_is_not_a_file_path_is_refused_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, why: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for create in (True, False):
        with pytest.raises(LedgerError, match="is not a file path: ") as err:
            Ledger(name) if create else Ledger(name, create=False)
        assert why in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(LedgerError, match=why):
        ledger_location(name)
    assert _tree(tmp_path) == ["sub"]  # nothing stray created
    assert os.listdir(tmp_path / "sub") == []
