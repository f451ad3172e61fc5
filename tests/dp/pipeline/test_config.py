import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.plan import build_plan, load_config, load_plan
from tests.examples import example
from tests.values import num, obj, seq

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "configs" / "demo.yaml"


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _demo_raw() -> dict[str, Any]:
    return example("demo.yaml")


def test_demo_plan_is_known_before_reading_data() -> None:
    cfg = load_config(DEMO)
    plan = build_plan(cfg)
    assert plan.releases[0].name == "k_anonymous_table"
    assert not plan.releases[0].is_dp
    assert plan.total.epsilon == pytest.approx(
        sum(p.cost.epsilon for p in plan.releases if p.is_dp)
    )
    assert cfg.data_path() == (ROOT / "data" / "sample" / "census.parquet")
    assert load_plan(DEMO).total == plan.total  # load_plan: load_config, then build_plan


def test_yaml_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("dataset:\n  name: x\n  budget: {epsilon: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: line 4, column 1: YAML error"):
        load_config(path)


@pytest.mark.parametrize("eps", [0, -1])
def test_bad_epsilon_in_a_stage(tmp_path: Path, eps: object) -> None:
    raw = _demo_raw()
    raw["workloads"][0]["epsilon"] = eps
    with pytest.raises(ConfigError, match=r"workloads\.0\.epsilon: epsilon must be finite and > 0"):
        load_config(_write(tmp_path, raw))


@pytest.mark.parametrize("eps", [".nan", ".inf", "-.inf"])
def test_a_non_finite_number_anywhere_names_its_line(tmp_path: Path, eps: str) -> None:
    raw = _demo_raw()
    raw["workloads"][0]["epsilon"] = float(eps.replace(".", ""))
    path = _write(tmp_path, raw)
    line = next(
        i
        for i, t in enumerate(path.read_text().splitlines(), 1)
        if "epsilon: " in t and ("nan" in t or "inf" in t)
    )
    with pytest.raises(ConfigError, match=rf"line {line}, column \d+: the number '{eps}' is not"):
        load_config(path)


def test_bad_delta_and_unknown_keys(tmp_path: Path) -> None:
    raw = _demo_raw()
    raw["dataset"]["budget"]["delta"] = 1.5
    with pytest.raises(ConfigError, match=r"dataset\.budget\.delta: delta must be in \[0, 1\)"):
        load_config(_write(tmp_path, raw))
    raw = _demo_raw()
    raw["workloads"][0]["epsilom"] = 1.0
    with pytest.raises(ConfigError, match="workloads.0: unknown key 'epsilom'"):
        load_config(_write(tmp_path, raw))


def test_the_pandas_engine_alias_is_gone(tmp_path: Path) -> None:
    raw = _demo_raw()
    raw["dataset"]["engine"] = "pandas"
    path = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: dataset.engine: Input should be 'auto', 'memory', 'stream' or 'dask', "
        "got 'pandas'"
    )
    raw["dataset"]["engine"] = "memory"
    path = _write(tmp_path, raw)
    with pytest.raises(
        ConfigError, match="engine must be auto, memory, stream or dask, got 'pandas'"
    ):
        build_plan(load_config(path), "pandas")


def test_unknown_workload_name(tmp_path: Path) -> None:
    raw = _demo_raw()
    raw["workloads"][0]["workload"] = "everything"
    with pytest.raises(ConfigError, match=r"workloads\.0\.workload: Input should be"):
        load_config(_write(tmp_path, raw))


def test_cross_checks(tmp_path: Path) -> None:
    raw = _demo_raw()
    raw["regressions"][0]["features"] = ["age", "salary"]
    with pytest.raises(ConfigError, match=r"not declared in dataset.columns: \['salary'\]"):
        load_plan(_write(tmp_path, raw))
    raw = _demo_raw()
    raw["regressions"][0]["name"] = "age_cdf"
    with pytest.raises(ConfigError, match=r"release names must be unique, got \['age_cdf'\]"):
        load_plan(_write(tmp_path, raw))
    raw = _demo_raw()
    raw["anonymize"]["quasi_identifiers"].append("race")
    with pytest.raises(ConfigError, match=r"quasi-identifiers without a hierarchy: \['race'\]"):
        load_plan(_write(tmp_path, raw))


def test_config_hash_ignores_location_but_not_content(tmp_path: Path) -> None:
    raw = _demo_raw()
    a = load_config(_write(tmp_path, raw))
    raw["workloads"][0]["epsilon"] = 0.41
    b = load_config(_write(tmp_path, raw))
    assert a.config_hash != b.config_hash
    assert load_config(DEMO).config_hash != ""


def test_plan_reports_expected_error_above_the_svd_bound(tmp_path: Path) -> None:
    from dppub.api import plan

    payload = plan(DEMO, ledger=tmp_path / "no-ledger.sqlite").details
    assert not (tmp_path / "no-ledger.sqlite").exists()  # plan never creates a ledger
    workloads = [obj(r) for r in seq(payload["releases"]) if obj(r)["kind"] == "workload"]
    assert [w["name"] for w in workloads] == ["age_cdf", "income_ranges", "age_band_by_sex"]
    for w in workloads:
        assert num(w["svd_bound_rmse"]) <= num(w["expected_rmse"]) * (1 + 1e-9)
    assert workloads[0]["queries"] == 74
    assert payload["remaining_epsilon"] == payload["budget_epsilon"]


def test_report_shows_zcdp_beside_basic_composition_for_gaussian_releases() -> None:
    from dppub.dp.budget import PrivacyCost, zcdp_to_dp
    from dppub.dp.pipeline.kinds import ReleaseSummary
    from dppub.dp.pipeline.kinds.base import Result
    from dppub.dp.pipeline.kinds.regression import RegressionKind
    from dppub.dp.pipeline.report import budget_table

    def gauss(i: int) -> ReleaseSummary:
        return ReleaseSummary(
            name=f"g{i}",
            release_kind=RegressionKind(),
            mechanism="adassp-gaussian",
            cost=PrivacyCost(epsilon=0.3, delta=1e-7),
            is_dp=True,
            sensitivity=None,
            parts=(),
            files=(),
            output_hash="",
            result=Result(zcdp_rho=0.002),
        )

    summaries = [gauss(i) for i in range(10)]
    total = PrivacyCost(epsilon=3.0, delta=1e-6)
    table = budget_table(summaries, total=total, budget=total, remaining=PrivacyCost.zero())
    assert "rho = 0.02" in table
    assert f"epsilon = {zcdp_to_dp(0.02, 1e-6):.4g}" in table
    assert zcdp_to_dp(0.02, 1e-6) < 3.0  # tighter than adding ten epsilons of 0.3
    pure = budget_table(
        summaries[:1], total=PrivacyCost(epsilon=0.3), budget=total, remaining=PrivacyCost.zero()
    )
    assert "zCDP" not in pure


@pytest.mark.slow
def test_task_runner_follows_the_engine(tmp_path: Path) -> None:
    from prefect_dask.task_runners import DaskTaskRunner

    from dppub.flows.runner import dask_cluster, task_runner

    raw = _demo_raw()
    raw["dataset"]["path"] = str(ROOT / "data" / "sample" / "census.parquet")
    pandas = load_config(_write(tmp_path, raw))
    assert task_runner(dask_cluster(build_plan(pandas))) is None  # Prefect's default thread pool
    local = task_runner(dask_cluster(build_plan(pandas, "dask")))
    assert isinstance(local, DaskTaskRunner)
    assert local.cluster_kwargs["n_workers"] == 2
    assert local.cluster_kwargs["threads_per_worker"] == 1
    assert local.cluster_kwargs["security"] is True  # temporary TLS: no other local client
    raw["dataset"].update(engine="dask", scheduler="tcp://10.0.0.5:8786", workers=4)
    remote = load_config(_write(tmp_path, raw))
    runner = task_runner(dask_cluster(build_plan(remote)))
    assert isinstance(runner, DaskTaskRunner)
    assert runner.address == "tcp://10.0.0.5:8786"
    assert task_runner(dask_cluster(build_plan(remote, "stream"))) is None
    # How the aggregates are computed is not part of what the config releases.
    assert remote.config_hash == pandas.config_hash


def _marginals(**budget: object) -> dict[str, Any]:
    raw = _demo_raw()
    raw["dataset"]["budget"]["delta"] = 1e-5
    raw["workloads"] = [
        {
            "name": "m",
            "attributes": [
                {"column": "age", "level": 2},
                {"column": "sex"},
                {"column": "race"},
                {"column": "education"},
                {"column": "marital"},
                {"column": "hours", "bins": 10},
                {"column": "income", "bins": 10},
            ],
            "workload": "marginals",
            "marginal_k": 2,
            **budget,
        }
    ]
    return raw


def test_a_rho_budget_is_charged_as_its_epsilon_delta_and_measured_with_gaussian_noise(
    tmp_path: Path,
) -> None:
    from dppub.dp.matrix import zcdp_cost

    plan = build_plan(load_config(_write(tmp_path, _marginals(rho=0.02, delta=1e-6))))
    (release,) = (r for r in plan.releases if r.name == "m")
    assert release.mechanism == "gaussian"
    assert release.cost == zcdp_cost(0.02, 1e-6)
    laplace = build_plan(load_config(_write(tmp_path, _marginals(epsilon=release.cost.epsilon))))
    (same_eps,) = (r for r in laplace.releases if r.name == "m")
    # 21 overlapping marginals: at the same (epsilon, delta) Gaussian noise answers better.
    assert release.spec.expected_rmse(release.cost) < same_eps.spec.expected_rmse(same_eps.cost)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"rho": 0.02}, r"needs delta in \(0, 1\)"),
        ({"rho": 0.02, "epsilon": 1.0, "delta": 1e-6}, "either epsilon or rho"),
        ({"rho": 0.02, "delta": 1e-6, "noise": "laplace"}, "for Gaussian noise"),
        ({"epsilon": 1.0, "noise": "gaussian"}, "needs delta > 0"),
        ({"epsilon": 1.0, "delta": 1e-6}, "only by Gaussian noise"),
    ],
)
def test_noise_and_budget_must_agree(tmp_path: Path, budget: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, _marginals(**budget)))


def test_a_workload_over_more_cells_than_intervals_are_computed_for_says_so(
    tmp_path: Path,
) -> None:
    from dppub.dp.pipeline.kinds import ReleaseSummary
    from dppub.dp.pipeline.kinds.workload import kind as workloads
    from dppub.dp.pipeline.kinds.workload import result

    plan = build_plan(load_config(_write(tmp_path, _marginals(epsilon=1.0))))
    (release,) = (r for r in plan.releases if r.name == "m")
    assert release.spec.workload.n > result.MAX_INTERVAL_CELLS
    # Decided by the workload's size alone: no estimate is even looked at.
    assert workloads.workload_intervals(release.spec, result=None) is None  # type: ignore[arg-type]
    released = result.WorkloadResult.model_validate(
        {
            "workload": "marginals", "queries": 1, "cells": 2, "strategy": "s",
            "reconstruction": "nonneg-l1", "expected_rmse": 1.0, "svd_bound_rmse": 0.5,
            "noise": "laplace", "noise_scale": 1.0, **result.NO_INTERVALS,
        }
    )  # fmt: skip
    summary = ReleaseSummary(
        name="m", release_kind=workloads.WorkloadKind(), mechanism="laplace", cost=release.cost,
        is_dp=True, sensitivity=1.0, parts=(), files=(), output_hash="", result=released,
    )  # fmt: skip
    (line,) = workloads.WorkloadKind().report(summary)
    assert "No intervals (none: intervals are computed for up to 2048 cells)" in line


def _with_unit(raw: dict[str, Any]) -> dict[str, Any]:
    raw["dataset"]["columns"]["person"] = {"type": "int", "bounds": [0, 10**6]}
    raw["dataset"].update(privacy_unit="person", max_rows_per_unit=3)
    return raw


# Where each privacy parameter lives in the demo config (a per-month cap and a unit added).
PARAMETERS: dict[str, tuple[str | int, ...]] = {
    "budget epsilon": ("dataset", "budget", "epsilon"),
    "budget delta": ("dataset", "budget", "delta"),
    "cap epsilon": ("dataset", "budget", "cap", "epsilon"),
    "workload epsilon": ("workloads", 0, "epsilon"),
    "workload bins": ("workloads", 1, "attributes", 0, "bins"),
    "marginal_k": ("workloads", 2, "marginal_k"),
    "regression epsilon": ("regressions", 0, "epsilon"),
    "logistic threshold": ("regressions", 1, "threshold"),
    "clustering epsilon": ("clustering", 0, "epsilon"),
    "clustering k": ("clustering", 0, "k"),
    "k-anonymity k": ("anonymize", "k"),
    "max_suppression": ("anonymize", "max_suppression"),
    "bounds": ("dataset", "columns", "age", "bounds", 1),
    "max_rows_per_unit": ("dataset", "max_rows_per_unit"),
    "max_partitions_per_unit": ("dataset", "max_partitions_per_unit"),
}


def _set(raw: dict[str, Any], where: tuple[str | int, ...], value: object) -> dict[str, Any]:
    node: Any = raw  # a mapping or a list, as the YAML nests them
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return raw


def _privacy_raw() -> dict[str, Any]:
    raw = _with_unit(_demo_raw())
    raw["dataset"]["budget"].update(per="month", cap={"epsilon": 2.0})
    raw["dataset"]["max_partitions_per_unit"] = 1
    return raw


def test_every_privacy_parameter_takes_an_int_where_a_float_is_expected(tmp_path: Path) -> None:
    raw = _privacy_raw()
    raw["dataset"]["budget"]["epsilon"] = 4
    raw["workloads"][0]["epsilon"] = 1
    raw["regressions"][1]["threshold"] = 75000
    cfg = load_config(_write(tmp_path, raw))
    assert cfg.budget.epsilon == 4.0 and isinstance(cfg.budget.epsilon, float)
    load_plan(_write(tmp_path, raw))


@pytest.mark.slow
@pytest.mark.parametrize("value", [True, False, "0.5", "3"])
@pytest.mark.parametrize("parameter", list(PARAMETERS))
def test_a_privacy_parameter_must_be_a_number(
    tmp_path: Path, parameter: str, value: object
) -> None:
    # `epsilon: true` was read as 1 and `epsilon: "0.5"` as 0.5.
    where = PARAMETERS[parameter]
    raw = _set(_privacy_raw(), where, value)
    loc = ".".join(str(k) for k in where)
    with pytest.raises(ConfigError, match=rf"c\.yaml: {loc}: must be a (whole )?number, got "):
        load_config(_write(tmp_path, raw))


def test_a_rho_must_be_a_number(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"workloads\.0(\.rho)?: (rho )?must be a number"):
        load_config(_write(tmp_path, _marginals(rho="0.02", delta=1e-6, noise="gaussian")))


def test_a_number_with_an_exponent_is_a_number(tmp_path: Path) -> None:
    # YAML 1.1 reads `1e-6` as text; with strict numbers that would refuse the usual delta.
    declared = (ROOT / "configs" / "datasets" / "census.yaml").read_text()
    text = declared.replace("    delta: 1.0e-5\n", "    delta: 1e-6\n")
    text = text.replace("    epsilon: 8.0 ", "    epsilon: 4e0 ")
    (tmp_path / "datasets").mkdir()
    dataset = tmp_path / "datasets" / "census.yaml"
    dataset.write_text(text)
    path = tmp_path / "c.yaml"
    path.write_text(DEMO.read_text())
    cfg = load_config(path)
    assert cfg.budget.delta == 1e-6 and cfg.budget.epsilon == 4.0
    dataset.write_text(text.replace("delta: 1e-6", "delta: '1e-6'"))
    with pytest.raises(ConfigError, match=r"census.yaml: dataset\.budget\.delta: must be a number"):
        load_config(path)


EXTREMES: list[tuple[tuple[str | int, ...], object, str]] = [
    (("workloads", 0, "epsilon"), 1e308, r"epsilon must be at most 1,000 \("),
    (("dataset", "budget", "epsilon"), 1e308, r"epsilon must be at most 1,000 \("),
    (("dataset", "budget", "epsilon"), 1000.5, r"epsilon must be at most 1,000 \("),
    (("dataset", "budget", "cap", "epsilon"), 1e300, r"epsilon must be at most 1,000 \("),
    (("clustering", 0, "epsilon"), 10**308, r"epsilon must be at most 1,000 \("),
    (("clustering", 0, "epsilon"), 10**400, "must be a number a float can hold, got one of 401"),
    (("dataset", "budget", "delta"), 0.5, r"delta must be in \[0, 0.01\]"),
    (("dataset", "budget", "delta"), 1.5, r"delta must be in \[0, 1\)"),
    (("regressions", 0, "delta"), 0.02, r"delta must be in \[0, 0.01\]"),
    (("dataset", "columns", "income", "bounds", 1), 1e300, r"a bound must lie within"),
    (("dataset", "columns", "hours", "bounds", 0), -1e19, r"a bound must lie within"),
]


@pytest.mark.parametrize(("where", "value", "message"), EXTREMES)
def test_extreme_privacy_parameters_are_refused(
    tmp_path: Path, where: tuple[str | int, ...], value: object, message: str
) -> None:
    # `epsilon: 1e308` was accepted and reserved, and then made the ledger unusable.
    raw = _set(_privacy_raw(), where, value)
    loc = ".".join(str(k) for k in where).replace(".", r"\.")
    with pytest.raises(ConfigError, match=rf"{loc}: {message}"):
        load_config(_write(tmp_path, raw))


def test_the_largest_accepted_values(tmp_path: Path) -> None:
    raw = _demo_raw()
    raw["dataset"]["budget"] = {"epsilon": 1000, "delta": 0.01}
    for w in raw["workloads"]:
        w["epsilon"] = 100.0
    raw["regressions"][0].update(epsilon=1000.0, delta=0.01, method="adassp")
    cfg = load_config(_write(tmp_path, raw))
    assert cfg.budget.epsilon == 1000.0 and cfg.budget.delta == 0.01
    plan = build_plan(load_config(_write(tmp_path, _marginals(rho=100.0, delta=1e-300))))
    assert plan.total.epsilon <= 1000.0  # rho's largest conversion fits the epsilon limit


def test_a_rho_beyond_its_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"workloads\.0\.rho: rho must be in \(0, 100\]"):
        load_config(_write(tmp_path, _marginals(rho=100.5, delta=1e-6)))


def test_the_plans_total_is_bounded_too(tmp_path: Path) -> None:
    # Each release within the limit, their sum beyond it: refused at plan time (exit 2), not
    # reserved.
    raw = _demo_raw()
    raw["dataset"]["budget"]["epsilon"] = 1000
    for w in raw["workloads"]:
        w["epsilon"] = 400.0
    with pytest.raises(
        ConfigError, match=r"the releases' total epsilon must be at most 1,000 \(.*got 1200\.7"
    ):
        load_plan(_write(tmp_path, raw))
    raw = _demo_raw()
    for section in ("workloads", "regressions", "clustering"):
        del raw[section]
    assert build_plan(load_config(_write(tmp_path, raw))).total.epsilon == 0.0  # not DP: free


@pytest.mark.parametrize("section", ["dataset", "workloads", "regressions", "clustering"])
def test_names_are_at_most_64_characters(tmp_path: Path, section: str) -> None:
    # A 300-letter dataset name gave a traceback from the lock file.
    raw = _demo_raw()
    item = raw["dataset"] if section == "dataset" else raw[section][0]
    item["name"] = "n" * 64
    load_config(_write(tmp_path, raw))
    item["name"] = "n" * 300
    loc = "dataset" if section == "dataset" else f"{section}.0"
    with pytest.raises(ConfigError, match=rf"{loc}\.name: a name is at most 64 characters .*300"):
        load_config(_write(tmp_path, raw))


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"cron": "61 * * * *"}, "schedule.cron: invalid cron '61 * * * *'"),
        ({"cron": "* * * *"}, "schedule.cron: invalid cron"),
        ({"cron": "H 3 * * *"}, "schedule.cron: invalid cron"),
        ({"cron": "every monday"}, "schedule.cron: invalid cron"),
        ({"cron": "0 0 30 2 *"}, "schedule.cron: cron '0 0 30 2 *' never fires"),
        ({"cron": "0 0 31 4 *"}, "schedule.cron: cron '0 0 31 4 *' never fires"),
        ({"cron": "0 3 * * 1", "timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"cron": 5}, "schedule.cron: Input should be a valid string"),
        ({"interval_seconds": True}, "must be a number, got true/false True"),
        ({"interval_seconds": 1e-300}, "greater than or equal to 1"),
    ],
)
def test_a_schedule_prefect_would_refuse_is_refused_at_load(
    tmp_path: Path,
    schedule: dict[str, object],
    message: str,
) -> None:
    # An invalid cron was accepted by plan and run; only serve noticed, after 27 s.
    raw = _demo_raw()
    raw["schedule"] = schedule
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(_write(tmp_path, raw))


@pytest.mark.parametrize(
    "schedule",
    [
        {"cron": "0 3 * * 1"},
        {"cron": "*/15 8-18 * * mon-fri", "timezone": "Europe/Berlin"},
        {"cron": "@daily"},
        {"interval_seconds": 3600},
    ],
)
def test_valid_schedules_load(tmp_path: Path, schedule: dict[str, Any]) -> None:
    raw = _demo_raw()
    raw["schedule"] = schedule
    assert load_config(_write(tmp_path, raw)).schedule is not None


def test_a_renewing_budget_with_a_privacy_unit_is_refused(tmp_path: Path) -> None:
    # A unit with rows in k months lost k budgets while every report stated one.
    raw = _with_unit(_demo_raw())
    raw["dataset"]["path"] = "data/{period}/census.parquet"
    raw["dataset"]["budget"] = {"epsilon": 1.0, "per": "month", "renew": True}
    with pytest.raises(
        ConfigError,
        match=r"budget renew: true cannot be used with privacy_unit 'person': a unit may have "
        r"rows in every period",
    ):
        load_config(_write(tmp_path, raw))
    del raw["dataset"]["privacy_unit"], raw["dataset"]["max_rows_per_unit"]
    assert load_config(_write(tmp_path, raw)).dataset.budget.renew  # rows alone: parallel
    raw = _with_unit(raw)
    raw["dataset"]["path"] = "census.parquet"
    raw["dataset"]["budget"] = {"epsilon": 4.0, "per": "month", "cap": {"epsilon": 1.0}}
    assert load_config(_write(tmp_path, raw)).dataset.budget.cap is not None  # a cap is fine
