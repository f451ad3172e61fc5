"""The publish flow (a served run: it opens its own run) on a real Prefect server
(``prefect server start``, the session's), as Prefect records it."""

import errno
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    TaskRunFilter,
    TaskRunFilterName,
)
from prefect.settings import PREFECT_API_URL, temporary_settings

from dppub.dp import matrix
from dppub.dp.axes import category_axis
from dppub.dp.budget import PrivacyCost
from dppub.dp.ledger import Ledger
from dppub.dp.ledger.summary import spending_summary
from dppub.dp.pipeline.declared_domains import declared_hierarchy, hierarchy_from_values
from dppub.dp.pipeline.execute import compute_release
from dppub.dp.pipeline.kinds import ReleasePlan
from dppub.dp.pipeline.kinds.workload.kind import WorkloadKind, WorkloadSpec
from dppub.dp.pipeline.plan import load_config, load_plan
from dppub.dp.reference.frame import read_table
from dppub.dp.reference.frame_anonymity import anonymize
from dppub.dp.schema import ColumnSpec
from dppub.flows.publish import publish
from tests.dp.conftest import reserved_staging
from tests.flows.conftest import ConfigFactory, PrefectServer


@pytest.fixture(scope="module", autouse=True)
def on_server(prefect_server: PrefectServer) -> Iterator[None]:
    with temporary_settings(updates={PREFECT_API_URL: prefect_server.url}):
        yield


def test_publishes_atomically_and_records_the_ledger(
    tmp_path: Path, config_factory: ConfigFactory
) -> None:
    config = config_factory()
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    state = publish(str(config), str(ledger), str(out), return_state=True)
    run_id = state.result().run_id
    run_dir = out / "census_demo" / run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    total = load_plan(config).total
    assert manifest["run_id"] == run_id
    assert manifest["total_epsilon"] == pytest.approx(total.epsilon)
    names = [r["name"] for r in manifest["releases"]]
    assert names == [
        "k_anonymous_table",
        "age_cdf",
        "income_ranges",
        "age_band_by_sex",
        "income_model",
        "high_income",
        "income_by_education",
        "work_patterns",
    ]
    for release in manifest["releases"]:
        for f in release["files"]:
            assert (run_dir / f).is_file()
    assert (run_dir / "report.md").read_text().startswith("# dppub release")
    assert not any((out / "census_demo" / ".staging").iterdir())
    book = Ledger(ledger)
    head = (manifest["ledger_head"]["seq"], manifest["ledger_head"]["hash"])
    assert book.verify(expected_head=head).ok
    spent = spending_summary(book)["census_demo"]
    assert spent["lifetime_spent_epsilon"] == pytest.approx(total.epsilon)
    assert (spent["runs"], spent["pending_runs"]) == (1, 0)
    assert manifest["guarantee"]["not_dp_releases"] == ["k_anonymous_table"]
    assert "Not covered: k_anonymous_table" in (run_dir / "report.md").read_text()
    kanon = next(r for r in manifest["releases"] if r["kind"] == "k-anonymity")
    assert kanon["is_dp"] is False
    # The trace regression's tasks are disjoint: six ledger rows that compose to one epsilon.
    rows = [
        r
        for r in book.history()
        if r["event"] == "release" and str(r["release"]).startswith("income_by")
    ]
    assert len(rows) == 6
    assert {r["epsilon"] for r in rows} == {0.15}
    trace = json.loads((run_dir / "income_by_education" / "model.json").read_text())
    assert trace["neighbours"] == "add/remove one record"
    answers = pd.read_parquet(run_dir / "age_cdf" / "answers.parquet")
    assert len(answers) == 90 - 17 + 1  # one prefix query per declared year
    assert list(answers.columns) == [
        *("query", "label", "answer", "std_error", "ci_low", "ci_high"),
        "interval",  # "conservative" where non-negativity moved the answer (issue 39)
    ]
    assert set(answers["interval"]) <= {"nominal", "conservative"}
    assert answers["label"].iloc[0] == "age <= 17" and answers["label"].iloc[-1] == "age <= 90"
    assert (answers["ci_low"] <= answers["answer"]).all()
    assert (answers["answer"] <= answers["ci_high"]).all()
    assert (answers["std_error"] > 0).all()
    pd.testing.assert_frame_equal(pd.read_csv(run_dir / "age_cdf" / "answers.csv"), answers)
    details = json.loads((run_dir / "age_cdf" / "release.json").read_text())["details"]
    assert details["interval_level"] == 0.95 and "bootstrap" in details["interval_method"]

    flow_run_id = state.state_details.flow_run_id
    assert flow_run_id is not None
    this_run = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
    with get_client(sync_client=True) as client:
        artifacts = {a.key: a for a in client.read_artifacts(flow_run_filter=this_run)}
        wanted = [f"release-{n}" for n in names]  # each release's task run is named after it
        runs = client.read_task_runs(
            flow_run_filter=this_run,
            task_run_filter=TaskRunFilter(name=TaskRunFilterName(any_=wanted)),
        )
    assert {t.name for t in runs} == set(wanted)
    table = artifacts["dppub-budget-census-demo-table"]
    assert table.type == "table"
    assert "income_model" in str(table.data)
    markdown = artifacts["dppub-budget-census-demo"]
    assert manifest["ledger_head"]["hash"] in str(markdown.data)
    page = (run_dir / "report.html").read_text()
    assert run_id in page and "<svg" in page  # the report with its plots, inside the run
    report = artifacts["dppub-budget-census-demo-report"]  # the report itself, in the UI
    assert report.type == "markdown" and report.data == (run_dir / "report.md").read_text()


def test_a_failure_before_any_draw_costs_nothing_and_after_one_is_charged(
    tmp_path: Path, config_factory: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_factory()
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"

    def unreadable(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("dppub.dp.pipeline.plan.Plan.source", unreadable)
    with pytest.raises(OSError, match="Input/output error"):
        publish(str(config), str(ledger), str(out))
    assert spending_summary(Ledger(ledger))["census_demo"]["aborted_runs"] == 1
    monkeypatch.undo()

    def flaky(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a flaky model fit")

    # The regressions fail after their draws were recorded.
    monkeypatch.setattr("dppub.dp.pipeline.kinds.regression.kind.RegressionKind.execute", flaky)
    with pytest.raises(RuntimeError, match="flaky"):
        publish(str(config), str(ledger), str(out))
    assert [p.name for p in (out / "census_demo").iterdir() if not p.name.startswith(".")] == []
    spent = spending_summary(Ledger(ledger))["census_demo"]
    # The releases run concurrently; each recorded its draw before computing (the failing
    # regressions too), and the run waited for all of them: it is charged for every draw.
    drawn = load_plan(config).total.epsilon
    assert (spent["charged_runs"], spent["lifetime_spent_epsilon"]) == (1, pytest.approx(drawn))


def test_a_reexecuted_noise_task_reuses_its_first_answer(tmp_path: Path) -> None:
    staging = reserved_staging(tmp_path)
    spec = ColumnSpec(name="sex", type="category", categories=("F", "M"))
    release = ReleasePlan(
        name="q",
        release_kind=WorkloadKind(),
        mechanism="laplace",
        cost=PrivacyCost(epsilon=1.0),
        is_dp=True,
        columns=("sex",),
        spec=WorkloadSpec(
            kind="identity",
            marginal_k=1,
            axes=(category_axis(spec),),
            workload=matrix.identity(2),
            strategy=None,
            reconstruction="least-squares",
        ),
    )
    exact = np.array([1.0, 2.0])
    first = compute_release(release, exact, None, staging, {})  # type: ignore[arg-type]
    answers = (staging.dir / "q" / "answers.parquet").read_bytes()
    second = compute_release(release, exact, None, staging, {})  # type: ignore[arg-type]
    assert second == first
    assert (staging.dir / "q" / "answers.parquet").read_bytes() == answers


def test_gaussian_release_reports_zcdp(tmp_path: Path, config_factory: ConfigFactory) -> None:
    import yaml

    config = config_factory()
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["budget"]["delta"] = 1e-5
    for key in ("anonymize", "workloads", "clustering"):
        raw.pop(key)
    raw["regressions"] = [{**raw["regressions"][0], "method": "adassp", "delta": 1e-6}]
    config.write_text(yaml.safe_dump(raw))
    run_id = publish(str(config), str(tmp_path / "l.sqlite"), str(tmp_path / "out")).run_id
    run_dir = tmp_path / "out" / "census_demo" / run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["total_delta"] == pytest.approx(1e-6)
    assert manifest["releases"][0]["mechanism"] == "adassp-gaussian"
    assert "zCDP accounting" in (run_dir / "report.md").read_text()
    spent = spending_summary(Ledger(tmp_path / "l.sqlite"))["census_demo"]
    assert spent["lifetime_spent_delta"] == pytest.approx(1e-6)


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_streaming_engines_publish_the_same_statistics(
    tmp_path: Path,
    config_factory: ConfigFactory,
    census_small: Path,
    census_frame: pd.DataFrame,
    engine: str,
) -> None:
    import yaml

    config = config_factory(budget=100.0)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"]["engine"] = engine
    raw["dataset"]["batch_size"] = 700  # several batches per file
    raw["dataset"]["workers"] = 1  # engine dask: one worker process (each imports dppub)
    raw["workloads"] = [
        {
            "name": "sex_counts",
            "epsilon": 50.0,
            "attributes": [{"column": "sex"}],
            "reconstruction": "least-squares",
        }
    ]
    config.write_text(yaml.safe_dump(raw))
    run_id = publish(str(config), str(tmp_path / "l.sqlite"), str(tmp_path / "out")).run_id
    run_dir = tmp_path / "out" / "census_demo" / run_id
    # The k-anonymous table, written batch by batch, is the in-memory path's (rows, order,
    # levels and metrics); no column was loaded whole for it.
    cfg = load_config(config)
    a = cfg.section("anonymize")[0]
    frame = read_table(
        census_small, cfg.table_schema, columns=[*a.quasi_identifiers, *a.include]
    ).frame
    hierarchies = {
        q: hierarchy_from_values(cfg, q, frame[q].unique().tolist())
        if q == "zip"
        else declared_hierarchy(cfg, q)
        for q in a.quasi_identifiers
    }
    want = anonymize(
        frame[[*a.quasi_identifiers, *a.include]],
        hierarchies,
        k=a.k,
        max_suppression=a.max_suppression,
        metric=a.metric,
    )
    got = pd.read_parquet(run_dir / a.name / "table.parquet")
    pd.testing.assert_frame_equal(got, want.table)
    metrics = json.loads((run_dir / a.name / "metrics.json").read_text())
    timings = ("search_seconds", "runtime_seconds")
    assert {k: v for k, v in metrics.items() if k not in timings} == json.loads(
        json.dumps({k: v for k, v in want.metrics.items() if k not in timings})
    )
    # DP k-means, streamed: one noisy Lloyd pass per iteration, centres inside the bounds.
    centres = np.array(
        json.loads((run_dir / "work_patterns" / "model.json").read_text())["centres"]
    )
    assert centres.shape == (3, 2)
    assert (centres >= [17, 1]).all() and (centres <= [90, 99]).all()
    # Every model is fitted from statistics folded over the streamed batches.
    for model in ("income_model", "high_income", "income_by_education"):
        assert json.loads((run_dir / model / "model.json").read_text())["coefficients"]
    answers = pd.read_parquet(
        tmp_path / "out" / "census_demo" / run_id / "sex_counts" / "answers.parquet"
    )["answer"].to_numpy()
    truth = census_frame["sex"].value_counts().reindex(["Female", "Male"]).to_numpy()
    # Laplace scale 1/50 per cell: |noise| > 1 has probability e^-50 (false-failure rate).
    assert np.abs(answers - truth).max() < 1.0


def test_streaming_engines_load_no_whole_column(
    tmp_path: Path, config_factory: ConfigFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    config = config_factory(budget=10.0)
    raw = yaml.safe_load(config.read_text())
    # Every kind of stage, plus a functional logistic model on a category target.
    raw["regressions"].append(
        {
            "name": "is_female",
            "model": "logistic",
            "method": "functional",
            "epsilon": 0.2,
            "target": "sex",
            "positive": "Female",
            "features": ["age", "hours"],
        }
    )
    config.write_text(yaml.safe_dump(raw))

    def no_frame(*args: object, **kwargs: object) -> None:
        raise AssertionError("a whole column was read")

    monkeypatch.setattr("dppub.dp.engine.memory.MemoryBackend.load", no_frame)
    run_id = publish(
        str(config), str(tmp_path / "l.sqlite"), str(tmp_path / "out"), engine="stream"
    ).run_id
    run_dir = tmp_path / "out" / "census_demo" / run_id
    model = json.loads((run_dir / "is_female" / "model.json").read_text())
    assert len(model["coefficients"]) == 2
    with pytest.raises(AssertionError, match="whole column"):
        publish(str(config), str(tmp_path / "l.sqlite"), str(tmp_path / "out"), engine="memory")


def test_a_code_of_another_length_is_dropped_alike_on_every_engine(
    tmp_path: Path, census_frame: pd.DataFrame
) -> None:
    import yaml

    from tests.flows.conftest import small_config

    bad = census_frame.copy()
    bad.loc[2999, "zip"] = "19x"  # not a 6-character code: dropped by the declared policy
    bad.to_parquet(tmp_path / "bad.parquet", index=False, row_group_size=700)
    config = small_config(tmp_path, tmp_path / "bad.parquet", budget=100.0)
    raw = yaml.safe_load(config.read_text())
    raw["workloads"], raw["regressions"], raw["clustering"] = [], [], []
    raw["dataset"]["batch_size"] = 700
    config.write_text(yaml.safe_dump(raw))
    tables = []
    for engine in ("memory", "stream"):
        run_id = publish(
            str(config), str(tmp_path / "l.sqlite"), str(tmp_path / "out"), engine=engine
        ).run_id
        run_dir = tmp_path / "out" / "census_demo" / run_id
        tables.append(pd.read_parquet(run_dir / "k_anonymous_table" / "table.parquet"))
        metrics = json.loads((run_dir / "k_anonymous_table" / "metrics.json").read_text())
        assert metrics["records"] == len(census_frame) - 1
    pd.testing.assert_frame_equal(tables[0], tables[1])
