"""Hostile configs and operations: one clear line, exit 2, before the ledger, within seconds.

Each case was a traceback, a hang or a silent acceptance before. The CLI runs in-process
(typer's CliRunner): every case here is refused before Prefect starts.
"""

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]


def _demo(tmp: Path, data: Path) -> dict[str, Any]:
    raw: dict[str, Any] = example("demo.yaml")
    raw.pop("schedule")
    raw["dataset"]["path"] = str(data)
    return raw


def _invoke(*args: object) -> Any:
    return CliRunner().invoke(cli.app, [str(a) for a in args])


def _one_line(result: Any, code: int, message: str, started: float) -> str:
    assert time.monotonic() - started < 30
    assert result.exit_code == code, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dppub: error:") and message in lines[0], lines[0]
    assert "Traceback" not in result.output
    return str(lines[0])


def _refused_before_the_ledger(tmp: Path, config: Path, message: str, **kw: Path) -> str:
    ledger = kw.get("ledger", tmp / "l.sqlite")
    out = kw.get("out", tmp / "out")
    started = time.monotonic()
    line = _one_line(_invoke("run", config, "--ledger", ledger, "--out", out), 2, message, started)
    assert not ledger.exists()
    return line


def _write(tmp: Path, raw: dict[str, Any], name: str = "c.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


EDITS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "tiny epsilon": (
        lambda r: r["workloads"][0].update(epsilon=1e-320),
        "workloads.0.epsilon: epsilon must be at least 1e-06",
    ),
    "huge integer bounds under a hierarchy": (
        lambda r: r["dataset"]["columns"]["age"].update(bounds=[0, 1e18]),
        "hierarchy 'age': domain [0, 1000000000000000000] is too large to enumerate",
    ),
    "huge integer bounds as a histogram axis": (
        lambda r: (
            r["dataset"]["columns"].update(weeks={"type": "int", "bounds": [0, 1e18]}),
            r["workloads"].append(
                {"name": "w", "epsilon": 0.1, "attributes": [{"column": "weeks"}]}
            ),
        ),
        "the cells of 'weeks' is 1,000,000,000,000,000,001, more than the limit of 4,194,304",
    ),
    "a trillion clusters": (
        lambda r: r["clustering"][0].update(k=10**12),
        "clustering.0.k: Input should be less than or equal to 10000",
    ),
    "a billion bins": (
        lambda r: r["workloads"][1]["attributes"][0].update(bins=10**9),
        "bins: Input should be less than or equal to 4194304",
    ),
    "a billion iterations": (
        lambda r: r["clustering"][0].update(iterations=10**9),
        "iterations: Input should be less than or equal to 1000",
    ),
    "marginal_k beyond the attributes": (
        lambda r: r["workloads"][2].update(marginal_k=5),
        "marginal_k=5 exceeds 2 attribute(s)",
    ),
    "hierarchy file that never ends": (
        lambda r: r["hierarchies"].update(education={"file": "/dev/zero"}),
        "hierarchy file /dev/zero is not a regular file",
    ),
    "leaves, which dppub derives from the hierarchies": (
        lambda r: r.update(leaves={"zip": ["190146"]}),
        "leaves: Extra inputs are not permitted",
    ),
    "base_dir, which dppub sets from the file's place": (
        lambda r: r.update(base_dir="/"),
        "base_dir: Extra inputs are not permitted",
    ),
    "hierarchy file that is not there": (
        lambda r: r["hierarchies"].update(education={"file": "no-such-hierarchy.csv"}),
        "no-such-hierarchy.csv does not exist",
    ),
}


@pytest.mark.parametrize("case", list(EDITS))
def test_config_values_that_hang_or_crash_are_refused(
    tmp_path: Path, census_small: Path, case: str
) -> None:
    edit, message = EDITS[case]
    raw = _demo(tmp_path, census_small)
    edit(raw)
    _refused_before_the_ledger(tmp_path, _write(tmp_path, raw), message)


def test_yaml_that_yaml_would_accept_silently(tmp_path: Path, census_small: Path) -> None:
    (tmp_path / "datasets").mkdir()
    declared = (
        (ROOT / "configs" / "datasets" / "census.yaml")
        .read_text()
        .replace("../../data/sample/census.parquet", str(census_small))
    )
    dataset = tmp_path / "datasets" / "census.yaml"
    config = tmp_path / "demo.yaml"
    config.write_text((ROOT / "configs" / "demo.yaml").read_text())
    dataset.write_text(declared.replace("  name: census_demo", "  name: x\n  name: census_demo"))
    line = _refused_before_the_ledger(tmp_path, config, "key 'name' is given twice")
    first = declared.splitlines().index(next(x for x in declared.splitlines() if "name:" in x))
    assert f"{dataset}: line {first + 2}" in line  # the dataset file names the problem
    assert f"(lines {first + 1} and {first + 2})" in line
    dataset.write_text(declared)
    nan = tmp_path / "nan.yaml"
    nan.write_text(config.read_text().replace("threshold: 75000", "threshold: .nan"))
    _refused_before_the_ledger(tmp_path, nan, "the number '.nan' is not finite")


def test_unreadable_configs(tmp_path: Path) -> None:
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("dataset: {name: caf\xe9}\n".encode("latin-1"))
    _refused_before_the_ledger(tmp_path, latin, "not UTF-8 text")
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 10_000 + "]" * 10_000 + "\n")
    _refused_before_the_ledger(tmp_path, deep, "nested more than 20 levels deep")
    big = tmp_path / "big.yaml"
    big.write_text("items:\n" + "".join(f"  - {i}\n" for i in range(2_000_000)))
    _refused_before_the_ledger(tmp_path, big, "more than the limit of 1,048,576")


def test_bad_places_to_publish_or_keep_the_ledger(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    census_frame.head(500).to_parquet(folder / "part-0.parquet", index=False)
    config = _write(tmp_path, _demo(tmp_path, folder))
    afile = tmp_path / "afile"
    afile.write_text("x")
    _refused_before_the_ledger(tmp_path, config, "exists and is not a folder", out=afile)
    _refused_before_the_ledger(tmp_path, config, "overlaps the dataset", out=folder / "out")
    inside = _write(tmp_path, _demo(tmp_path, tmp_path / "pub" / "data"), "inside.yaml")
    (tmp_path / "pub" / "data").mkdir(parents=True)
    census_frame.head(10).to_parquet(tmp_path / "pub" / "data" / "p.parquet", index=False)
    _refused_before_the_ledger(tmp_path, inside, "overlaps the dataset", out=tmp_path / "pub")
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    subprocess.run(["chattr", "+i", str(frozen)], check=True)  # chmod does not stop root
    try:
        _refused_before_the_ledger(tmp_path, config, "cannot be written", out=frozen / "out")
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], check=True)
    started = time.monotonic()
    result = _invoke("run", config, "--ledger", afile / "l.sqlite", "--out", tmp_path / "o")
    _one_line(result, 2, "afile is not a folder", started)


def test_a_struct_column_in_a_later_file(tmp_path: Path, census_frame: pd.DataFrame) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    census_frame.head(300).to_parquet(folder / "a.parquet", index=False)
    table = pa.Table.from_pandas(census_frame.head(300), preserve_index=False)
    nested = pa.array([{"x": i} for i in range(300)], type=pa.struct([("x", pa.int64())]))
    pq.write_table(table.set_column(0, "age", nested), folder / "b.parquet")
    config = _write(tmp_path, _demo(tmp_path, folder))
    _refused_before_the_ledger(tmp_path, config, "b.parquet: column 'age' should be int")


def _with_unit(raw: dict[str, Any]) -> None:
    raw["dataset"]["columns"]["person"] = {"type": "int", "bounds": [0, 10**6]}
    raw["dataset"].update(privacy_unit="person", max_rows_per_unit=3)


def _renewing_with_a_unit(raw: dict[str, Any]) -> None:
    _with_unit(raw)
    raw["dataset"]["path"] = str(Path(raw["dataset"]["path"]).parent / "{period}.parquet")
    raw["dataset"]["budget"] = {"epsilon": 1.0, "per": "month", "renew": True}


# issue 29 items 5, 7 and 8, issue 24 item 1: each was accepted by `plan` and `run`.
CONFIG_EDITS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "epsilon true": (
        lambda r: r["workloads"][0].update(epsilon=True),
        "workloads.0.epsilon: must be a number, got true/false True",
    ),
    "epsilon as text": (
        lambda r: r["dataset"]["budget"].update(epsilon="0.5"),
        "dataset.budget.epsilon: must be a number, got text '0.5'",
    ),
    "epsilon 1e308": (
        lambda r: (
            r["dataset"]["budget"].update(epsilon=1e308),
            r["workloads"][0].update(epsilon=1e308),
        ),
        "dataset.budget.epsilon: epsilon must be at most 1,000",
    ),
    "a release's epsilon 1e308": (
        lambda r: r["workloads"][0].update(epsilon=1e308),
        "workloads.0.epsilon: epsilon must be at most 1,000",
    ),
    "releases totalling more than epsilon 1,000": (
        lambda r: (
            r["dataset"]["budget"].update(epsilon=1000),
            [w.update(epsilon=400) for w in r["workloads"]],
        ),
        "the releases' total epsilon must be at most 1,000",
    ),
    "bounds of 1e300": (
        lambda r: r["dataset"]["columns"]["income"].update(bounds=[0, 1e300]),
        "dataset.columns.income.bounds.1: a bound must lie within [-2^63, 2^63], got 1e+300",
    ),
    "a 300-letter dataset name": (
        lambda r: r["dataset"].update(name="d" * 300),
        "dataset.name: a name is at most 64 characters",
    ),
    "an invalid cron": (
        lambda r: r.update(schedule={"cron": "0 25 * * *"}),
        "schedule.cron: invalid cron '0 25 * * *'",
    ),
    "an unknown time zone": (
        lambda r: r.update(schedule={"cron": "0 3 * * 1", "timezone": "Europe/Atlantis"}),
        "schedule.timezone: unknown time zone 'Europe/Atlantis'",
    ),
    "a renewing budget with a privacy unit": (
        _renewing_with_a_unit,
        "budget renew: true cannot be used with privacy_unit 'person': a unit may have rows",
    ),
}


@pytest.mark.parametrize("case", list(CONFIG_EDITS))
def test_config_values_plan_and_run_used_to_accept_are_refused(
    tmp_path: Path, census_small: Path, case: str
) -> None:
    edit, message = CONFIG_EDITS[case]
    raw = _demo(tmp_path, census_small)
    edit(raw)
    config = _write(tmp_path, raw)
    _refused_before_the_ledger(tmp_path, config, message)
    started = time.monotonic()
    _one_line(_invoke("plan", config, "--ledger", tmp_path / "l.sqlite"), 2, message, started)
    # A ledger that exists is not touched either.
    from dppub.dp.ledger import Ledger

    ledger = tmp_path / "existing.sqlite"
    Ledger(ledger)
    assert ledger.exists()
    before = ledger.read_bytes(), ledger.stat().st_mtime_ns
    started = time.monotonic()
    result = _invoke("run", config, "--ledger", ledger, "--out", tmp_path / "out")
    _one_line(result, 2, message, started)
    assert (ledger.read_bytes(), ledger.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir() if "sqlite" in p.name) == [ledger.name]


CRONS = [
    "0 3 * * 1",
    "*/15 8-18 * * mon-fri",
    "@daily",
    "0 0 1 1 *",
    "0 3 * * 1 30",
    "0 0 L * *",
    "61 * * * *",
    "0 25 * * *",
    "* * * *",
    "H 3 * * *",
    "0 3 * * R",
    "*/0 * * * *",
    "0 0 * * 8",
    "every monday",
    "",
]


@pytest.mark.parametrize("cron", CRONS)
def test_a_cron_loads_exactly_when_prefect_accepts_it(tmp_path: Path, cron: str) -> None:
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    from dppub.dp.errors import ConfigError
    from dppub.dp.pipeline.plan import load_config

    try:
        CronSchedule(cron=cron, timezone="Europe/Berlin")
        prefect_accepts = True
    except ValidationError:
        prefect_accepts = False
    raw = example("demo.yaml")
    raw["schedule"] = {"cron": cron, "timezone": "Europe/Berlin"}
    if prefect_accepts:
        assert load_config(_write(tmp_path, raw)).schedule is not None
    else:
        with pytest.raises(ConfigError, match="schedule.cron: "):
            load_config(_write(tmp_path, raw))
