"""Mistakes a plan can find are refused by ``dppub plan`` and ``dppub run`` alike, in one line
naming the release, before anything is reserved (issue 34: each was charged after the draw)."""

import importlib.abc
import importlib.machinery
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]

MEASURES: list[Any] = ["count", {"sum": "income"}, {"mean": "hours"}]


def config(tmp: Path, data: Path, **sections: Any) -> Path:
    """The demo's dataset with only ``sections`` as releases."""
    raw = example("demo.yaml")
    for key in ("schedule", "anonymize", "workloads", "regressions", "clustering"):
        raw.pop(key)
    raw["dataset"]["path"] = str(data)
    raw.update(sections)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def refused_alike(tmp: Path, path: Path, message: str) -> str:
    """``plan`` and ``run`` exit 2 with the same one error line holding ``message``; the ledger
    holds no entry (not even a reserve/abort pair) and nothing is published."""
    ledger, out = tmp / "ledger.sqlite", tmp / "out"
    lines = []
    for args in (
        ["plan", str(path)],
        ["run", str(path), "--ledger", str(ledger), "--out", str(out)],
    ):
        result = CliRunner().invoke(cli.app, args)
        assert result.exit_code == 2, result.output
        errors = [ln for ln in result.stderr.splitlines() if ln.startswith("dppub: error:")]
        assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
        assert message in errors[0], errors[0]
        lines.append(errors[0])
    assert lines[0] == lines[1]
    if ledger.exists():
        with sqlite3.connect(ledger) as con:
            assert con.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
    assert not any((out / "census_demo").glob("[!.]*")) if out.exists() else True
    return lines[0]


FLOOR = {
    # the first component below the floor: the count and centred sum of hours, 42% of 2e-6
    "split": (
        [{"name": "t", "epsilon": 2e-6, "by": ["sex"], "measures": MEASURES}],
        "table 't': epsilon 2e-06 is split so that the count(hours)+centred_sum(hours) "
        "component runs at epsilon 8.41e-07, below the floor of 1e-06; give it epsilon >= "
        "2.379e-06",
    ),
    # three quantiles by the exponential mechanism: each at 1e-6 / 3
    "exponential": (
        [
            {
                "name": "q",
                "epsilon": 1e-6,
                "by": ["sex"],
                "measures": [{"quantile": "age", "at": [0.25, 0.5, 0.75]}],
            }
        ],
        "table 'q': epsilon 1e-06 is split so that each of the 3 quantile(age) draws "
        "(exponential mechanism) runs at epsilon 3.33e-07",
    ),
    "joint": (
        [
            {"name": "j1", "epsilon": 2e-6, "by": ["sex"], "joint": "g", "measures": MEASURES},
            {"name": "j2", "epsilon": 2e-6, "by": ["race"], "joint": "g", "measures": MEASURES},
        ],
        "table 'j1': epsilon 2e-06 is split so that the count(hours)+centred_sum(hours) component",
    ),
    "private keys": (
        [
            {
                "name": "p",
                "epsilon": 3e-6,
                "delta": 1e-9,
                "keys": "private",
                "by": ["zip"],
                "measures": MEASURES,
            }
        ],
        "table 'p': epsilon 3e-06 is split so that",
    ),
}


@pytest.mark.parametrize("name", list(FLOOR))
def test_a_split_below_the_epsilon_floor_is_refused_before_the_reservation(
    tmp_path: Path, census_small: Path, name: str
) -> None:
    # old code: `plan` refused with "epsilon must be at least 1e-06 ..." naming no table (or
    # accepted the three quantiles); `run` reserved, drew, failed and was charged
    tables, message = FLOOR[name]
    refused_alike(tmp_path, config(tmp_path, census_small, tables=tables), message)


class _NoMbi(importlib.abc.MetaPathFinder):
    """A Python where the extra ``dppub[synth]`` is missing: ``mbi`` is not found."""

    def find_spec(self, name: str, *args: object) -> importlib.machinery.ModuleSpec | None:
        if name == "mbi" or name.startswith("mbi."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_a_missing_synth_extra_is_refused_before_the_reservation(
    tmp_path: Path, census_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # old code: `plan` accepted; `run` reserved, the table drew its noise, the synthetic
    # release failed importing mbi: the whole run charged, nothing published
    monkeypatch.setattr(sys, "meta_path", [_NoMbi(), *sys.meta_path])
    for name in [m for m in sys.modules if m == "mbi" or m.startswith("mbi.")]:
        monkeypatch.delitem(sys.modules, name)
    table = {"name": "t", "epsilon": 0.5, "by": ["sex"], "measures": ["count"]}
    synthetic = {
        "name": "s",
        "epsilon": 0.5,
        "delta": 1e-9,
        "columns": ["sex", "race"],
        "workload": {"marginals": 2},
    }
    path = config(tmp_path, census_small, tables=[table], synthetic=[synthetic])
    raw = yaml.safe_load(path.read_text())
    raw["dataset"]["budget"]["delta"] = 1e-6
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    refused_alike(
        tmp_path,
        path,
        "synthetic 's': synthetic data needs the optional extra: pip install "
        "'dppub[synth]' (mbi>=2.0,<2.1 and JAX; no module named 'mbi')",
    )


def _synthetic(tmp: Path, data: Path, **item: Any) -> Path:
    synthetic = {"name": "s", "epsilon": 1.0, "delta": 1e-9, "columns": ["sex", "race"], **item}
    path = config(tmp, data, synthetic=[synthetic])
    raw = yaml.safe_load(path.read_text())
    raw["dataset"]["budget"]["delta"] = 1e-6
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("item", "message"),
    [
        # old code: sampled 2^31 rows after the charge (memory exhausted)
        ({"rows": 2**31}, "synthetic.0.rows: Input should be less than or equal to 67108864"),
        (
            {"rows": 2**25, "columns": ["sex", "race", "age"]},
            "synthetic 's': rows x columns is 100,663,296, more than the limit of 67,108,864",
        ),
        # old code: a noisy count of sigma 2.8e7 published 24.7 million rows from 1,000
        (
            {"epsilon": 1e-6},
            "synthetic 's': at rho 6.55e-14 the noisy row count's standard deviation would be "
            "8.74e+06 rows with 10% of the budget, more than 1% of max_rows 1,000,000",
        ),
    ],
)
def test_a_synthetic_table_that_cannot_finish_is_refused(
    tmp_path: Path, census_small: Path, item: dict[str, Any], message: str
) -> None:
    refused_alike(tmp_path, _synthetic(tmp_path, census_small, **item), message)


def test_a_table_of_too_many_answers_is_refused(tmp_path: Path, census_small: Path) -> None:
    # old code: 4,194,304 groups accepted (a count over 10^6 took 6 GB before the fix to
    # linear-time variances)
    tables = [
        {
            "name": "t",
            "epsilon": 1.0,
            "by": [{"column": "income", "bins": 2**21}],
            "measures": ["count"],
        }
    ]
    refused_alike(
        tmp_path,
        config(tmp_path, census_small, tables=tables),
        "table 't': groups x measures is 2,097,152, more than the limit of 1,048,576",
    )


def test_a_group_named_like_the_margin_mark_is_refused(tmp_path: Path, census_small: Path) -> None:
    # old code: published; answers.csv had the category '*' and the margin '*' as two rows of
    # one key, and the plot dropped the category as if it were a margin
    path = config(
        tmp_path,
        census_small,
        tables=[
            {"name": "t", "epsilon": 1.0, "by": ["race"], "measures": ["count"], "margins": True}
        ],
    )
    raw = yaml.safe_load(path.read_text())
    raw["dataset"]["columns"]["race"]["categories"].append("*")
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    refused_alike(
        tmp_path,
        path,
        "table 't': 'race' has a group named '*', the mark of a summed-out key in answers.csv",
    )


@pytest.mark.parametrize(
    ("at", "reason"),
    [
        ([0], "quantile probabilities must lie in (0, 1), got [0.0]"),
        ([1], "quantile probabilities must lie in (0, 1), got [1.0]"),
        ([1.5], "quantile probabilities must lie in (0, 1), got [1.5]"),
        ([], "at: List should have at least 1 item"),
    ],
)
def test_a_bad_quantile_probability_says_why(
    tmp_path: Path, census_small: Path, at: list[float], reason: str
) -> None:
    # old code: "tables.0.measures.0.\\"literal['count']\\": Input should be 'count', got {...}"
    measures = ["count", {"quantile": "age", "at": at}]
    tables = [{"name": "t", "epsilon": 1.0, "by": ["sex"], "measures": measures}]
    line = refused_alike(tmp_path, config(tmp_path, census_small, tables=tables), reason)
    assert "tables.0.measures: measure 1 (quantile): " in line and "count" not in line


@pytest.mark.parametrize("pool", ["", " ", "a/b"])
def test_deploy_refuses_a_pool_name_prefect_cannot_look_up(tmp_path: Path, pool: str) -> None:
    # old code: '' reached Prefect's client, which asked for the pools' collection: a 405
    # traceback (here, with no API configured: "no Prefect API configured")
    config = ROOT / "configs" / "demo.yaml"
    result = CliRunner().invoke(cli.app, ["deploy", str(config), "--pool", pool])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "dppub: error: --pool must name a work pool (no '/' or '%', no surrounding spaces), "
        f"got {pool!r}"
    )


@pytest.mark.parametrize("immutable", ["file", "folder", "both"])
def test_an_auditor_reads_a_ledger_on_read_only_storage(
    tmp_path: Path, census_small: Path, immutable: str
) -> None:
    # old code: audit and plan said "permission denied (unable to open database file)" and
    # could not verify the chain. Tests run as root, which ignores modes: the immutable
    # attribute (chattr +i) makes the storage read-only for root too.
    import shutil
    import subprocess

    from tests.flows.conftest import publish_here

    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    tables = [{"name": "t", "epsilon": 0.5, "by": ["sex"], "measures": ["count"]}]
    path = config(tmp_path, census_small, tables=tables)
    publish_here(path, tmp_path / "ledger.sqlite", tmp_path / "out")
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "ledger.sqlite", copy / "ledger.sqlite")
    before = (copy / "ledger.sqlite").read_bytes()
    locked = {"file": [copy / "ledger.sqlite"], "folder": [copy]}.get(
        immutable, [copy / "ledger.sqlite", copy]
    )
    subprocess.run(["chattr", "+i", *map(str, locked)], check=True)
    try:
        ledger = str(copy / "ledger.sqlite")
        audit = CliRunner().invoke(cli.app, ["audit", "--ledger", ledger])
        assert audit.exit_code == 0, audit.output
        assert "hash chain: ok (5 rows" in audit.stdout
        planned = CliRunner().invoke(cli.app, ["plan", str(path), "--ledger", ledger])
        assert planned.exit_code == 0, planned.output
        assert "remaining before this run: epsilon=7.5 of 8" in planned.stdout
        run = CliRunner().invoke(
            cli.app, ["run", str(path), "--ledger", ledger, "--out", str(tmp_path / "out2")]
        )
        assert run.exit_code == 2 and "is read-only" in run.stderr, run.output
    finally:
        subprocess.run(["chattr", "-i", *map(str, locked)], check=True)
    assert (copy / "ledger.sqlite").read_bytes() == before
    if immutable != "file":  # (a writable folder gets SQLite's -wal and -shm files)
        assert sorted(p.name for p in copy.iterdir()) == ["ledger.sqlite"]
