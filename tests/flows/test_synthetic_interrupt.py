"""SIGTERM / Ctrl-C while AIM runs (``dppub run``, a ``synthetic:`` release): the run stops
between AIM's rounds and settles at once -- charged for the measurements already drawn,
nothing published -- instead of finishing every round first. Slow: real Private-PGM fits."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-m", "dppub.cli", "run")
ROUND = re.compile(r"synthetic 'synthetic_census': round (\d+): \d+% of rho spent")


def _config(directory: Path, data: Path) -> Path:
    """configs/synthetic.yaml on ``data``, its synthetic release alone, with more rounds than
    AIM's default would take (``max_rounds`` caps them at 8)."""
    raw = example("synthetic.yaml")
    raw["dataset"]["path"] = str(data)
    raw.pop("anonymize")
    raw["synthetic"][0].update(
        columns=["sex", "race", "education", "marital"],
        workload={"marginals": 2},
        planned_rounds=64,  # rho / 64 a round until annealing raises it
        max_rounds=8,
        # A round that re-measures a clique reuses its compiled fit: with 1000 iterations it
        # can take 10 ms, less than a loaded box may take to run the signal handler; 100,000
        # make every round last long enough for the stop to land before the next one.
        iters=100_000,
    )
    raw["synthetic"][0].pop("levels")
    raw["synthetic"][0].pop("bins")
    path = directory / "synthetic.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "prefect"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGTERM, True)],
)
def test_a_signal_mid_aim_settles_after_the_round_charged(
    tmp_path: Path,
    census_small: Path,
    sig: signal.Signals,
    prefect: bool,
    request: pytest.FixtureRequest,
) -> None:
    # Without a Prefect API (releases on a thread pool) and recorded in Prefect (the release
    # a Prefect task, its round lines through Prefect's logger).
    env = dict(os.environ)
    if prefect:
        env["PREFECT_API_URL"] = request.getfixturevalue("prefect_server").url
    config = _config(tmp_path, census_small)
    ledger, out, err_path = tmp_path / "ledger.sqlite", tmp_path / "out", tmp_path / "stderr"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [*CLI, config, "--ledger", ledger, "--out", out],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        while not ROUND.search(err_path.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.05)
        os.kill(proc.pid, sig)
        seen = len(ROUND.findall(err_path.read_text()))  # rounds done when the signal came
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stderr = err_path.read_text()
    assert code == 128 + sig, stderr[-3000:]
    rounds = [int(r) for r in ROUND.findall(stderr)]
    # The round under way when the signal came may finish; no later one starts.
    assert rounds == list(range(1, len(rounds) + 1)) and len(rounds) <= seen + 1, stderr[-3000:]
    errors = [ln for ln in stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1 and errors[0].endswith("was charged"), stderr[-3000:]
    assert errors[0].startswith(f"dppub: error: interrupted by {sig.name}; run ")
    assert "Traceback" not in stderr
    book = Ledger(str(ledger))
    drawn = [r["epsilon"] for r in book.history() if r["event"] == "draw"]
    assert drawn == [pytest.approx(1.0)]  # the release's draw, recorded before AIM measured
    summary = spending_summary(book)["census_demo"]
    assert summary["lifetime_spent_epsilon"] == pytest.approx(1.0)  # charged, not refunded
    assert summary["pending_runs"] == 0
    folder = out / "census_demo"
    assert [p.name for p in folder.iterdir() if not p.name.startswith(".")] == []
    assert not any((folder / ".staging").glob("*/"))
    assert book.verify().ok
