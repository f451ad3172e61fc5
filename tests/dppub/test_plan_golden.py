"""``dppub plan`` of the shipped examples, text and ``--json``, as captured from the code before
the API was rebuilt over it (``golden/``, issue 36): a refactoring may not change a character of
the text, nor a key, string or integer of the JSON. The JSON's floats are compared to 1e-7
relative: the strategy optimiser's expected errors move in their 8th digit with the BLAS's
threading (seen once: 18.396941328680256 against 18.396941255568787 on another machine).

The examples are copied as they are, with the seeded small sample where they expect the census
(a plan reads only the Parquet footers, and no ledger exists yet: the whole budget remains).
"""

from __future__ import annotations

import json
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
    expected = golden.read_text(encoding="utf-8")
    if as_json:
        assert json.loads(done.stdout) == _approx(json.loads(expected))
    else:
        assert done.stdout == expected


def _approx(value: object) -> object:
    """``value`` with each float as ``pytest.approx`` of it (keys, strings, ints exact)."""
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_approx(v) for v in value]
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-7)
    return value


def test_the_json_comparison_still_sees_a_changed_figure() -> None:
    """The tolerance is for the last digits only: a figure off by 1e-6 fails."""
    assert _approx({"rmse": [1.0 + 1e-9, "a"]}) == {"rmse": [1.0, "a"]}
    assert _approx({"rmse": [1.0, "a"]}) != {"rmse": [1.0 + 1e-6, "a"]}
    assert _approx({"rmse": [1, "a"]}) != {"rmse": [1, "b"]}
