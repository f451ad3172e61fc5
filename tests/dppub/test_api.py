"""The Python API as a user calls it: ``import dppub`` from another folder, plan, publish."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import dppub
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.flows.conftest import small_config
from tests.values import obj, seq

# A user's script, run from a folder of its own: the package, not the checkout, is imported.
SCRIPT = """
import json, os, sys
import dppub
assert "prefect" not in sys.modules, "import dppub imported Prefect"
config, ledger, out = sys.argv[1:]
before = dppub.plan(config, ledger=ledger)
failed = {}
for fault in ("eio", "int"):  # an I/O error, then Ctrl-C, once the run was reserved
    os.environ.update(DPPUB_FAULT_AT="reading", DPPUB_FAULT=fault)
    try:
        dppub.publish(config, ledger=ledger, out=out)
    except (OSError, KeyboardInterrupt) as exc:
        failed[fault] = [type(exc).__name__, str(exc), exc.__notes__]
del os.environ["DPPUB_FAULT_AT"]
done = dppub.publish(config, ledger=ledger, out=out)
after = dppub.plan(config, ledger=ledger)
try:
    dppub.publish(config, ledger=ledger, out=out)
    refused = None
except dppub.BudgetExceededError as exc:
    refused = str(exc)
print(json.dumps({
    "module": dppub.__file__,
    "fits": [before.fits, after.fits],
    "refusal": after.refusal,
    "remaining": [before.remaining_epsilon, after.remaining_epsilon],
    "total": before.total_epsilon,
    "publication": [type(done).__name__, done.run_id, str(done.path), done.manifest],
    "cost": done.cost.epsilon,
    "failed": failed,
    "refused": refused,
}))
"""


@pytest.mark.slow
def test_publish_and_plan_from_another_folder(tmp_path: Path, census_small: Path) -> None:
    config = small_config(tmp_path, census_small, budget=2.0)  # one run of 1.5 fits, not two
    ledger, out, elsewhere = tmp_path / "ledger.sqlite", tmp_path / "out", tmp_path / "user"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(config), str(ledger), str(out)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(got["module"]).resolve() == Path(dppub.__file__).resolve()
    kind, run_id, path, manifest = got["publication"]
    assert kind == "Publication"
    assert Path(path) == out / "census_demo" / run_id
    assert manifest == json.loads((Path(path) / "manifest.json").read_text())
    assert manifest["run_id"] == run_id
    assert got["cost"] == pytest.approx(got["total"]) == pytest.approx(1.5)
    assert got["fits"] == [True, False]
    assert got["remaining"] == pytest.approx([2.0, 0.5])
    assert "requested epsilon=1.5" in got["refusal"]
    # A run that failed once reserved says how it was settled, as `dppub run`'s line does.
    kind, error, notes = got["failed"]["eio"]
    assert kind == "OSError"
    assert "Input/output error" in error and "<fault injected at reading>" in error
    assert notes[0].startswith("dppub: I/O error: Input/output error")
    assert notes[0].endswith("was aborted, nothing was spent")
    kind, _, notes = got["failed"]["int"]  # re-raised once the run was settled
    assert kind == "KeyboardInterrupt"
    assert notes[0].startswith("dppub: interrupted by SIGINT; run ")
    assert notes[0].endswith("was aborted, nothing was spent")
    assert got["refused"] == got["refusal"]  # publish refuses what plan said it would
    spent = spending_summary(Ledger(str(ledger)))["census_demo"]
    assert (spent["runs"], spent["aborted_runs"], spent["pending_runs"]) == (1, 2, 0)
    published = [p.name for p in (out / "census_demo").iterdir() if not p.name.startswith(".")]
    assert published == [run_id]


def test_plan_over_budget_does_not_fit(tmp_path: Path, census_small: Path) -> None:
    config = small_config(tmp_path, census_small, budget=1.0)  # the run costs 1.5
    planned = dppub.plan(config, ledger=tmp_path / "ledger.sqlite")  # a Path will do
    assert planned.fits is False
    assert planned.refusal is not None and "requested epsilon=1.5" in planned.refusal
    assert planned.total_epsilon == pytest.approx(1.5)
    assert planned.remaining_epsilon == pytest.approx(1.0)
    assert planned.details["fits"] is False
    assert not (tmp_path / "ledger.sqlite").exists()  # a plan never creates the ledger
    assert dppub.plan(small_config(tmp_path, census_small, budget=2.0)).fits is True


def test_a_config_object_plans_as_its_file(tmp_path: Path, census_small: Path) -> None:
    path = small_config(tmp_path, census_small)
    raw = yaml.safe_load(path.read_text())
    config = dppub.Config.model_validate({**raw, "base_dir": tmp_path})  # built in Python
    from_file = dppub.plan(path, ledger=tmp_path / "ledger.sqlite")
    from_object = dppub.plan(config, ledger=tmp_path / "ledger.sqlite")
    assert from_object.details == from_file.details
    assert from_object.text == from_file.text
    assert from_object.text.startswith("dataset census_demo\n")
    assert from_object.text.endswith(
        "remaining before this run: epsilon=4 of 4 (epsilon=4 delta=0 lifetime)\n"
    )
    names = [r.name for r in from_object.releases]
    assert names == [obj(r)["name"] for r in seq(from_file.details["releases"])]
    assert sum(r.cost.epsilon for r in from_object.releases) == pytest.approx(1.5)
    assert from_object.total.epsilon == pytest.approx(1.5) and from_object.refused is None


@pytest.mark.slow
def test_publish_returns_each_release_from_its_files(tmp_path: Path, census_small: Path) -> None:
    config = small_config(tmp_path, census_small)
    done = dppub.publish(config, ledger=tmp_path / "ledger.sqlite", out=tmp_path / "out")
    assert isinstance(done, dppub.Publication)
    assert list(done.releases) == [obj(r)["name"] for r in seq(done.manifest["releases"])]
    for name, release in done.releases.items():
        assert isinstance(release, dppub.ReleaseResult)
        assert release.path == done.path / name
        assert release.result == json.loads((release.path / "release.json").read_text())
        assert release.summary.to_json() == release.result  # typed, and the same file
        assert type(release.summary.result) is release.summary.release_kind.result
        files = sorted(p.stem for p in release.path.glob("*.parquet"))
        assert sorted(release.answers) == files
        for stem, frame in release.answers.items():
            pd.testing.assert_frame_equal(frame, pd.read_parquet(release.path / f"{stem}.parquet"))
    assert list(done.releases["age_cdf"].answers) == ["answers", "estimate"]
    assert done.releases["age_cdf"].kind == "workload"
    assert len(done.releases["age_cdf"].answers["answers"]) == 74  # its queries
