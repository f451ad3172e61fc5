"""``dppub run`` against a real Prefect server (``prefect server start``, never mocked): the
configured API is found as Prefect finds it, the run is recorded there (task runs named after
their releases, artifacts, retries), and a run without any API publishes the same way.

Every other test in tests/flows runs without Prefect; these are the Prefect path's.
"""

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.run import NOT_RECORDED
from tests.examples import example
from tests.flows.conftest import PrefectServer

ROOT = Path(__file__).resolve().parents[2]


def _dppub(
    *args: object, env: dict[str, str], unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess; Prefect's home is the session's empty one (no profile)
    unless ``env`` or ``unset`` say otherwise."""
    base = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", *unset)}
    return subprocess.run(
        [sys.executable, "-m", "dppub.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=base | env,
    )


def _tiny(directory: Path, data: Path) -> Path:
    """Two workloads (epsilon 0.6): the run is mostly start-up."""
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(data)
    for key in ("anonymize", "regressions", "clustering", "schedule"):
        raw.pop(key)
    raw["workloads"] = raw["workloads"][:2]
    path = directory / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _api(server: PrefectServer, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{server.url}/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())


def _flow_run(server: PrefectServer, ledger: Path) -> dict[str, Any]:
    """The one flow run on the server that spent in ``ledger``."""
    runs: list[dict[str, Any]] = [
        r
        for r in _api(server, "flow_runs/filter", {"limit": 200})
        if r["parameters"].get("ledger_path") == str(ledger)
    ]
    assert len(runs) == 1, runs
    return runs[0]


def _task_runs(server: PrefectServer, flow_run: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"flow_runs": {"id": {"any_": [flow_run["id"]]}}, "limit": 200}
    return list(_api(server, "task_runs/filter", body))


def _run_folder(out: Path) -> Path:
    (folder,) = [p for p in (out / "census_demo").iterdir() if not p.name.startswith(".")]
    return folder


def test_a_server_in_the_users_prefect_profile_records_the_run(
    tmp_path: Path, census_small: Path, prefect_server: PrefectServer
) -> None:
    # No PREFECT_API_URL in the environment: only the active profile of the user's Prefect home
    # names the server. dppub used to read os.environ only (and to move Prefect's home into
    # its state folder), so it ran on a throw-away temporary server and the history was lost.
    config = _tiny(tmp_path, census_small)
    home = tmp_path / "home"
    (home / ".prefect").mkdir(parents=True)
    (home / ".prefect" / "profiles.toml").write_text(
        f'active = "team"\n\n[profiles.team]\nPREFECT_API_URL = "{prefect_server.url}"\n'
    )
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    env = {"HOME": str(home), "DPPUB_HOME": str(tmp_path / "state")}
    unset = ("PREFECT_HOME", "PREFECT_PROFILES_PATH")  # Prefect's default: ~/.prefect
    done = _dppub("run", config, "--ledger", ledger, "--out", out, env=env, unset=unset)
    assert done.returncode == 0, done.stderr[-3000:]
    assert NOT_RECORDED not in done.stderr
    flow_run = _flow_run(prefect_server, ledger)
    assert flow_run["state_type"] == "COMPLETED"
    names = {t["name"] for t in _task_runs(prefect_server, flow_run)}
    assert {"release-age_cdf", "release-income_ranges"} <= names
    assert done.stdout.strip() == _run_folder(out).name


def test_the_api_is_resolved_as_prefect_resolves_it_without_importing_prefect(
    tmp_path: Path,
) -> None:
    # The environment beats the active profile, a profile without a URL means none; and a run
    # without a server never imports Prefect (the settings model is read without the package).
    home = tmp_path / "home"
    (home / ".prefect").mkdir(parents=True)
    profiles = home / ".prefect" / "profiles.toml"
    probe = "import sys; from flows.server import configured_api; print(configured_api(),"
    probe += " sorted(m for m in sys.modules if m.split('.')[0] == 'prefect'))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["HOME"] = str(home)
    named = 'active = "a"\n[profiles.a]\nPREFECT_API_URL = "http://h:1/api"\n'
    cases = [
        (named, {}, "http://h:1/api"),
        (named, {"PREFECT_API_URL": "http://e:2/api"}, "http://e:2/api"),
        ('active = "a"\n[profiles.a]\n', {}, "None"),
    ]
    for text, extra, url in cases:
        profiles.write_text(text)
        done = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=env | extra, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [url, "[]"]


def _published_alike(folder: Path) -> tuple[list[str], list[tuple[str, float, float]]]:
    """What a run folder holds apart from its values: its files and its releases' costs."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    manifest = json.loads((folder / "manifest.json").read_text())
    costs = [(r["name"], r["epsilon"], r["delta"]) for r in manifest["releases"]]
    return files, costs


def test_a_run_on_the_server_is_recorded_and_publishes_as_a_run_without_one(
    tmp_path: Path, census_small: Path, prefect_server: PrefectServer
) -> None:
    config = _tiny(tmp_path, census_small)
    runs = {}
    for mode, env in (("server", {"PREFECT_API_URL": prefect_server.url}), ("local", {})):
        ledger, out = tmp_path / f"{mode}.sqlite", tmp_path / f"out-{mode}"
        done = _dppub("run", config, "--ledger", ledger, "--out", out, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == _run_folder(out).name  # stdout: the run id only
        said = [ln for ln in done.stderr.splitlines() if ln == NOT_RECORDED]
        assert len(said) == (1 if mode == "local" else 0)
        runs[mode] = (ledger, _run_folder(out))
    # The same files, releases and costs; the same charge in each ledger.
    assert _published_alike(runs["server"][1]) == _published_alike(runs["local"][1])
    spent = {m: spending_summary(Ledger(led))["census_demo"] for m, (led, _) in runs.items()}
    for s in spent.values():
        assert (s["lifetime_spent_epsilon"], s["runs"], s["pending_runs"]) == (
            pytest.approx(0.6),
            1,
            0,
        )
    # Recorded on the server: task runs named after their releases, the run's three artifacts.
    flow_run = _flow_run(prefect_server, runs["server"][0])
    names = [t["name"] for t in _task_runs(prefect_server, flow_run)]
    assert sorted(n for n in names if n.startswith("release-")) == [
        "release-age_cdf",
        "release-income_ranges",
    ]
    body = {"artifacts": {"flow_run_id": {"any_": [flow_run["id"]]}}}
    keys = {a["key"] for a in _api(prefect_server, "artifacts/filter", body)}
    key = "dppub-budget-census-demo"
    assert keys == {key, f"{key}-table", f"{key}-report"}


def test_reading_retries_the_same_on_the_server_and_without_one(
    tmp_path: Path, census_small: Path, prefect_server: PrefectServer
) -> None:
    # An I/O error at every read: the read-source task's two retries, then the run fails in
    # one line and spends nothing -- under Prefect and without it, from one retry policy.
    config = _tiny(tmp_path, census_small)
    fault = {"DPPUB_FAULT_AT": "reading", "DPPUB_FAULT": "eio"}
    for mode, env in (("server", {"PREFECT_API_URL": prefect_server.url}), ("local", {})):
        ledger, out = tmp_path / f"{mode}.sqlite", tmp_path / f"out-{mode}"
        done = _dppub("run", config, "--ledger", ledger, "--out", out, env=env | fault)
        assert done.returncode == 2, done.stderr[-3000:]
        errors = [ln for ln in done.stderr.splitlines() if ln.startswith("dppub: error:")]
        assert len(errors) == 1 and "I/O error" in errors[0], done.stderr[-3000:]
        assert errors[0].endswith("was aborted, nothing was spent")
        assert "Traceback" not in done.stderr
        s = spending_summary(Ledger(ledger))["census_demo"]
        assert (s["lifetime_spent_epsilon"], s["aborted_runs"], s["pending_runs"]) == (0.0, 1, 0)
        if mode == "server":
            flow_run = _flow_run(prefect_server, ledger)
            (read,) = [t for t in _task_runs(prefect_server, flow_run) if t["name"][:5] == "read-"]
            assert read["run_count"] == 3  # the first attempt and two retries
        else:
            assert "retry 1 of 2" in done.stderr and "retry 2 of 2" in done.stderr
            assert "retry 3" not in done.stderr


def test_the_dask_engine_on_the_server_and_without_one(
    tmp_path: Path, config_factory: Any, prefect_server: PrefectServer
) -> None:
    config = config_factory(budget=10.0)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["batch_size"] = 500  # several dask tasks per file
    raw["dataset"]["workers"] = 1  # one worker process: each costs seconds of imports
    config.write_text(yaml.safe_dump(raw))
    tables = {}
    cases: tuple[tuple[str, dict[str, str]], ...] = (
        ("stream", {}),
        ("dask", {}),
        ("dask", {"PREFECT_API_URL": prefect_server.url}),
    )
    for i, (engine, env) in enumerate(cases):
        ledger, out = tmp_path / f"l{i}.sqlite", tmp_path / f"out{i}"
        done = _dppub("run", config, "--ledger", ledger, "--out", out, "--engine", engine, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        on_server = "PREFECT_API_URL" in env
        # The DaskTaskRunner ran the tasks on the server; without one, a distributed.Client.
        assert ("Creating a new Dask cluster" in done.stderr) == on_server
        assert ("dask: releases run on a local cluster" in done.stderr) == (
            engine == "dask" and not on_server
        )
        manifest = json.loads((_run_folder(out) / "manifest.json").read_text())
        assert len(manifest["releases"]) == 8  # every release published
        tables[i] = (_run_folder(out) / "k_anonymous_table" / "table.parquet").read_bytes()
    # The syntactic release is deterministic: the same table through every engine and mode.
    assert tables[0] == tables[1] == tables[2]


def test_prefect_storage_never_holds_private_values(
    tmp_path: Path, census_frame: Any, prefect_server: PrefectServer
) -> None:
    # Plant canary values that exist only in the private input, run the demo on the server,
    # then scan every file Prefect wrote (the server's database and WAL, the client's home:
    # result storage, logs) for them.
    frame = census_frame.copy()
    frame.loc[0, ["zip", "hours", "income"]] = ["987654", 61.37, 171717.0]
    data = tmp_path / "canary.parquet"
    frame.to_parquet(data, index=False)
    raw = example("demo.yaml")
    raw["dataset"]["path"] = str(data)
    raw.pop("schedule")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw))
    client_home = tmp_path / "prefect-home"
    env = {"PREFECT_API_URL": prefect_server.url, "PREFECT_HOME": str(client_home)}
    ledger = tmp_path / "l.sqlite"
    done = _dppub("run", config, "--ledger", ledger, "--out", tmp_path / "out", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _flow_run(prefect_server, ledger)["state_type"] == "COMPLETED"
    canaries = [b"987654", b"61.37", b"171717"]
    files = [p for h in (prefect_server.home, client_home) for p in h.rglob("*") if p.is_file()]
    assert any(p.name.startswith("prefect.db") for p in files)
    for f in files:
        blob = f.read_bytes()
        for canary in canaries:
            assert canary not in blob, f"{canary!r} found in {f}"
