"""Statistical tables against the peers (issue 26): private keys, RMSE and wall time vs PipelineDP.

Usage::

    .venv/bin/python bench/tables.py                 # ~15 min on 2 loaded cores (+ venv once)
    .venv/bin/python bench/tables.py --runs 5        # fewer repetitions
    .venv/bin/python bench/tables.py --peers-venv /tmp/dppub-bench-tables

The peers (PipelineDP, OpenDP) run in their own virtualenv, created here on first use from
``bench/requirements-tables.txt`` (never dppub's dependencies), through ``bench/tables_peers.py``
on the *same Parquet file* at the same (epsilon, delta). dppub's side runs in this interpreter.

1. **Private keys** (count tables, epsilon 1, delta 1e-6; both spend epsilon/2 on the selection
   and epsilon/2 on the count -- PipelineDP's NaiveBudgetAccountant does, and so does
   :func:`dp.tables.keys.selection_budget` -- and all of delta on the selection): keys released,
   mean over ``--runs``, dppub's rule (:func:`dp.tables.keys.key_rule`, the per-key aggregate
   folded by the engine with the unit bound of :mod:`dp.engine.unit_bounding`) against
   PipelineDP's TRUNCATED_GEOMETRIC selection:

   * ``visits``: a seeded file of 104 postcodes with Zipf-like popularity, persons visiting 1-4 of
     them (1-3 rows each); row-level (each row a unit) and per person with at most 4 postcodes
     and 3 rows per postcode (m = 4, the issue's setting);
   * ``census``: the demo census (``data/generate.py``, 5,000 rows), ``zip`` (400 codes) row-level;
   * ``adult``: Adult (``data/public/adult``), ``native-country`` (41 values) row-level.

2. **RMSE** of count, sum and mean of income by education (6 declared groups, 20,000 census
   rows, epsilon 1, pure DP), a three-measure table and a mean alone, row-level and per
   household (households of 1-4 rows; dppub ``max_rows_per_unit: 4``, ``max_partitions_per_unit:
   4``; PipelineDP ``max_contributions=4``, the same bound on a unit's rows), pooled over groups
   and ``--runs`` runs. dppub's side is published through its own run steps (plan, ledger,
   shared scan, noise, publication; no Prefect) from a generated config.

3. **Wall time** of a three-measure table (count, sum and mean of income by zip, private keys,
   row-level) on a 300,000-row census file, each tool timed two ways: *in-process* (PipelineDP's
   ``_run``: read + aggregate; dppub's run steps: plan, ledger, scan, noise, publication) and as
   a *whole process* (Python's start and imports included: ``tables_peers.py`` reading the file,
   running the table and writing it as CSV; ``dppub run`` with no Prefect API configured), wall
   and CPU seconds, median of ``--time-repeats`` rounds.

4. **Quantile rank error** of hours by sex (about 3,000 rows per group, 1,024 bins over the
   declared bounds on both sides), epsilon 1 per table: ``|F(answer) - p|`` in percentile
   points, dppub (through its run steps; one median takes its exponential mechanism, nine
   deciles its hierarchical CDF) against OpenDP's ``make_private_quantile`` (each decile at
   epsilon / 9), and the expected error of the median's mechanism (simulated).

``--data`` picks the data of sections 1, 2 and 4 (section 3 runs for ``demo`` only):
``demo`` (the above), ``adult`` or ``fars`` (``data/public``; FARS is the held-out set,
neither the demo nor Adult), chosen before looking at any result (:func:`data_sets`). Neither
file has a unit column: a unit is a *household* of consecutive rows, 1-4 each (sizes drawn from a
fixed seed, :func:`_households`), the demo's rule. Declared groups are the leaves of the public
ARX hierarchy files, bounds the documented ranges, both sides of every comparison the same:

* keys: ``native-country/occupation`` (Adult, 394 keys, half of them 4 rows or fewer) and
  ``istatenum/iage`` (FARS, 4,579 keys, median 11 rows), row-level and per household (m = 4);
* RMSE: age by education (Adult, 16 groups, bounds [17, 90]) and iage by istatenum (FARS, 57
  declared groups of which 51 have rows, bounds [0, 99]); a mean's error over non-empty groups;
* quantiles: age by occupation (Adult) and iage by ideathmon (FARS), int columns on a grid of
  one point per integer on both sides; the rank error is pooled over the groups of 1,000-10,000
  rows (:data:`FEW_THOUSAND`), and over all groups as well.

Prints one table and writes ``bench/results/tables.json`` (``tables_<data>.json`` for the
others).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from scipy.special import ndtr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from data.generate import make_census  # noqa: E402
from dppub.dp.engine import StreamingBackend  # noqa: E402
from dppub.dp.engine.key_weights import KeyWeightsAggregate  # noqa: E402
from dppub.dp.engine.unit_bounding import BoundedBackend, BoundingAggregate, UnitBound  # noqa: E402
from dppub.dp.pipeline.plan import load_plan  # noqa: E402
from dppub.dp.pipeline.publish import in_order, publish  # noqa: E402
from dppub.dp.reference.public_data import folder  # noqa: E402
from dppub.dp.schema import ColumnSpec, TableSchema  # noqa: E402
from dppub.dp.tables.keys import (  # noqa: E402
    GRID,
    KeyRule,
    KeyWeights,
    key_rule,
    select_keys,
    selection_budget,
)

OUT = ROOT / "bench" / "results" / "tables.json"
REQUIREMENTS = ROOT / "bench" / "requirements-tables.txt"
ADULT = folder("adult") / "adult.csv"
FARS = folder("fars") / "fars_int.csv"
EPSILON, DELTA = 1.0, 1e-6


def peers_python(venv: Path) -> Path:
    """The peers' interpreter, creating their virtualenv on first use."""
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)]
        subprocess.run(pip, check=True)
        stamp.touch()
    return python


def peers(python: Path, job: dict[str, Any]) -> dict[str, Any]:
    script = str(ROOT / "bench" / "tables_peers.py")
    done = subprocess.run(
        [str(python), script], input=json.dumps(job), capture_output=True, text=True, check=True
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def visits(seed: int = 26, persons: int = 2_600, keys: int = 104) -> pd.DataFrame:
    """Persons visiting 1-4 of ``keys`` postcodes (Zipf-like popularity), 1-3 rows each."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / (np.arange(keys) + 8.0) ** 1.3
    popularity /= popularity.sum()
    rows = []
    for p in range(persons):
        mine = rng.choice(keys, size=int(rng.integers(1, 5)), replace=False, p=popularity)
        for k in mine:
            rows += [(f"p{p:05d}", f"PC{int(k):03d}")] * int(rng.integers(1, 4))
    return pd.DataFrame(rows, columns=["person", "postcode"])


def dppub_keys(
    path: Path, key: str, *, unit: str | None, m: int, per_key: int, runs: int
) -> tuple[list[int], float]:
    """Keys dppub releases in ``runs`` draws (one exact aggregate, release-grade draws)."""
    columns = [ColumnSpec(name=key, type="string")]
    if unit is not None:
        columns.append(ColumnSpec(name=unit, type="string"))
    schema = TableSchema(columns=tuple(columns))
    eps_select, delta_select, _ = selection_budget(EPSILON, DELTA, 1)
    rule = key_rule(eps_select, delta_select, m)
    backend = StreamingBackend()
    bound = None
    if unit is not None:
        bound = UnitBound(
            column=unit, max_rows=m * per_key, partition=key, max_partitions=m, content=(unit, key)
        )
        keep = backend.run(BoundingAggregate(bound), path, schema)
        backend = BoundedBackend(backend, keep)  # type: ignore[assignment]
    weights = backend.run(KeyWeightsAggregate((key,), bound), path, schema)
    return [int(select_keys(weights, rule).sum()) for _ in range(runs)], expected_keys(
        weights, rule
    )


def expected_keys(weights: KeyWeights, rule: KeyRule) -> float:
    """The exact expectation of the number of keys released: no sampling noise."""
    if rule.kind == "threshold":
        last = len(rule.probabilities) - 1
        return float(sum(rule.probabilities[min(int(n), last)] for n in weights.units))
    z = (weights.weights / GRID - rule.rho) / rule.sigma
    return float(np.sum(ndtr(z)))


KeyCase = tuple[str, Path, str, str | None, int]  # data, file, key, unit (None: row), m


def demo_keys(data: Path) -> list[KeyCase]:
    cases: list[KeyCase] = []
    frame = visits()
    path = data / "visits.parquet"
    frame.to_parquet(path, index=False)
    cases += [("visits", path, "postcode", None, 1), ("visits", path, "postcode", "person", 4)]
    census = data / "census_5000.parquet"
    make_census(5_000, 20261121)[["zip"]].to_parquet(census, index=False)
    cases.append(("census", census, "zip", None, 1))
    adult = data / "adult.parquet"
    pd.read_csv(ADULT, sep=";")[["native-country"]].to_parquet(adult, index=False)
    cases.append(("adult", adult, "native-country", None, 1))
    return cases


def _crossed_keys(name: str, frame: pd.DataFrame, a: str, b: str, data: Path) -> list[KeyCase]:
    """Keys ``a/b`` (many small groups), row-level and per household of up to 4 rows (m = 4)."""
    key = f"{a}/{b}"
    path = data / f"{name}_keys.parquet"
    crossed = frame[a].astype(str) + "/" + frame[b].astype(str)
    pd.DataFrame({key: crossed, "household": frame["household"]}).to_parquet(path, index=False)
    return [(name, path, key, None, 1), (name, path, key, "household", 4)]


@dataclass(frozen=True)
class Grouping:
    """A table's declared groups and measure column, fixed before any data is read: the key's
    categories are the leaves of the data set's public hierarchy file, the bounds documented
    ones (never the data's minimum and maximum)."""

    key: str
    categories: tuple[str, ...]
    value: str
    type: str  # "int" (a grid of one bin per integer on both sides) or "float" (1,024 bins)
    bounds: tuple[float, float]

    @property
    def bins(self) -> int:
        lo, hi = self.bounds
        return int(hi - lo) if self.type == "int" else 1024

    def columns(self) -> dict[str, Any]:
        return {
            self.key: {"type": "category", "categories": list(self.categories)},
            "household": {"type": "string"},
            self.value: {"type": self.type, "bounds": list(self.bounds)},
        }


@dataclass(frozen=True)
class DataSet:
    """One ``--data`` choice: its private-key cases, and the frames and groupings of the RMSE
    and quantile sections (frames with a ``household`` unit column, see :func:`_households`)."""

    keys: Callable[[Path], list[KeyCase]]
    measures: Callable[[], pd.DataFrame]
    grouping: Grouping
    quantiles: Callable[[], pd.DataFrame]
    quantile_grouping: Grouping


def _leaves(name: str) -> tuple[str, ...]:
    """The leaf values of a public ARX hierarchy file (its first column), in file order."""
    data_set, file = name.split("/")
    path = folder(data_set) / file
    return tuple(line.split(";")[0] for line in path.read_text().splitlines() if line)


def _adult() -> pd.DataFrame:
    return _households(pd.read_csv(ADULT, sep=";"))


def _fars() -> pd.DataFrame:
    frame = pd.read_csv(FARS, sep=";")
    for c in ("istatenum", "ideathmon"):  # integer codes of categories: keys as text
        frame[c] = frame[c].astype(str)
    return _households(frame)


def data_sets() -> dict[str, DataSet]:
    census = DataSet(
        keys=demo_keys,
        measures=lambda: _households(make_census(20_000, 20261121)),
        grouping=Grouping("education", tuple(EDUCATION), "income", "float", (0.0, 250_000.0)),
        quantiles=lambda: _households(make_census(6_000, 20261121)),
        quantile_grouping=Grouping("sex", ("Female", "Male"), "hours", "float", (1.0, 99.0)),
    )
    # Adult: age by education (sum, mean) and by occupation (quantiles; 9 of 14 groups of
    # 1,350-4,038 rows); bounds [17, 90], the extract's documented range (over 16, top-coded).
    adult = DataSet(
        keys=lambda d: _crossed_keys("adult", _adult(), "native-country", "occupation", d),
        measures=_adult,
        grouping=Grouping(
            "education", _leaves("adult/adult_hierarchy_education.csv"), "age", "int", (17, 90)
        ),
        quantiles=_adult,
        quantile_grouping=Grouping(
            "occupation", _leaves("adult/adult_hierarchy_occupation.csv"), "age", "int", (17, 90)
        ),
    )
    # FARS (held out: neither the demo nor Adult): iage by istatenum (57 declared codes, 51 in
    # the file) and by ideathmon (14 codes; 12 groups of 2,867-4,180 rows, one of 195 and one
    # of 57,752); bounds [0, 99], the hierarchy's top interval.
    fars = DataSet(
        keys=lambda d: _crossed_keys("fars", _fars(), "istatenum", "iage", d),
        measures=_fars,
        grouping=Grouping(
            "istatenum", _leaves("fars/fars_int_hierarchy_istatenum.csv"), "iage", "int", (0, 99)
        ),
        quantiles=_fars,
        quantile_grouping=Grouping(
            "ideathmon", _leaves("fars/fars_int_hierarchy_ideathmon.csv"), "iage", "int", (0, 99)
        ),
    )
    return {"demo": census, "adult": adult, "fars": fars}


def keys_section(python: Path, cases: list[KeyCase], runs: int) -> list[dict[str, Any]]:
    out = []
    for name, file, key, unit, m in cases:
        real = int(pd.read_parquet(file, columns=[key])[key].nunique())
        ours, ours_expected = dppub_keys(file, key, unit=unit, m=m, per_key=3, runs=runs)
        job = {
            "kind": "keys",
            "path": str(file),
            "key": key,
            "unit": unit or "__row__",
            "epsilon": EPSILON,
            "delta": DELTA,
            "max_partitions": m,
            "max_per_partition": 3 if unit else 1,
            "runs": runs,
        }
        answer = peers(python, job)
        theirs = answer["released"]
        out.append(
            {
                "data": name,
                "key": key,
                "unit": unit or "row",
                "max_partitions": m,
                "real_keys": real,
                "dppub": ours,
                "pipelinedp": theirs,
                "dppub_expected": ours_expected,
                "pipelinedp_expected": answer["expected"],
                "rule": key_rule(*selection_budget(EPSILON, DELTA, 1)[:2], m).kind,
            }
        )
        print(
            f"  keys {name}/{unit or 'row'}: dppub {np.mean(ours):.1f}, pipelinedp "
            f"{np.mean(theirs):.1f} of {real}",
            flush=True,
        )
    return out


EDUCATION = ["Preschool", "HS-grad", "Some-college", "Bachelors", "Masters", "Doctorate"]
COLUMNS: dict[str, Any] = {
    "education": {"type": "category", "categories": EDUCATION},
    "zip": {"type": "string"},
    "household": {"type": "string"},
    "income": {"type": "float", "bounds": [0, 250000]},
}


def dppub_tables(
    folder: Path,
    data: Path,
    tables: list[dict[str, Any]],
    runs: int,
    columns: dict[str, Any] | None = None,
    **unit: Any,
) -> list[dict[str, pd.DataFrame]]:
    """Publish ``tables`` ``runs`` times through dppub's own run steps (plan, ledger, scan,
    noise, publication; no Prefect): each run's answers per table."""
    config = {
        "dataset": {
            "name": "bench",
            "path": str(data),
            "budget": {"epsilon": 1000.0, "delta": 0.01},
            "columns": columns or COLUMNS,
            **unit,
        },
        "tables": tables,
    }
    path = folder / "tables.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    plan = load_plan(path)
    out = []
    for _ in range(runs):
        with plan.open_run(folder / "ledger.sqlite", folder / "out") as run:
            done = publish(plan, run, in_order())
        out.append(
            {
                t["name"]: pd.read_csv(done.folder / t["name"] / "answers.csv", dtype=str)
                for t in tables
            }
        )
    return out


def _households(frame: pd.DataFrame) -> pd.DataFrame:
    """Households of consecutive rows, 1-4 rows each (seeded): a unit has up to 4 rows."""
    rng = np.random.default_rng(3)
    ids = np.repeat(np.arange(len(frame)), rng.integers(1, 5, len(frame)))[: len(frame)]
    return frame.assign(household=[f"h{i}" for i in ids])


def _rmse(errors: list[float]) -> float:
    """Root mean square over the defined errors (an empty group's mean has no true value)."""
    e = np.asarray(errors, dtype=float)
    e = e[~np.isnan(e)]
    return float(np.sqrt(np.mean(np.square(e)))) if e.size else float("nan")


def measures_section(
    python: Path, data: Path, runs: int, frame: pd.DataFrame, by: Grouping
) -> list[dict[str, Any]]:
    """RMSE of count, sum and mean of a measure by declared groups, together and a mean alone,
    row-level and per household (at most 4 rows), dppub against PipelineDP. A mean's error is
    pooled over the groups that have rows (an empty group's mean is undefined)."""
    key, value = by.key, by.value
    path = data / f"measures_{len(frame)}.parquet"
    frame[[key, value, "household"]].to_parquet(path, index=False)
    g = frame.groupby(key)[value]
    truth = pd.DataFrame({"count": g.size(), "sum": g.sum(), "mean": g.mean()})
    truth = truth.reindex(list(by.categories)).fillna({"count": 0, "sum": 0})
    together = ["count", {"sum": value}, {"mean": value}]
    out = []
    for unit, m in ((None, 1), ("household", 4)):
        for label, measures in (("count+sum+mean", together), ("mean alone", [{"mean": value}])):
            table = {"name": "t", "epsilon": EPSILON, "by": [key], "measures": measures}
            extra: dict[str, Any] = {
                "privacy_unit": unit,
                "max_rows_per_unit": m,
                "max_partitions_per_unit": m,
            }
            if unit is None:
                extra = {}
            folder = data / f"measures-{key}-{unit}-{len(measures)}"
            folder.mkdir(exist_ok=True)
            ours: dict[str, list[float]] = {}
            for answers in dppub_tables(folder, path, [table], runs, by.columns(), **extra):
                for _, got in answers["t"].iterrows():
                    name = got["measure"].split("(")[0]
                    err = float(got["answer"]) - float(truth.loc[got[key], name])
                    ours.setdefault(name, []).append(err)
            names = [n if isinstance(n, str) else next(iter(n)) for n in measures]
            job = {
                "kind": "measures",
                "path": str(path),
                "key": key,
                "value": value,
                "unit": unit or "__row__",
                "epsilon": EPSILON,
                "delta": 0.0,
                "max_partitions": m,
                "max_per_partition": 1,
                "max_contributions": m if unit else None,
                "bounds": [float(b) for b in by.bounds],
                "metrics": names,
                "public": list(by.categories),
                "runs": runs,
            }
            theirs: dict[str, list[float]] = {}
            for run in peers(python, job)["runs"]:
                for group, values in run.items():
                    for name, v in values.items():
                        theirs.setdefault(name, []).append(v - float(truth.loc[group, name]))
            for name in names:
                row = {
                    "unit": unit or "row",
                    "table": label,
                    "measure": name,
                    "dppub_rmse": _rmse(ours.get(name, [])),
                    "pipelinedp_rmse": _rmse(theirs.get(name, [])),
                }
                out.append(row)
                print(
                    f"  rmse {row['unit']}/{label}/{name}: dppub {row['dppub_rmse']:.4g}, "
                    f"pipelinedp {row['pipelinedp_rmse']:.4g}",
                    flush=True,
                )
    return out


DECILES = [i / 10 for i in range(1, 10)]


FEW_THOUSAND = (1_000, 10_000)
"""The groups the quantile target is about ("a few thousand rows"), a fixed rule on the true
group sizes for every data set; the table also pools over all groups."""


def quantiles_section(
    python: Path, data: Path, runs: int, frame: pd.DataFrame, by: Grouping
) -> list[dict[str, Any]]:
    """Quantiles of a measure by declared groups, epsilon 1 per table: rank error in percentile
    points, ``|F(answer) - p|`` with ``F`` the group's empirical CDF, dppub against OpenDP (each
    quantile at ``epsilon / k``, on the same grid), for one median and for the nine deciles."""
    key, value = by.key, by.value
    path = data / f"quantiles_{len(frame)}.parquet"
    frame[[key, value, "household"]].to_parquet(path, index=False)
    values = {str(k): np.sort(g[value].to_numpy()) for k, g in frame.groupby(key)}
    lo, hi = (float(b) for b in by.bounds)

    def rank_error(group: str, answer: float, p: float) -> float:
        x = values[group]
        below = np.searchsorted(x, answer, side="left") / len(x)
        upto = np.searchsorted(x, answer, side="right") / len(x)
        return 100.0 * max(0.0, below - p, p - upto)  # 0 when answer is a p-quantile

    settings = {"median": [0.5], "deciles": DECILES}
    tables = [
        {"name": name, "epsilon": EPSILON, "by": [key], "measures": [{"quantile": value, "at": at}]}
        for name, at in settings.items()
    ]
    folder = data / f"quantiles-{key}"
    folder.mkdir(exist_ok=True)
    # Per answer: (the group's rows, rank error); a declared group without rows has no quantile.
    ours: dict[str, list[tuple[int, float]]] = {name: [] for name in settings}
    for answers in dppub_tables(folder, path, tables, runs, by.columns()):
        for name, at in settings.items():
            labels = {f"quantile({value}, {p:g})": p for p in at}
            for _, row in answers[name].iterrows():
                group = row[key]
                if group in values:
                    err = rank_error(group, float(row["answer"]), labels[row["measure"]])
                    ours[name].append((len(values[group]), err))
    theirs: dict[str, list[tuple[int, float]]] = {}
    for name, at in settings.items():
        job = {
            "kind": "quantiles",
            "path": str(path),
            "key": key,
            "value": value,
            "epsilon": EPSILON,
            "alphas": at,
            "bounds": [lo, hi],
            "bins": by.bins,
            "runs": runs,
        }
        theirs[name] = [
            (len(values[k]), rank_error(k, float(v), p))
            for run in peers(python, job)["runs"]
            for k, vs in run.items()
            for v, p in zip(vs, at, strict=True)
        ]
    # For one median both sides draw a grid point by report-noisy-max with exponential noise of
    # scale 2 * 0.5 / eps over the same utilities (-|rows below - rows above| / 2, OpenDP's):
    # that one distribution's expected error, simulated, per group.
    edges = np.linspace(lo, hi, by.bins + 1)
    sim = np.random.default_rng(0)
    expected, expected_all = [], []
    for group, x in values.items():
        below = np.searchsorted(x, edges, side="left")
        above = len(x) - np.searchsorted(x, edges, side="right")
        a = -np.abs(below - above) / 2 / (2 * 0.5 / EPSILON)
        near = np.flatnonzero(a >= a.max() - 40.0)  # others win with probability < e^-40
        wins = np.argmax(a[near] + sim.exponential(size=(200_000, near.size)), axis=1)
        at_edge = np.asarray([rank_error(group, float(edges[i]), 0.5) for i in near])
        expected_all.append(float(at_edge[wins].mean()))
        if FEW_THOUSAND[0] <= len(x) <= FEW_THOUSAND[1]:
            expected.append(expected_all[-1])
    out = []
    for name in settings:
        for side, errs in (("dppub", ours[name]), ("opendp", theirs[name])):
            sizes, every = (np.asarray(v, dtype=float) for v in zip(*errs, strict=True))
            e = every[(sizes >= FEW_THOUSAND[0]) & (sizes <= FEW_THOUSAND[1])]
            entry: dict[str, Any] = {
                "side": side,
                "quantiles": name,
                "mean_pp": float(e.mean()),
                "rms_pp": float(np.sqrt(np.mean(e**2))),
                "max_pp": float(e.max()),
                "n": len(e),
                "all_groups_mean_pp": float(every.mean()),
                "all_groups_max_pp": float(every.max()),
            }
            if name == "median":
                entry["expected_mean_pp"] = float(np.mean(expected))
                entry["expected_all_groups_mean_pp"] = float(np.mean(expected_all))
            out.append(entry)
            print(f"  rank error {name} {side}: mean {e.mean():.3f} pp, max {e.max():.3f} pp")
    print(
        f"  expected median (both): mean {np.mean(expected):.3f} pp, all groups "
        f"{np.mean(expected_all):.3f} pp",
        flush=True,
    )
    return out


def _process(args: list[str], **kw: Any) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system, of the child and its children) of a whole process,
    and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, check=True, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def time_section(python: Path, data: Path, repeats: int) -> dict[str, Any]:
    """Each tool in-process and as a whole process, ``repeats`` rounds taken in turn (so a
    change in the machine's load hits both alike); median wall and CPU seconds."""
    path = data / "census_300000.parquet"
    make_census(300_000, 20261121).to_parquet(path, index=False)
    table = {
        "name": "income_by_zip",
        "epsilon": EPSILON,
        "delta": DELTA,
        "by": ["zip"],
        "keys": "private",
        "measures": ["count", {"sum": "income"}, {"mean": "income"}],
    }
    folder = data / "time"
    folder.mkdir(exist_ok=True)
    job = {
        "kind": "time",
        "path": str(path),
        "key": "zip",
        "value": "income",
        "unit": "__row__",
        "epsilon": EPSILON,
        "delta": DELTA,
        "max_partitions": 1,
        "max_per_partition": 1,
        "bounds": [0.0, 250_000.0],
        "out": str(folder / "pipelinedp.csv"),
    }
    cli = [str(Path(sys.executable).parent / "dppub"), "run", str(folder / "tables.yaml")]
    cli += ["--ledger", str(folder / "cli.sqlite"), "--out", str(folder / "cli-out")]
    # no Prefect API (a run recorded in a Prefect server is another mode: bench/startup.py)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DPPUB_DEBUG")}
    env |= {"PREFECT_HOME": str(folder / "prefect"), "DPPUB_HOME": str(folder / "state")}
    script = str(ROOT / "bench" / "tables_peers.py")
    rows: dict[str, list[tuple[float, float]]] = {}
    keys, load = 0, os.getloadavg()[0]
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        dppub_tables(folder, path, [table], 1)  # writes folder / tables.yaml
        rows.setdefault("dppub in-process", []).append(
            (time.perf_counter() - start, time.process_time() - cpu)
        )
        wall, cpu_s = _process(cli, cwd=ROOT, env=env)[:2]
        rows.setdefault("dppub whole process", []).append((wall, cpu_s))
        wall, cpu_s, out = _process([str(python), script], input=json.dumps(job))
        theirs = json.loads(out)
        keys = theirs["keys"]
        rows.setdefault("PipelineDP in-process", []).append(
            (theirs["seconds"], theirs["cpu_seconds"])
        )
        rows.setdefault("PipelineDP whole process", []).append((wall, cpu_s))
        print(f"  time round: {', '.join(f'{k} {v[-1][0]:.2f} s' for k, v in rows.items())}")
    median = {
        name: {
            "wall_seconds": statistics.median(w for w, _ in runs),
            "cpu_seconds": statistics.median(c for _, c in runs),
            "wall_runs": [w for w, _ in runs],
            "cpu_runs": [c for _, c in runs],
        }
        for name, runs in rows.items()
    }
    return {
        "repeats": repeats,
        "pipelinedp_keys": keys,
        "load_average": [load, os.getloadavg()[0]],
        **median,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--peers-venv", type=Path, default=Path("/tmp/dppub-bench-tables"))
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/dppub-bench-tables-data"))
    parser.add_argument("--skip-time", action="store_true")
    parser.add_argument("--time-repeats", type=int, default=3)
    parser.add_argument("--skip-measures", action="store_true")
    parser.add_argument("--skip-quantiles", action="store_true")
    parser.add_argument("--skip-keys", action="store_true")
    parser.add_argument("--data", choices=["demo", "adult", "fars"], default="demo")
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    python = peers_python(args.peers_venv)
    start = time.perf_counter()
    data, d = args.data_dir, data_sets()[args.data]
    g, q = d.grouping, d.quantile_grouping
    keys = [] if args.skip_keys else keys_section(python, d.keys(data), args.runs)
    measures = (
        [] if args.skip_measures else measures_section(python, data, args.runs, d.measures(), g)
    )
    ranks = (
        [] if args.skip_quantiles else quantiles_section(python, data, args.runs, d.quantiles(), q)
    )
    timing = (
        None
        if args.skip_time or args.data != "demo"
        else time_section(python, data, args.time_repeats)
    )
    print(f"\nPrivate keys at epsilon {EPSILON}, delta {DELTA} (mean of {args.runs} runs)")
    print(
        f"{'data':8} {'unit':7} {'m':>2} {'real':>5} {'dppub':>7} {'PipelineDP':>11} {'ratio':>6}"
        f" {'E dppub':>8} {'E PipelineDP':>13} {'E ratio':>8}"
    )
    for row in keys:
        ours, theirs = float(np.mean(row["dppub"])), float(np.mean(row["pipelinedp"]))
        ratio = ours / theirs if theirs else float("inf")
        e_ours, e_theirs = row["dppub_expected"], row["pipelinedp_expected"]
        e_ratio = e_ours / e_theirs if e_theirs else float("inf")
        print(
            f"{row['data']:8} {row['unit']:7} {row['max_partitions']:>2} {row['real_keys']:>5} "
            f"{ours:>7.1f} {theirs:>11.1f} {ratio:>6.2f} {e_ours:>8.2f} {e_theirs:>13.2f}"
            f" {e_ratio:>8.3f}"
        )
    if measures:
        print(
            f"\nRMSE of {g.value} by {g.key} ({len(g.categories)} declared groups), "
            f"{args.data} data, epsilon {EPSILON}, {args.runs} runs pooled"
        )
        print(
            f"{'unit':10} {'table':15} {'measure':8} {'dppub':>10} {'PipelineDP':>11} {'ratio':>6}"
        )
        for r in measures:
            ratio = r["dppub_rmse"] / r["pipelinedp_rmse"]
            print(
                f"{r['unit']:10} {r['table']:15} {r['measure']:8} {r['dppub_rmse']:>10.4g} "
                f"{r['pipelinedp_rmse']:>11.4g} {ratio:>6.3f}"
            )
    if timing is not None:
        print(
            "\nTime of count+sum+mean of income by zip (private keys), 300,000 rows, median of "
            f"{timing['repeats']} (load average {timing['load_average'][0]:.1f} at the start, "
            f"{timing['load_average'][1]:.1f} at the end):"
        )
        print(f"{'':26} {'wall s':>7} {'CPU s':>7}  x PipelineDP's (wall / CPU)")
        for tool in ("PipelineDP", "dppub"):
            for scope in ("in-process", "whole process"):
                t, peer = timing[f"{tool} {scope}"], timing[f"PipelineDP {scope}"]
                ratio = t["wall_seconds"] / peer["wall_seconds"]
                cpu_ratio = t["cpu_seconds"] / peer["cpu_seconds"]
                print(
                    f"{tool + ' ' + scope:26} {t['wall_seconds']:>7.2f} {t['cpu_seconds']:>7.2f}"
                    f" {ratio:>6.3f} / {cpu_ratio:.3f}"
                )
    if ranks:
        print(
            f"\nQuantiles of {q.value} by {q.key}, epsilon {EPSILON}: rank error, pp, over groups "
            f"of {FEW_THOUSAND[0]:,}-{FEW_THOUSAND[1]:,} rows (all groups: mean, max)"
        )
        for r in ranks:
            expected = r.get("expected_mean_pp")
            expected_all = r.get("expected_all_groups_mean_pp")
            print(
                f"{r['quantiles']:8} {r['side']:8} mean {r['mean_pp']:.3f}  "
                f"rms {r['rms_pp']:.3f}  max {r['max_pp']:.3f}  ({r['n']} answers; all "
                f"{r['all_groups_mean_pp']:.3f}, {r['all_groups_max_pp']:.3f}"
                + (
                    f"; expected mean {expected:.3f}, all {expected_all:.3f})"
                    if expected is not None
                    else ")"
                )
            )
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "data": args.data,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "epsilon": EPSILON,
        "delta": DELTA,
        "keys": keys,
        "measures": measures,
        "time": timing,
        "quantiles": ranks,
        "seconds": time.perf_counter() - start,
    }
    out = OUT if args.data == "demo" else OUT.with_name(f"tables_{args.data}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
