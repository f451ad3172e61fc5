"""The shipped examples work together: demo.yaml (`make run`), tables.yaml and synthetic.yaml
read one dataset, declared once (configs/datasets/census.yaml), and spend its one budget in
one ledger, in any order; each header names the command that runs it after `make run`
(tests/flows/test_examples.py publishes them)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import yaml

from dppub.dp.errors import ConfigError
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.plan import load_config, load_plan

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"
EXAMPLES = ("demo.yaml", "tables.yaml", "synthetic.yaml")


def test_the_examples_declare_one_dataset() -> None:
    configs = [load_plan(CONFIGS / name).config for name in EXAMPLES]
    assert {c.dataset_file for c in configs} == {CONFIGS / "datasets" / "census.yaml"}
    assert len({c.data_identity for c in configs}) == 1
    assert len({c.budget_policy for c in configs}) == 1
    assert len({c.ledger_location for c in configs}) == 1  # beside the dataset file, by default
    assert configs[0].data_path() == ROOT / "data" / "sample" / "census.parquet"


@pytest.mark.slow
@pytest.mark.parametrize("order", list(itertools.permutations(EXAMPLES)))
def test_the_examples_spend_one_budget_in_any_order(tmp_path: Path, order: tuple[str]) -> None:
    # old code: the second config was refused ("the config differs from what the ledger
    # recorded: name 'census_demo' -> 'census_tables', epsilon 4 -> 10...").
    book = Ledger(str(tmp_path / "ledger.sqlite"))
    total = 0.0
    for i, name in enumerate(order):
        plan = load_plan(CONFIGS / name)
        run = plan.run_plan
        book.reserve(
            run_id=f"r{i}",
            data=run.data,
            policy=run.policy,
            cost=run.cost,
            config_hash=run.config_hash,
        )
        total += plan.total.epsilon
    (summary,) = spending_summary(book).values()
    assert summary["pending_runs"] == 3  # reserved: held against the budget
    assert total == pytest.approx(6.0)
    assert summary["budget_epsilon"] == 8.0  # one more demo run (1.5) fits after all three
    assert summary["remaining_epsilon"] == pytest.approx(8.0 - total)


def _header(name: str) -> str:
    text = (CONFIGS / name).read_text()
    return " ".join(text[: text.index("\ndataset:")].split())


def test_each_header_names_the_command_that_runs_it_on_make_runs_ledger() -> None:
    make = (ROOT / "Makefile").read_text()
    state = re.search(r"^STATE\s*:=\s*(\S+)", make, re.M)
    assert state is not None
    run = re.search(r"dppub run configs/demo\.yaml --ledger (\S+) --out (\S+)", make)
    assert run is not None
    ledger, out = (g.replace("$(STATE)", state.group(1)) for g in run.groups())
    assert "make run" in _header("demo.yaml")
    for name in EXAMPLES:
        assert f"dppub run configs/{name} --ledger {ledger} --out {out}" in _header(name)


def _dataset_file(folder: Path, **extra: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    declared = yaml.safe_load((CONFIGS / "datasets" / "census.yaml").read_text())
    path = folder / "census.yaml"
    path.write_text(yaml.safe_dump({**declared, **extra}))
    return path


def _config_naming(path: Path, dataset: str, **extra: object) -> Path:
    raw = yaml.safe_load((CONFIGS / "tables.yaml").read_text())
    path.write_text(yaml.safe_dump({**raw, "dataset": dataset, **extra}))
    return path


def test_a_dataset_files_paths_and_ledger_resolve_against_it(tmp_path: Path) -> None:
    _dataset_file(tmp_path / "datasets", ledger="books/census.sqlite")
    here = _config_naming(tmp_path / "a.yaml", "datasets/census.yaml")
    (tmp_path / "elsewhere").mkdir()
    there = _config_naming(tmp_path / "elsewhere" / "b.yaml", "../datasets/census.yaml")
    for config in (here, there):
        cfg = load_config(config)
        assert cfg.ledger_location == str(tmp_path / "datasets" / "books" / "census.sqlite")
        declared = tmp_path / "datasets" / "../../data/sample/census.parquet"  # as the file says
        assert cfg.data_path() == declared.resolve()


def test_a_config_naming_a_dataset_file_keeps_no_ledger_of_its_own(tmp_path: Path) -> None:
    _dataset_file(tmp_path / "shared")
    config = _config_naming(tmp_path / "a.yaml", "shared/census.yaml", ledger="mine.sqlite")
    with pytest.raises(ConfigError, match=r"a.yaml: ledger: .* drop ledger: here"):
        load_config(config)
    default = _config_naming(tmp_path / "b.yaml", "shared/census.yaml")
    assert load_config(default).ledger_location == str(tmp_path / "shared" / "ledger.sqlite")


def test_a_dataset_file_holds_a_dataset_and_a_ledger_only(tmp_path: Path) -> None:
    _dataset_file(tmp_path / "shared", tables=[])
    config = _config_naming(tmp_path / "a.yaml", "shared/census.yaml")
    with pytest.raises(ConfigError, match=r"census.yaml: a dataset file holds only dataset and"):
        load_config(config)
    (tmp_path / "shared" / "census.yaml").write_text("dataset: other.yaml\n")
    with pytest.raises(ConfigError, match=r"census.yaml: dataset: must be a mapping"):
        load_config(config)
    missing = _config_naming(tmp_path / "c.yaml", "shared/nowhere.yaml")
    with pytest.raises(ConfigError, match="shared/nowhere.yaml does not exist"):
        load_config(missing)
