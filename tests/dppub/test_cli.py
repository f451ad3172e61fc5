"""The ``dppub`` command line, run as a user would: real processes. No Prefect API is configured
here, so runs publish without Prefect (tests/flows/test_prefect_path.py covers a server)."""

import http.server
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dppub import cli
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from tests.flows.conftest import ConfigFactory

pytestmark = pytest.mark.slow  # real processes (they were in tests/flows, slow as a whole)

ROOT = Path(__file__).resolve().parents[2]


def dppub(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dppub.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def dppub_here(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The same command in this process (typer's CliRunner), where what is checked is the
    command's answer, not what a process adds (its exit status is covered above and by
    test_runs_go_on_until_the_budget_refuses): a process costs a second of start-up."""
    result = CliRunner().invoke(cli.app, [str(a) for a in args], env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(result.output) from result.exception  # not the command's answer
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return errors[0]


def _ledger_rows(path: Path) -> int:
    with sqlite3.connect(path) as con:
        return int(con.execute("SELECT COUNT(*) FROM entries").fetchone()[0])


def _published(out: Path) -> list[str]:
    d = out / "census_demo"
    return sorted(p.name for p in d.iterdir() if not p.name.startswith(".")) if d.exists() else []


def test_runs_go_on_until_the_budget_refuses(tmp_path: Path, config_factory: ConfigFactory) -> None:
    config = config_factory(budget=1.2, light=True)  # the plan costs 0.5: two runs fit, not three
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"

    plan = json.loads(dppub("plan", config, "--ledger", ledger, "--json").stdout)
    assert plan["total_epsilon"] == pytest.approx(0.5)
    assert plan["remaining_epsilon"] == pytest.approx(1.2)

    run_ids = []
    for _ in range(2):
        done = dppub("run", config, "--ledger", ledger, "--out", out)
        assert done.returncode == 0, done.stderr[-2000:]
        run_ids.append(done.stdout.strip().splitlines()[-1])
    assert _published(out) == sorted(run_ids)

    rows = _ledger_rows(ledger)
    refused = dppub("run", config, "--ledger", ledger, "--out", out)
    assert refused.returncode == 3
    line = refused.stderr.strip()
    assert "\n" not in line
    assert "budget epsilon=1.2" in line
    assert "spent epsilon=1 " in line
    assert "requested epsilon=0.5" in line
    assert _published(out) == sorted(run_ids)  # no new folder
    assert _ledger_rows(ledger) == rows  # ledger unchanged

    audit = dppub("audit", "--ledger", ledger, "--json")
    assert audit.returncode == 0
    report = json.loads(audit.stdout)
    manifests = [
        json.loads((out / "census_demo" / r / "manifest.json").read_text()) for r in run_ids
    ]
    assert report["chain_ok"] is True
    spent = report["datasets"]["census_demo"]
    assert spent["spent_epsilon"] == pytest.approx(sum(m["total_epsilon"] for m in manifests))
    assert spent["runs"] == 2

    with sqlite3.connect(ledger) as con:  # tamper: shrink what a release cost
        con.execute("UPDATE entries SET epsilon = 0.1 WHERE event = 'reserve'")
    tampered = dppub("audit", "--ledger", ledger, "--json")
    assert tampered.returncode == 1
    assert json.loads(tampered.stdout)["chain_ok"] is False


def test_bad_input_is_one_line_and_publishes_nothing(
    tmp_path: Path, config_factory: ConfigFactory
) -> None:
    bogus = tmp_path / "bogus.parquet"
    bogus.write_text("not parquet at all")
    config = config_factory()
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["path"] = str(bogus)
    config.write_text(yaml.safe_dump(raw))
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    done = dppub_here("run", config, "--ledger", ledger, "--out", out)
    assert done.returncode == 2
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("dppub: error:")]
    assert len(errors) == 1  # Prefect may log its shutdown after it
    assert "cannot read" in errors[0]
    assert "as Parquet" in errors[0]
    assert "Traceback" not in done.stderr
    assert _published(out) == []
    assert not ledger.exists()  # refused before anything was reserved


def test_one_bad_record_changes_nothing_on_the_stream_engine(
    tmp_path: Path, config_factory: ConfigFactory, census_frame: pd.DataFrame
) -> None:
    # Neighbours: the same 2,000 rows, one of them with an undeclared category deep in the file.
    config = config_factory(budget=10.0)
    outcomes = []
    for name, value in (("good", None), ("bad", "Martian")):
        frame = census_frame.head(2_000).copy()
        if value is not None:
            frame.loc[1_500, "education"] = value
        data = tmp_path / f"{name}.parquet"
        frame.to_parquet(data, index=False, row_group_size=500)
        raw = yaml.safe_load(config.read_text())
        raw["dataset"].update(path=str(data), engine="stream", batch_size=300)
        raw["dataset"]["name"] = f"census_{name}"
        config.write_text(yaml.safe_dump(raw))
        ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
        done = dppub("run", config, "--ledger", ledger, "--out", out)
        outcomes.append(done.returncode)
        assert "Martian" not in done.stderr  # nothing names a value
    assert outcomes == [0, 0]


def test_config_errors_exit_2_without_starting_prefect(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: [\n")
    done = dppub_here("run", bad, "--ledger", tmp_path / "l.sqlite")
    assert done.returncode == 2
    assert "YAML error" in done.stderr
    assert not (tmp_path / "l.sqlite").exists()


def test_a_hand_run_without_a_prefect_api_starts_no_server_and_says_so(
    tmp_path: Path,
    config_factory: ConfigFactory,
) -> None:
    # No PREFECT_API_URL, no Prefect profile: every hand run used to start a temporary Prefect
    # server (most of its time; the first one in a fresh state folder on a loaded machine timed
    # out: exit 1) and record its history in a throw-away database. Now it publishes without
    # Prefect, writes nothing of Prefect's anywhere, and says so in one line.
    config = config_factory(light=True)
    home, state, out = tmp_path / "home", tmp_path / "state", tmp_path / "out"
    home.mkdir()
    unset = ("PREFECT_HOME", "PREFECT_API_URL", "PREFECT_PROFILES_PATH")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    done = subprocess.run(
        [sys.executable, "-m", "dppub.cli", "run", str(config), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "HOME": str(home), "DPPUB_HOME": str(state)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    from dppub.run import NOT_RECORDED

    assert [ln for ln in done.stderr.splitlines() if "Prefect" in ln] == [NOT_RECORDED]
    assert done.stdout.strip() == _published(out)[0]  # published, and stdout is the run id
    assert not (home / ".prefect").exists()
    assert not (state / "prefect").exists()
    s = spending_summary(Ledger(config.parent / "ledger.sqlite"))["census_demo"]
    assert (s["lifetime_spent_epsilon"], s["runs"], s["pending_runs"]) == (0.5, 1, 0)


def test_no_command_imports_prefect_before_it_is_configured() -> None:
    # What keeps the test above true by construction: the CLI module and what every command
    # imports up front are free of Prefect; its settings are made before any command runs.
    probe = "import sys, dppub.cli, dppub.commands; print(sorted(m for m in sys.modules"
    probe += " if m.split('.')[0] == 'prefect'))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DPPUB_LEDGER_TIMEOUT", "abc"),
        ("DPPUB_LEDGER_TIMEOUT", "-1"),
        ("DPPUB_MEMORY_BUDGET_MB", "abc"),
        ("DPPUB_MEMORY_BUDGET_MB", "nan"),
        ("DPPUB_MEMORY_BUDGET_MB", "0"),
    ],
)
@pytest.mark.parametrize("command", ["run", "plan", "audit"])
def test_a_bad_environment_value_is_one_line_before_the_ledger(
    tmp_path: Path, config_factory: ConfigFactory, name: str, value: str, command: str
) -> None:
    config = config_factory()
    ledger = tmp_path / "ledger.sqlite"
    args = {"run": ("run", config), "plan": ("plan", config), "audit": ("audit",)}[command]
    # One case in a real process (its exit status), the others in this one.
    real = (command, name, value) == ("run", "DPPUB_LEDGER_TIMEOUT", "abc")
    done = (dppub if real else dppub_here)(*args, "--ledger", ledger, env={name: value})
    assert done.returncode == 2, done.stderr[-3000:]
    assert _one_error_line(done) == (
        f"dppub: error: environment variable {name} must be a number "
        f"{'>= 0' if name == 'DPPUB_LEDGER_TIMEOUT' else '> 0'}, got '{value}'"
    )
    assert not ledger.exists()  # refused before the ledger was opened, nothing held


@pytest.mark.parametrize("target", ["missing/audit.html", "/dev/full"])
def test_audit_html_that_cannot_be_written_is_one_line(
    tmp_path: Path, config_factory: ConfigFactory, target: str
) -> None:
    ledger = tmp_path / "ledger.sqlite"
    assert (
        dppub_here(
            "run", config_factory(light=True), "--ledger", ledger, "--out", tmp_path / "o"
        ).returncode
        == 0
    )
    page = target if target.startswith("/") else tmp_path / target
    done = dppub_here("audit", "--ledger", ledger, "--html", page)
    assert done.returncode == 2
    line = _one_error_line(done)
    assert line.startswith("dppub: error: I/O error: ") and line.endswith(f"({page})")


class _NotAPrefectApi(http.server.BaseHTTPRequestHandler):
    """Answers the health check, then fails every Prefect API call (a server that died or is
    not Prefect's)."""

    def _answer(self) -> None:
        healthy = self.path.rstrip("/").endswith("/health")
        self.send_response(200 if healthy else 500)
        self.end_headers()
        self.wfile.write(b"true" if healthy else b"{}")

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


def test_an_unreachable_prefect_api_is_one_line_and_spends_nothing(
    tmp_path: Path, config_factory: ConfigFactory
) -> None:
    config, ledger, out = config_factory(), tmp_path / "ledger.sqlite", tmp_path / "out"
    closed = "http://127.0.0.1:9/api"  # the discard port: nothing listens
    done = dppub("run", config, "--ledger", ledger, "--out", out, env={"PREFECT_API_URL": closed})
    assert done.returncode == 2
    line = _one_error_line(done)
    assert f"PREFECT_API_URL={closed} is unreachable" in line and "unset PREFECT_API_URL" in line
    assert not ledger.exists()  # refused before the budget was held

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAPrefectApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/api"
        done = dppub("run", config, "--ledger", ledger, "--out", out, env={"PREFECT_API_URL": url})
    finally:
        server.shutdown()
    assert done.returncode == 2
    line = _one_error_line(done)
    assert f"the Prefect API ({url}) failed" in line
    assert line.endswith("was aborted, nothing was spent")  # settled before exiting
    s = spending_summary(Ledger(ledger))["census_demo"]
    assert (s["lifetime_spent_epsilon"], s["pending_runs"]) == (0.0, 0)
    assert _published(out) == []


def test_two_users_running_one_config_spend_one_budget(
    tmp_path: Path, config_factory: ConfigFactory
) -> None:
    # A scheduled job and a hand run by another user: different homes, no --ledger.
    config = config_factory(budget=0.7, light=True)  # the plan costs 0.5: one run fits
    users = []
    for name in ("cron", "ana"):
        home = tmp_path / name
        home.mkdir()
        env = {"HOME": str(home), "DPPUB_HOME": str(home / "state"), "XDG_STATE_HOME": ""}
        users.append(env | {"PREFECT_HOME": str(home / "prefect")})
    first = dppub("run", config, env=users[0])
    assert first.returncode == 0, first.stderr[-2000:]
    second = dppub("run", config, env=users[1])
    assert second.returncode == 3, second.stderr[-2000:]
    assert "spent epsilon=0.5" in _one_error_line(second)
    shared = config.parent / "ledger.sqlite"  # the default: beside the config, whoever runs it
    s = spending_summary(Ledger(shared))["census_demo"]
    assert (s["lifetime_spent_epsilon"], s["runs"]) == (0.5, 1)
    assert not any((tmp_path / u / "state" / "ledger.sqlite").exists() for u in ("cron", "ana"))


def test_the_configs_ledger_key_decides_and_another_ledger_is_refused(
    tmp_path: Path, config_factory: ConfigFactory
) -> None:
    config = config_factory(ledger="books/shared.sqlite")
    (tmp_path / "books").mkdir()
    plan = dppub_here("plan", config, "--json")
    assert plan.returncode == 0, plan.stderr[-2000:]
    other = tmp_path / "mine.sqlite"
    done = dppub_here("run", config, "--ledger", other, "--out", tmp_path / "out")
    assert done.returncode == 2
    line = _one_error_line(done)
    assert f"--ledger {other} is not the config's ledger: books/shared.sqlite" in line
    assert not other.exists() and not (tmp_path / "books" / "shared.sqlite").exists()
    same = dppub_here("plan", config, "--ledger", tmp_path / "books" / "shared.sqlite")
    assert same.returncode == 0, same.stderr[-2000:]  # naming the same ledger is fine


def test_audit_table_counts_aborted_runs(tmp_path: Path) -> None:
    from dppub.dp.budget import PrivacyCost
    from dppub.dp.ledger import BudgetPolicy, DataIdentity

    ledger = tmp_path / "ledger.sqlite"
    book = Ledger(str(ledger))
    data = DataIdentity(name="d", source="/data/d.parquet")
    policy = BudgetPolicy(total=PrivacyCost(epsilon=1.0))
    for run_id in ("r1", "r2", "r3"):  # two aborted (nothing spent), one still pending
        book.reserve(
            run_id=run_id, data=data, policy=policy, cost=PrivacyCost(epsilon=0.25), config_hash="c"
        )
    book.abort(run_id="r1")
    book.abort(run_id="r2")
    done = dppub_here("audit", "--ledger", ledger)
    assert done.returncode == 0, done.stderr[-2000:]
    header, row = done.stdout.splitlines()[:2]
    counts = dict(zip(header.split(), row.split(), strict=True))
    assert (counts["aborted"], counts["pending"], counts["runs"]) == ("2", "1", "0")
    # old code: the column of what was spent read "lifetime"
    assert header.split()[:4] == ["dataset", "budget", "spent", "remaining"]
    assert (counts["spent"], counts["remaining"]) == ("0.25", "0.75")  # the pending hold counts


def test_audit_and_recover_read_the_ledger_a_config_spends_in(
    tmp_path: Path, config_factory: ConfigFactory
) -> None:
    """``dppub run CONFIG`` spends in the config's ledger (``ledger.sqlite`` beside it); audit and
    recover looked only in the state folder's unless given the same path again."""
    from dppub.dp.budget import PrivacyCost
    from dppub.dp.pipeline.plan import load_config

    config = config_factory()
    cfg = load_config(config)
    book = Ledger(cfg.ledger_location)
    book.reserve(
        run_id="r1",
        data=cfg.data_identity,
        policy=cfg.budget_policy,
        cost=PrivacyCost(epsilon=0.5),
        config_hash="c",
    )
    audit = dppub_here("audit", "--config", config, "--json")
    assert audit.returncode == 0, audit.stderr[-2000:]
    datasets = json.loads(audit.stdout)["datasets"]
    assert datasets[cfg.data_identity.name]["pending_runs"] == 1
    recover = dppub_here("recover", "--config", config)
    assert recover.returncode == 0, recover.stderr[-2000:]
    assert recover.stdout.splitlines() == [  # no staging folder to read: left pending
        f"{cfg.data_identity.name} r1: unknown",
        "1 pending run(s) examined",
    ]
    other = dppub_here("audit", "--config", config, "--ledger", tmp_path / "other.sqlite")
    assert other.returncode == 2
    assert "other.sqlite" in _one_error_line(other)
