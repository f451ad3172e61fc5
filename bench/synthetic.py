"""Benchmark: DP synthetic microdata, dppub's AIM against smartnoise-synth's AIM and MST (issue 28).

Metric: the mean L1 error over all three-way marginals (Adult: 84, the demo: 20), each marginal
normalised to sum 1 (so each error lies in [0, 2]), between the data and a published synthetic
sample of as many rows as the data (Adult: 30,162). Each method runs at epsilon 0.3, 1 and 3,
delta 1e-9, on the same binned table, with fixed seeds; wall time is the fit plus the sampling.

Data: the nine columns of ``adult.csv`` (``data/public``), age in the 5-year bands of its
hierarchy file; and the demo census (``data/generate.py``, 50,000 rows): age in 5-year bands over
[17, 90], sex, race, education, marital, income in 32 equal bins over [0, 250,000]. All columns
are categorical with the domains declared here (never read from the data); smartnoise's
transformer infers its categories from the table it is given (that is its API).

Methods:
* ``sn-aim``: smartnoise-synth 1.0.8 ``AIMSynthesizer(max_model_size=10)``, workload degree 3
  (the same work as dppub's); ``sn-aim2``: the same with smartnoise's default degree 2 (the
  issue's 0.266 reference);
* ``sn-mst``: smartnoise-synth 1.0.8 ``MSTSynthesizer``;
* ``dppub``: dppub's AIM core (``dp.synthetic.run_aim``, seeded) in the project venv;
* ``dppub-run``: the ``synthetic:`` kind through ``dppub run`` on a generated config (OpenDP
  noise, not seeded; wall time of the whole run, Prefect included).
The peers run in a benchmark-only virtualenv that the script builds (``--peer-venv``, from
``bench/requirements-synthetic.txt``; smartnoise's declared dependencies pull torch and
``pandas<3``, so they are installed with ``--no-deps``); never in the project's dependencies.
Every finished run is cached in ``bench/results/synthetic_runs.json`` by (data, method, epsilon,
seed, settings), so the combined table re-runs nothing (``--rerun`` forces it).

    nice -n 10 .venv/bin/python bench/synthetic.py --peers-only   # the smartnoise side, ~1 h
    nice -n 10 .venv/bin/python bench/synthetic.py                # dppub + cached peers, table
    .venv/bin/python bench/synthetic.py --cached                  # the table of cached runs
    .venv/bin/python bench/synthetic.py --data adult --eps 1 --methods dppub sn-mst

Prints one table; writes ``bench/results/synthetic.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# One XLA thread for every method alike (the box has 2 cores shared with other work).
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import argparse
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "sample" / "census.parquet"
RESULTS = ROOT / "bench" / "results"
CACHE = RESULTS / "synthetic_runs.json"
REQUIREMENTS = ROOT / "bench" / "requirements-synthetic.txt"
PEER_NODEPS = ["smartnoise-synth==1.0.8", "smartnoise-sql==1.0.10"]
DEFAULT_VENV = Path(tempfile.gettempdir()) / "dppub-bench-synth"
DELTA = 1e-9
MAX_MODEL_SIZE = 10.0
PEERS = ("sn-aim", "sn-aim2", "sn-mst")
METHODS = ("dppub", "dppub-run", *PEERS)
ADULT_COLUMNS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
    "salary-class",
]
DEMO_CATEGORIES = {
    "sex": ["Female", "Male"],
    "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],
    "education": ["Preschool", "HS-grad", "Some-college", "Bachelors", "Masters", "Doctorate"],
    "marital": ["Never-married", "Married", "Divorced", "Widowed"],
}
INCOME_BINS = 32
INCOME_MAX = 250_000.0


# --- data: string-labelled tables over declared domains ------------------------------------


def adult() -> tuple[pd.DataFrame, dict[str, list[str]]]:
    # Imported here: the peers' interpreter runs this file as a worker and has no dppub.
    from dppub.dp.reference.public_data import folder

    data = folder("adult")
    df = pd.read_csv(data / "adult.csv", sep=";", dtype=str)[ADULT_COLUMNS]
    domains: dict[str, list[str]] = {}
    for col in ADULT_COLUMNS:
        h = pd.read_csv(data / f"adult_hierarchy_{col}.csv", sep=";", header=None, dtype=str)
        if col == "age":
            df[col] = df[col].map(dict(zip(h[0], h[1], strict=True)))
            domains[col] = list(dict.fromkeys(h[1]))
        else:
            domains[col] = list(h[0])
    return df, domains


def demo() -> tuple[pd.DataFrame, dict[str, list[str]]]:
    if not DEMO.exists():
        cmd = [sys.executable, "data/generate.py", "--rows", "50000", "--seed", "20261121"]
        subprocess.run([*cmd, "--out", str(DEMO)], cwd=ROOT, check=True)
    raw = pd.read_parquet(DEMO)
    starts = list(range(17, 91, 5))
    age_labels = [f"{a}-{a + 4}" for a in starts]
    edges = np.linspace(0.0, INCOME_MAX, INCOME_BINS + 1)
    inc_labels = [f"{edges[i]:.0f}-{edges[i + 1]:.0f}" for i in range(INCOME_BINS)]
    age_idx = (raw["age"].to_numpy() - 17) // 5
    inc_idx = np.clip(np.searchsorted(edges, raw["income"].to_numpy(), side="right") - 1, 0, 31)
    df = pd.DataFrame(
        {
            "age": np.asarray(age_labels)[age_idx],
            **{c: raw[c].astype(str) for c in DEMO_CATEGORIES},
            "income": np.asarray(inc_labels)[inc_idx],
        }
    )
    return df, {"age": age_labels, **DEMO_CATEGORIES, "income": inc_labels}


DATASETS = {"adult": adult, "demo": demo}


def encode(df: pd.DataFrame, domains: dict[str, list[str]]) -> np.ndarray:
    """Integer codes (rows x columns) over the declared domains; refuses values outside them."""
    cols = []
    for col, values in domains.items():
        codes = pd.Categorical(df[col].astype(str), categories=values).codes
        if (codes < 0).any():
            bad = df[col][codes < 0].iloc[0]
            raise ValueError(f"{col}: value {bad!r} outside the declared domain")
        cols.append(codes.astype(np.int64))
    return np.stack(cols, axis=1)


def three_way_errors(real: np.ndarray, synth: np.ndarray, shape: list[int]) -> list[float]:
    """L1 distance of every normalised three-way marginal (each in [0, 2])."""
    errs = []
    for cl in itertools.combinations(range(len(shape)), 3):
        dims = [shape[i] for i in cl]
        size = int(np.prod(dims))
        a = np.bincount(np.ravel_multi_index(real[:, cl].T, dims), minlength=size)
        b = np.bincount(np.ravel_multi_index(synth[:, cl].T, dims), minlength=size)
        errs.append(float(np.abs(a / a.sum() - b / b.sum()).sum()))
    return errs


# --- peers: run inside the benchmark venv ---------------------------------------------------


def peer_worker() -> None:
    """``--worker``: one smartnoise fit + sample; job as JSON on stdin, result as JSON last line."""
    job = json.loads(sys.stdin.read())
    t0 = time.perf_counter()
    from snsynth.aim import AIMSynthesizer
    from snsynth.mst import MSTSynthesizer

    imported = time.perf_counter() - t0
    np.random.seed(job["seed"])  # noqa: NPY002 (smartnoise draws from the global generator)
    df = pd.read_csv(job["data"], dtype=str, keep_default_na=False)
    if job["method"] == "sn-mst":
        synth: Any = MSTSynthesizer(epsilon=job["epsilon"], delta=job["delta"])
    else:
        degree = 2 if job["method"] == "sn-aim2" else 3
        synth = AIMSynthesizer(
            epsilon=job["epsilon"],
            delta=job["delta"],
            max_model_size=job["max_model_size"],
            degree=degree,
            max_cells=10**9,  # every 3-way marginal in the workload, as for dppub
        )
    t, cpu = time.perf_counter(), time.process_time()
    synth.fit(df, categorical_columns=list(df.columns), preprocessor_eps=0.0)
    fit = time.perf_counter() - t
    out = synth.sample(job["rows"])
    total, cpu = time.perf_counter() - t, time.process_time() - cpu
    pd.DataFrame(out, columns=df.columns).to_csv(job["out"], index=False)
    print(json.dumps({"import_s": imported, "fit_s": fit, "seconds": total, "cpu_s": cpu}))


def ensure_peer_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import snsynth.aim, snsynth.mst"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"building the peer venv at {venv} ...", flush=True)
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", *PEER_NODEPS], check=True)
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    subprocess.run(probe, check=True)
    return python


def run_peer(
    python: Path, method: str, name: str, eps: float, seed: int, timeout: float
) -> dict[str, Any]:
    df, domains = DATASETS[name]()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data.csv", Path(tmp) / "synth.csv"
        df.to_csv(data, index=False)
        job = {
            "method": method,
            "epsilon": eps,
            "delta": DELTA,
            "seed": seed,
            "data": str(data),
            "out": str(out),
            "rows": len(df),
            "max_model_size": MAX_MODEL_SIZE,
        }
        t = time.perf_counter()
        try:
            done = subprocess.run(
                [str(python), str(Path(__file__).resolve()), "--worker"],
                input=json.dumps(job),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=True,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {timeout:.0f} s"}
        except subprocess.CalledProcessError as exc:
            return {"error": (exc.stderr.strip().splitlines() or ["failed"])[-1]}
        res: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        res["process_s"] = time.perf_counter() - t
        synth = pd.read_csv(out, dtype=str, keep_default_na=False)
    shape = [len(v) for v in domains.values()]
    errs = three_way_errors(encode(df, domains), encode(synth, domains), shape)
    res.update(l1=float(np.mean(errs)), l1_max=float(np.max(errs)), marginals=len(errs))
    return res


# --- dppub ------------------------------------------------------------------------------------


def run_dppub(name: str, eps: float, seed: int, **aim: Any) -> dict[str, Any]:
    """dppub's AIM core on the same table: exact 3-way answers, ``run_aim``, its sampled rows."""
    sys.path.insert(0, str(ROOT))
    from dppub.dp.synthetic import cdp_rho, marginal_answers, run_aim, workload_cliques
    from dppub.dp.synthetic.pgm import require_mbi

    df, domains = DATASETS[name]()
    real = encode(df, domains)
    columns = list(domains)
    dom = {c: len(v) for c, v in domains.items()}
    t = time.perf_counter()
    require_mbi()  # JAX's import, timed apart as for the peers
    imported = time.perf_counter() - t
    t, cpu = time.perf_counter(), time.process_time()
    workload = workload_cliques(columns, 3)
    answers = marginal_answers({c: real[:, i] for i, c in enumerate(columns)}, dom, workload)
    res = run_aim(
        answers,
        dom,
        workload,
        cdp_rho(eps, DELTA),
        rows=len(df),
        max_model_size=aim.pop("max_model_size", MAX_MODEL_SIZE),
        rng=np.random.default_rng(seed),
        progress=lambda msg: print(f"  {time.perf_counter() - t:6.1f} s {msg}", file=sys.stderr),
        **aim,
    )
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    synth = np.stack([res.synthetic[c] for c in columns], axis=1)
    errs = three_way_errors(real, synth, list(dom.values()))
    return {
        "import_s": imported,
        "seconds": seconds,
        "cpu_s": cpu,
        "l1": float(np.mean(errs)),
        "l1_max": float(np.max(errs)),
        "marginals": len(errs),
        "rounds": res.rounds,
        "measured": len(res.measurements),
        "cliques": [list(c) for c in res.model.cliques],
        "rho": res.rho,
        "rho_used": res.rho_used,
    }


def run_cli(name: str, eps: float, seed: int, **aim: Any) -> dict[str, Any]:
    """``dppub run`` on a config with one ``synthetic:`` release of the same table (written as
    parquet, every column a declared category): the whole run's wall time, Prefect included.
    Release-grade noise (OpenDP), so ``seed`` does not fix it."""
    import yaml

    df, domains = DATASETS[name]()
    release = {
        "name": "synthetic_bench",
        "epsilon": eps,
        "delta": DELTA,
        "columns": list(domains),
        "workload": {"marginals": 3},
        "rows": len(df),
        "max_model_size": MAX_MODEL_SIZE,
        **aim,
    }
    with tempfile.TemporaryDirectory() as tmp:
        df.to_parquet(Path(tmp) / "data.parquet")
        columns = {c: {"type": "category", "categories": v} for c, v in domains.items()}
        budget = {"epsilon": eps, "delta": DELTA}
        dataset = {"name": f"{name}_bench", "path": "data.parquet", "budget": budget}
        cfg = {"dataset": {**dataset, "columns": columns}, "synthetic": [release]}
        (Path(tmp) / "bench.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        env = {**os.environ, "PREFECT_HOME": str(ROOT / ".state" / "prefect")}
        cmd = [sys.executable, "-m", "dppub.cli", "run", f"{tmp}/bench.yaml"]
        cmd += ["--ledger", f"{tmp}/ledger.sqlite", "--out", f"{tmp}/out"]
        t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
        (found,) = Path(tmp, "out").rglob("synthetic_bench/synthetic.csv")
        synth = pd.read_csv(found, dtype=str, keep_default_na=False)
    errs = three_way_errors(
        encode(df, domains), encode(synth, domains), [len(v) for v in domains.values()]
    )
    return {
        "seconds": seconds,
        "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "l1": float(np.mean(errs)),
        "l1_max": float(np.max(errs)),
        "marginals": len(errs),
    }


# --- driver -----------------------------------------------------------------------------------


def key(name: str, method: str, eps: float, seed: int, settings: dict[str, int]) -> str:
    return "|".join(
        [name, method, f"{eps:g}", str(seed), *(f"{k}={v}" for k, v in settings.items())]
    )


def load_cache() -> dict[str, Any]:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--eps", nargs="+", type=float, default=[0.3, 1.0, 3.0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--peers-only", action="store_true", help="run and cache the peers only")
    ap.add_argument("--rerun", action="store_true", help="ignore the cache of finished runs")
    ap.add_argument("--cached", action="store_true", help="table of cached runs only, run none")
    ap.add_argument("--max-rounds", type=int, default=None, help="dppub: cap AIM's rounds")
    ap.add_argument("--iters", type=int, default=None, help="dppub: Private-PGM iterations")
    ap.add_argument(
        "--planned-rounds", type=int, default=None, help="dppub: AIM's planned rounds T"
    )
    ap.add_argument("--peer-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per peer run, seconds")
    ap.add_argument("--out", type=Path, default=RESULTS / "synthetic.json")
    args = ap.parse_args()
    if args.worker:
        peer_worker()
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    methods = [m for m in args.methods if m in PEERS or not args.peers_only]
    peers = any(m in PEERS for m in methods) and not args.cached
    python = ensure_peer_venv(args.peer_venv) if peers else None
    rows: list[dict[str, Any]] = []
    given = {
        "max_rounds": args.max_rounds,
        "iters": args.iters,
        "planned_rounds": args.planned_rounds,
    }
    extra = {k: v for k, v in given.items() if v}
    for name, eps, method, seed in itertools.product(args.data, args.eps, methods, args.seeds):
        settings = {} if method in PEERS else extra
        k = key(name, method, eps, seed, settings)
        cache = load_cache()
        if args.cached and k not in cache:
            continue
        if not args.cached and (k not in cache or args.rerun or "error" in cache[k]):
            if method in PEERS:
                assert python is not None
                res = run_peer(python, method, name, eps, seed, args.timeout)
            elif method == "dppub-run":
                res = run_cli(name, eps, seed, **extra)
            else:
                res = run_dppub(name, eps, seed, **extra)
            cache = load_cache() | {k: res | settings}
            tmp = CACHE.with_suffix(f".{os.getpid()}.tmp")  # runs in parallel read it whole
            tmp.write_text(json.dumps(cache, indent=2))
            tmp.replace(CACHE)
        res = cache[k]
        label = method + "".join(f" {k}={v}" for k, v in settings.items())
        row = {"data": name, "method": label, "epsilon": eps, "seed": seed, **res}
        rows.append(row)
        print(f"{name:5} eps={eps:<4g} {label:8} seed={seed} " + summary(row), flush=True)
    if args.peers_only:
        return
    table(rows)
    args.out.write_text(
        json.dumps({"delta": DELTA, "max_model_size": MAX_MODEL_SIZE, "rows": rows}, indent=2)
    )
    print(f"wrote {args.out}")


def summary(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"failed: {row['error']}"
    return f"L1 {row['l1']:.3f} in {row['seconds']:.1f} s"


def table(rows: list[dict[str, Any]]) -> None:
    """One line per (data, epsilon): each method's mean L1 and seconds; dppub over sn-aim."""
    methods = sorted(
        dict.fromkeys(r["method"] for r in rows), key=lambda m: METHODS.index(m.split()[0])
    )
    width = {m: max(12, len(m) + 4) for m in methods}
    head = f"{'data':6}{'eps':>5}"
    head += "".join(f"{m + ' L1':>{width[m]}}{'s':>7}{'cpu':>6}" for m in methods)
    print(head + f"{'dppub/aim':>11}{'target':>8}")
    for name, eps in dict.fromkeys((r["data"], r["epsilon"]) for r in rows):
        line, means = f"{name:6}{eps:>5g}", {}
        for m in methods:
            ok = [r for r in rows if (r["data"], r["epsilon"], r["method"]) == (name, eps, m)]
            ok = [r for r in ok if "error" not in r]
            if not ok:
                line += f"{'-':>{width[m]}}{'-':>7}{'-':>6}"
                continue
            means[m] = tuple(
                np.mean([r.get(f, np.nan) for r in ok]) for f in ("l1", "seconds", "cpu_s")
            )
            line += f"{means[m][0]:>{width[m] - 3}.3f}{'' if len(ok) == 1 else f'/{len(ok)}':>3}"
            line += f"{means[m][1]:>7.0f}{means[m][2]:>6.0f}"
        if "dppub" in means and "sn-aim" in means:
            ratio = means["dppub"][0] / means["sn-aim"][0]
            met = ratio <= 0.8 and means["dppub"][1] < means["sn-aim"][1]
            line += f"{ratio:>11.2f}{'met' if met else 'missed':>8}"
        print(line)
    print("L1: mean over the three-way marginals of sum|p - q| (normalised, in [0, 2]);")
    print(
        "/n: mean of n seeds; s, cpu: wall and CPU seconds of fit + sample; "
        "target: <= 0.8x sn-aim, faster"
    )


if __name__ == "__main__":
    main()
