"""What ``dppub run`` loads to start: a run imports what its releases and its report use, and
decides that no Prefect API is configured without reading Prefect's settings when nothing could
name one (issue 26's speed target is for the whole process; ``bench/tables.py`` times it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # real processes (they were in tests/flows, slow as a whole)

ROOT = Path(__file__).resolve().parents[2]

# Not needed by a run of tables whose report has nothing to plot and no Prefect API.
HEAVY = (
    "matplotlib",
    "prefect",
    "pydantic_settings",
    "cvxpy",
    "jax",
    "mbi",
    "distributed",
    "dask",
    "sklearn",
)

_PROBE = """
import atexit, json, sys, runpy
heavy = sys.argv[1].split(",")
atexit.register(lambda: print(json.dumps(sorted(
    m for m in sys.modules if m.split(".")[0] in heavy)), file=sys.stderr))
sys.argv = ["dppub", *sys.argv[2:]]
runpy.run_module("dppub.cli", run_name="__main__")
"""


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No Prefect setting from this session: an empty home, no ``PREFECT_*`` variable."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PREFECT_")}
    return env | {"HOME": str(home), "DPPUB_HOME": str(home / "state")} | extra


def test_a_tables_run_without_plots_or_prefect_imports_neither(
    tmp_path: Path, census_small: Path
) -> None:
    # One table of 74 declared groups (more than the 60 a bar plot shows): the report has
    # its budget bar and the table, nothing for matplotlib to draw.
    config = tmp_path / "tables.yaml"
    raw = {
        "dataset": {
            "name": "t",
            "path": str(census_small),
            "budget": {"epsilon": 10.0},
            "columns": {
                "age": {"type": "int", "bounds": [17, 90]},
                "income": {"type": "float", "bounds": [0, 250000]},
            },
        },
        "tables": [
            {
                "name": "income_by_age",
                "epsilon": 1.0,
                "by": ["age"],
                "measures": ["count", {"sum": "income"}, {"mean": "income"}],
            }
        ],
    }
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    args = [sys.executable, "-c", _PROBE, ",".join(HEAVY), "run", str(config)]
    args += ["--ledger", str(tmp_path / "ledger.sqlite"), "--out", str(out)]
    done = subprocess.run(
        args, cwd=tmp_path, env=_clean_env(tmp_path / "home"), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stderr.splitlines()[-1]) == []
    (report,) = out.glob("t/*/report.html")
    page = report.read_text()
    assert page.count("<svg") == 1 and 'aria-label="budget"' in page  # the budget bar is there


_DECIDE = """
import json, os, sys
from pathlib import Path
from dppub.flows.server import _surely_no_api
from prefect.settings.models.root import Settings
base, answers = dict(os.environ), []
for case in json.loads(sys.stdin.read()):  # files to write, a folder, an environment
    for path, text in case["files"].items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    os.chdir(case["here"])
    os.environ.clear()
    os.environ.update(base | case["env"])
    answers.append([_surely_no_api(), Settings().api.url])
    for path in case["files"]:
        Path(path).unlink()
print(json.dumps(answers))
"""


def test_the_quick_no_api_answer_is_prefects_own(tmp_path: Path) -> None:
    # Wherever the quick check answers "no API" Prefect's settings say None too; wherever a
    # source names an API it defers to them. Each case: files written (a relative path is in
    # the case's working folder), environment, the quick answer, Prefect's URL. One process
    # (Prefect reads its sources afresh for each Settings()).
    home = tmp_path / "home"
    (home / ".prefect").mkdir(parents=True)
    profiles = str(home / ".prefect" / "profiles.toml")
    named = 'active = "a"\n[profiles.a]\nPREFECT_API_URL = "http://h:1/api"\n'
    other = named.replace('"a"', '"b"', 1) + '[profiles.b]\nPREFECT_LOGGING_LEVEL = "INFO"\n'
    own_home = tmp_path / "own-home"
    cases: list[tuple[dict[str, str], dict[str, str], bool, str | None]] = [
        ({}, {}, True, None),
        ({profiles: named}, {}, False, "http://h:1/api"),
        ({profiles: other}, {}, True, None),
        ({profiles: 'active = "a"\n[profiles.a]\n'}, {}, True, None),
        ({}, {"PREFECT_API_URL": "http://e:2/api"}, False, "http://e:2/api"),
        ({}, {"prefect_api_url": "http://l:3/api"}, False, "http://l:3/api"),
        ({}, {"PREFECT_PROFILE": "a"}, False, None),
        (
            {"pyproject.toml": '[tool.prefect.api]\nurl = "http://p:4/api"\n'},
            {},
            False,
            "http://p:4/api",
        ),
        ({"pyproject.toml": '[project]\nname = "x"\n[tool.ruff]\n'}, {}, True, None),
        ({".env": "PREFECT_API_URL=http://d:5/api\n"}, {}, False, "http://d:5/api"),
        ({"prefect.toml": '[api]\nurl = "http://t:6/api"\n'}, {}, False, "http://t:6/api"),
        (
            {str(own_home / "profiles.toml"): named},
            {"PREFECT_HOME": str(own_home)},
            False,
            "http://h:1/api",
        ),
        ({}, {"PREFECT_HOME": str(own_home)}, True, None),
    ]
    jobs = []
    for i, (files, extra, _, _) in enumerate(cases):
        here = tmp_path / f"case{i}"
        here.mkdir()
        paths = {str(here / f): t for f, t in files.items()}  # an absolute path stays
        jobs.append({"files": paths, "here": str(here), "env": extra})
    done = subprocess.run(
        [sys.executable, "-c", _DECIDE],
        cwd=ROOT,
        env=_clean_env(home),
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = [[quick, url] for _, _, quick, url in cases]
    assert json.loads(done.stdout) == expected
