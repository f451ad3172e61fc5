"""Operations under stress: SIGKILL at every step, signals, 10 racing runs, a full disk.

These run the real ``dppub`` command in subprocesses (no Prefect API is configured: the runs
publish without Prefect; what Prefect stores is checked in test_prefect_path.py).
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dppub import cli
from dppub.dp.faults import STEPS
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.flows.conftest import small_config
from tests.values import num

ROOT = Path(__file__).resolve().parents[2]


class _Run:
    """A ``dppub`` subprocess writing to files (an orphaned child process can hold pipes)."""

    def __init__(self, args: tuple[object, ...], env: dict[str, str], logs: Path) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = logs / "stdout", logs / "stderr"
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dppub.cli", *map(str, args)],
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=out,
                stderr=err,
                text=True,
                start_new_session=True,  # so a killed run's children are reaped with it
            )

    def finish(self) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=300)
        with contextlib.suppress(ProcessLookupError):  # reap a killed run's children
            os.killpg(self.proc.pid, signal.SIGKILL)
        return code, self.out_path.read_text(), self.err_path.read_text()


_counter = iter(range(10**6))


def _start(*args: object, env: dict[str, str] | None = None, logs: Path) -> _Run:
    return _Run(args, env or {}, logs / f"run{next(_counter)}")


def _finish(run: _Run) -> tuple[int, str, str]:
    return run.finish()


def _published(out: Path) -> list[Path]:
    d = out / "census_demo"
    return [p for p in d.iterdir() if not p.name.startswith(".")] if d.exists() else []


def _spent(ledger: Path | str) -> tuple[float, int]:
    s = spending_summary(Ledger(ledger))["census_demo"]
    return s["lifetime_spent_epsilon"], s["pending_runs"]


# What a run killed at each step costs once settled: the light config draws 0.3 (a workload)
# and 0.2 (a regression), concurrently; a run that drew is charged for its draws (at "drawn",
# whichever were recorded: None below), a published one commits.
SETTLED = {
    "reserved": ("aborted", 0.0),
    "reading": ("aborted", 0.0),
    "drawn": ("charged", None),
    "staged": ("charged", 0.5),
    "composed": ("charged", 0.5),
    "renamed": ("committed", 0.5),
    "published": ("committed", 0.5),
    "committed": (None, 0.5),
}


@pytest.mark.parametrize("step", STEPS)
def test_kill_at_every_step_never_undercounts(
    tmp_path: Path, census_small: Path, step: str, ledger_at: str
) -> None:
    config = small_config(tmp_path, census_small, budget=10.0, light=True)
    ledger, out = ledger_at, tmp_path / "out"
    code, _, _ = _finish(
        _start(
            "run",
            config,
            "--ledger",
            ledger,
            "--out",
            out,
            env={"DPPUB_FAULT_AT": step},
            logs=tmp_path,
        )
    )
    assert code == -signal.SIGKILL
    published = _published(out)
    for folder in published:  # nothing half-written is ever visible as published
        assert (folder / "manifest.json").is_file()
    action, cost = SETTLED[step]
    assert len(published) == (1 if action in ("committed", None) else 0)
    charged = sum(json.loads((f / "manifest.json").read_text())["total_epsilon"] for f in published)
    spent, _ = _spent(ledger)
    assert spent >= charged - 1e-12  # the ledger never under-counts what was published

    # The killed run was the real process; what settles it is the command, run in-process
    # (a process of its own would cost a second of start-up for nothing it tests).
    done = CliRunner().invoke(cli.app, ["recover", "--ledger", str(ledger)])
    assert done.exit_code == 0, done.output
    if action is not None:
        assert f": {action}" in done.stdout
    spent, pending = _spent(ledger)
    assert pending == 0
    if cost is None:  # the draws recorded before the kill, and only those
        drawn = [num(r["epsilon"]) for r in Ledger(ledger).history() if r["event"] == "draw"]
        assert drawn and drawn[0] > 0
        cost = sum(drawn)
    assert spent == pytest.approx(cost)  # settled exactly: no second charge, no refund
    assert not any((out / "census_demo" / ".staging").glob("*/")) if out.exists() else True
    assert Ledger(ledger).verify().ok


@pytest.mark.parametrize(
    ("step", "fault", "code", "state", "cost"),
    [
        ("renamed", "term", 143, "committed", 0.5),  # SIGTERM right after the rename
        ("renamed", "eio", 2, "committed", 0.5),  # an I/O error from the folder's fsync
        ("drawn", "int", 130, "charged", None),  # Ctrl-C after a draw
        ("reading", "int", 130, "aborted", 0.0),  # Ctrl-C in the read task: no internal error
        ("reserved", "term", 143, "aborted", 0.0),
    ],
)
def test_signals_and_io_errors_settle_the_run_in_one_line(
    tmp_path: Path,
    census_small: Path,
    step: str,
    fault: str,
    code: int,
    state: str,
    cost: float | None,
) -> None:
    config = small_config(tmp_path, census_small, budget=10.0, light=True)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    env = {"DPPUB_FAULT_AT": step, "DPPUB_FAULT": fault}
    got, _, err = _finish(
        _start("run", config, "--ledger", ledger, "--out", out, env=env, logs=tmp_path)
    )
    assert got == code, err[-2000:]
    errors = [ln for ln in err.splitlines() if ln.startswith("dppub: error:")]
    ending = "nothing was spent" if state == "aborted" else f"was {state}"
    assert len(errors) == 1 and errors[0].endswith(ending), err[-2000:]
    assert "Traceback" not in err
    spent, pending = _spent(ledger)
    if cost is None:  # the draws recorded before the interruption, and only those
        drawn = [num(r["epsilon"]) for r in Ledger(ledger).history() if r["event"] == "draw"]
        cost = sum(drawn)
        assert cost > 0
    assert spent == pytest.approx(cost) and pending == 0  # settled now, not at the next run
    assert len(_published(out)) == (1 if state == "committed" else 0)


def _settled_as_said(err: str, code: int, ledger: Path, out: Path) -> str:
    """One error line, no traceback, and the line says what the ledger and the output folder
    show: the run's final state, what it spent, whether its folder is in place. Returns the
    state."""
    errors = [ln for ln in err.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1, err[-3000:]
    assert "Traceback" not in err and "internal error" not in err, err[-3000:]
    name = signal.Signals(code - 128).name
    said = re.fullmatch(
        rf"dppub: error: interrupted by {name}(?: before the run started)?"
        r"(?:; run (\S+) was (committed|charged|aborted))?[,;]?( nothing was spent)?",
        errors[0],
    )
    assert said is not None, errors[0]
    run_id, state = said.group(1), said.group(2) or "aborted"
    book = Ledger(ledger)
    spent, pending = _spent(ledger)
    assert pending == 0  # settled now, not at the next run
    if run_id is not None:
        assert book.reservation(run_id).state == state
    drawn = sum(num(r["epsilon"]) for r in book.history() if r["event"] == "draw")
    assert spent == pytest.approx({"committed": 0.5, "charged": drawn, "aborted": 0.0}[state])
    assert (state == "charged") == (spent > 0 and state != "committed")
    assert [p.name for p in _published(out)] == ([run_id] if state == "committed" else [])
    assert not any((out / "census_demo" / ".staging").glob("*/")) if out.exists() else True
    assert book.verify().ok
    return state


@pytest.mark.slow
@pytest.mark.parametrize(("step", "fault"), [*((step, "int") for step in STEPS), ("drawn", "term")])
def test_a_second_signal_while_settling_changes_nothing(
    tmp_path: Path, census_small: Path, step: str, fault: str
) -> None:
    # One signal at the step, a second one as the interrupted run starts to be settled (after
    # "committed" there is nothing left to settle: one signal).
    config = small_config(tmp_path, census_small, budget=10.0, light=True)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    env = {"DPPUB_FAULT_AT": f"{step},settling", "DPPUB_FAULT": fault}
    code, stdout, err = _finish(
        _start("run", config, "--ledger", ledger, "--out", out, env=env, logs=tmp_path)
    )
    expected = 130 if fault == "int" else 143
    assert code == expected, err[-3000:]
    assert stdout == ""
    action, _ = SETTLED[step]
    assert _settled_as_said(err, code, ledger, out) == (action or "committed")


@pytest.mark.slow
@pytest.mark.parametrize("after", ["release(s), epsilon=", "data of period"])
def test_two_ctrl_c_from_outside_settle_the_run_in_one_line(
    tmp_path: Path, census_small: Path, after: str
) -> None:
    # Ctrl-C pressed twice at a moment chosen by the log: as the run starts, as the releases do.
    config = small_config(tmp_path, census_small, budget=10.0, light=True)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    run = _start("run", config, "--ledger", ledger, "--out", out, logs=tmp_path)
    deadline = time.monotonic() + 240
    while after not in run.err_path.read_text() and time.monotonic() < deadline:
        assert run.proc.poll() is None, run.err_path.read_text()[-3000:]
        time.sleep(0.05)
    for _ in range(2):
        os.kill(run.proc.pid, signal.SIGINT)
        time.sleep(0.2)
    code, _, err = _finish(run)
    assert code == 130, err[-3000:]
    _settled_as_said(err, code, ledger, out)


def test_the_next_run_resolves_a_dead_reservation(tmp_path: Path, census_small: Path) -> None:
    config = small_config(tmp_path, census_small, budget=0.6, light=True)  # room for one run only
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    code, _, _ = _finish(
        _start(
            "run",
            config,
            "--ledger",
            ledger,
            "--out",
            out,
            env={"DPPUB_FAULT_AT": "reserved"},  # dies holding 0.5, before any draw
            logs=tmp_path,
        )
    )
    assert code == -signal.SIGKILL
    spent, pending = _spent(ledger)
    assert spent == pytest.approx(0.5) and pending == 1  # the dead run still holds its cost
    code, stdout, err = _finish(
        _start("run", config, "--ledger", ledger, "--out", out, logs=tmp_path)
    )
    assert code == 0, err[-2000:]
    assert [p.name for p in _published(out)] == [stdout.strip().splitlines()[-1]]
    spent, pending = _spent(ledger)
    assert spent == pytest.approx(0.5) and pending == 0


def test_ten_concurrent_runs_never_overspend(
    tmp_path: Path, census_small: Path, ledger_at: str
) -> None:
    # Ten processes (five per core) reach the reservation together; exactly two fit. (Twenty
    # doubled the cost, ~40 s of CPU time per back end, without racing harder on two cores.)
    config = small_config(
        tmp_path, census_small, budget=1.0, light=True
    )  # 0.5 a run: exactly two fit
    ledger, out = ledger_at, tmp_path / "out"
    Ledger(ledger)
    procs = [
        _start("run", config, "--ledger", ledger, "--out", out, logs=tmp_path) for _ in range(10)
    ]
    results = [_finish(p) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 0] + [3] * 8
    for code, _, err in results:
        if code == 3:
            assert "budget exceeded for dataset 'census_demo'" in err
            assert "requested epsilon=0.5" in err
    assert len(_published(out)) == 2
    spent, pending = _spent(ledger)
    assert spent == pytest.approx(1.0)
    assert pending == 0
    assert Ledger(ledger).verify().ok


def test_a_full_disk_while_writing_is_one_line_and_the_draws_are_charged(
    tmp_path: Path, census_small: Path
) -> None:
    config = small_config(tmp_path, census_small, budget=10.0, light=True)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    env = {"DPPUB_FAULT_AT": "writing", "DPPUB_FAULT": "enospc"}
    code, stdout, err = _finish(
        _start("run", config, "--ledger", ledger, "--out", out, env=env, logs=tmp_path)
    )
    assert code == 2, err[-2000:]
    errors = [ln for ln in err.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1 and "I/O error: No space left on device" in errors[0]
    assert errors[0].endswith("was charged")  # the releases drew before writing
    assert "Traceback" not in err
    assert stdout == ""
    assert _published(out) == []
    assert _spent(ledger)[1] == 0
