"""Start-up benchmark: a tiny ``dppub run`` against a ``dppub plan`` of the same config.

Usage: ``.venv/bin/python bench/startup.py [--runs 5]``

A tiny config (1,000 rows from ``data/generate.py``, seed 7; one workload, ``age_cdf``) in a
scratch folder. Wall time, process start to exit, of the real command in a subprocess:

* ``plan``: ``dppub plan`` (reads no data);
* ``run, no server``: ``dppub run`` with no Prefect API configured (no Prefect at all);
* ``run, server``: ``dppub run`` with ``PREFECT_API_URL`` at a ``prefect server start`` started
  here beforehand (its start-up is not counted: a server the user already runs);
* ``first run, fresh state``: once, ``dppub run`` with no server in an empty ``DPPUB_HOME`` and
  an empty Prefect home: it must succeed.

The modes run round-robin (plan, run, server run; ``--runs`` rounds), so a change in the
machine's load hits each alike; the median and the range per mode, the ratio of the medians to
``plan``'s (the target: a run without a server at most 3x a plan), and the load average at the
start and the end. Prints one table and writes ``bench/results/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from dppub.dp.pipeline.loading import inline_dataset, read_config

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"
DPPUB = str(Path(sys.executable).with_name("dppub"))


def _tiny(folder: Path) -> Path:
    data = folder / "data.parquet"
    generate = [sys.executable, str(ROOT / "data" / "generate.py"), "--rows", "1000"]
    subprocess.run(
        [*generate, "--seed", "7", "--out", str(data)],
        check=True,
        capture_output=True,
    )
    raw = inline_dataset(read_config(DEMO), DEMO)[0]  # its path is set below
    raw["dataset"]["path"] = str(data)
    raw["dataset"]["budget"]["epsilon"] = 1000.0
    for key in ("anonymize", "regressions", "clustering", "schedule"):
        raw.pop(key)
    raw["workloads"] = raw["workloads"][:1]  # age_cdf
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


def _env(home: Path, **extra: str) -> dict[str, str]:
    """No Prefect API unless ``extra`` names one: a Prefect home without profiles."""
    unset = ("PREFECT_API_URL", "PREFECT_PROFILES_PATH")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    return env | {"PREFECT_HOME": str(home / "prefect"), "DPPUB_HOME": str(home / "state")} | extra


def _timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run([DPPUB, *args], env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return took


def _server(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    env = _env(home) | {"PREFECT_HOME": str(home / "server"), "PREFECT_UI_ENABLED": "false"}
    env |= {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    log = (home / "server.log").open("wb")
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    server = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=log, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return server, url
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit(f"the Prefect server did not start; see {home / 'server.log'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dppub-startup-") as scratch:
        tmp = Path(scratch)
        config = _tiny(tmp)
        fresh = _timed(
            ["run", str(config), "--ledger", str(tmp / "f.sqlite"), "--out", str(tmp / "f")],
            _env(tmp / "fresh"),
        )
        server, url = _server(tmp)
        try:
            run = ["run", str(config), "--ledger"]  # a ledger, and its own publication folder
            modes = {
                "plan": (["plan", str(config), "--ledger", str(tmp / "l.sqlite")], {}),
                "run, no server": ([*run, str(tmp / "l.sqlite"), "--out", str(tmp / "l")], {}),
                "run, server": (
                    [*run, str(tmp / "s.sqlite"), "--out", str(tmp / "s")],
                    {"PREFECT_API_URL": url},
                ),
            }
            times: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.runs):
                for mode, (argv, extra) in modes.items():
                    times[mode].append(_timed(argv, _env(tmp / "warm", **extra)))
        finally:
            server.terminate()
            server.wait(timeout=60)
    load_end = os.getloadavg()
    plan = statistics.median(times["plan"])
    rows = [
        {
            "mode": mode,
            "n": len(ts),
            "median_s": round(statistics.median(ts), 2),
            "min_s": round(min(ts), 2),
            "max_s": round(max(ts), 2),
            "ratio_to_plan": round(statistics.median(ts) / plan, 2),
        }
        for mode, ts in times.items()
    ]
    rows.append(
        {
            "mode": "first run, fresh state (no server)",
            "n": 1,
            "median_s": round(fresh, 2),
            "min_s": round(fresh, 2),
            "max_s": round(fresh, 2),
            "ratio_to_plan": round(fresh / plan, 2),
        }
    )
    print(f"{'mode':<36} {'n':>2} {'median s':>9} {'min-max s':>14} {'x plan':>7}")
    for r in rows:
        span = f"{r['min_s']:.2f}-{r['max_s']:.2f}"
        line = f"{r['mode']:<36} {r['n']:>2} {r['median_s']:>9.2f} {span:>14}"
        print(f"{line} {r['ratio_to_plan']:>7.2f}")
    print(f"load average (1, 5, 15 min): start {load_start}, end {load_end}")
    out = ROOT / "bench" / "results" / "startup.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"rows": rows, "load_start": load_start, "load_end": load_end, "runs": args.runs}
    out.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
