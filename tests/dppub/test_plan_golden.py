"""``dppub plan`` of the shipped examples, text and ``--json``, byte for byte as captured from
the code before the API was rebuilt over it (``golden/``, issue 36): a refactoring may not
change a character of what the command prints.

The examples are copied as they are, with the seeded small sample where they expect the census
(a plan reads only the Parquet footers, and no ledger exists yet: the whole budget remains).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dppub.cli import app

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
EXAMPLES = ("demo", "tables", "synthetic")


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory, census_small: Path) -> Path:
    """A copy of ``configs/`` beside ``data/sample/census.parquet``, as in a checkout."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "configs", root / "configs", ignore=shutil.ignore_patterns("*.sqlite"))
    (root / "data" / "sample").mkdir(parents=True)
    shutil.copy(census_small, root / "data" / "sample" / "census.parquet")
    return root / "configs"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_plan_prints_what_it_printed(configs: Path, name: str, as_json: bool) -> None:
    done = CliRunner().invoke(app, ["plan", str(configs / f"{name}.yaml")] + ["--json"] * as_json)
    assert done.exit_code == 0, done.output
    golden = GOLDEN / f"plan_{name}.{'json' if as_json else 'txt'}"
    assert str(configs.parent) not in done.stdout  # nothing in it depends on where it runs
    assert done.stdout == golden.read_text(encoding="utf-8")
