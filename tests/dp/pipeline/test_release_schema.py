"""``release.json`` has a JSON Schema, generated from its model (``docs/release.schema.json``,
committed): the committed file is the generated one, and what the demo publishes validates
against it; a summary read back from its file writes the same file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import pytest

from dppub.dp.budget import PlannedCost, PrivacyCost
from dppub.dp.errors import InvariantError
from dppub.dp.pipeline.kinds import JSON, ReleaseSummary
from dppub.dp.pipeline.kinds.regression import RegressionKind
from dppub.dp.pipeline.kinds.regression.result import RegressionResult
from dppub.dp.pipeline.kinds.workload import WorkloadKind
from dppub.dp.pipeline.registry import read_summary, release_schema
from dppub.dp.publication import RELEASE_MARKER
from tests.dp.pipeline.published_run import Demo

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "release.schema.json"


def test_the_committed_schema_is_the_generated_one() -> None:
    # After a deliberate change of ReleaseFile or a kind's result: write
    # json.dumps(release_schema(), indent=2, sort_keys=True) to docs/release.schema.json.
    assert json.loads(SCHEMA.read_text()) == release_schema()


RESULT = RegressionResult(
    model="trace",
    target="income",
    features=("age", "hours"),
    tasks=1,
    interval_method="parametric bootstrap",
    interval_level=0.95,
    bootstrap_replicates=200,
    bootstrap_replicates_dropped=0,
    interval_covers=None,
    interval_columns=("std_error", "ci_low", "ci_high"),
)


def _summary(**change: object) -> ReleaseSummary:
    fields: dict[str, object] = {
        "name": "by_education",
        "release_kind": RegressionKind(),
        "mechanism": "functional-laplace",
        "cost": PrivacyCost(epsilon=0.3),
        "is_dp": True,
        "sensitivity": 2.5,
        "parts": (
            PlannedCost(
                name="by_education[HS-grad]",
                cost=PrivacyCost(epsilon=0.3),
                partition=("education", "HS-grad"),
            ),
        ),
        "files": ("by_education/model.json",),
        "output_hash": "ab" * 32,
        "result": RESULT,
    }
    return ReleaseSummary(**{**fields, **change})  # type: ignore[arg-type]


def test_a_summary_round_trips_through_its_file() -> None:
    summary = _summary()
    written = summary.to_json()
    jsonschema.validate(written, json.loads(SCHEMA.read_text()))
    assert ReleaseSummary.from_json(written, RegressionKind()) == summary
    assert read_summary(written) == summary
    assert read_summary(written).to_json() == written
    assert written_details(written)["zcdp_rho"] is None
    assert "outcome" not in written_details(written)  # None: left out


def written_details(written: Mapping[str, JSON]) -> Mapping[str, JSON]:
    """The ``details`` object of a written ``release.json``."""
    details = written["details"]
    assert isinstance(details, Mapping)
    return details


def test_a_result_is_read_by_its_kinds_model() -> None:
    written = _summary().to_json()
    with pytest.raises(ValueError, match="strategy"):  # a regression is not a workload
        ReleaseSummary.from_json({**written, "kind": "workload"}, WorkloadKind())
    with pytest.raises(InvariantError, match="has a RegressionResult, not a WorkloadResult"):
        _summary().result_as(WorkloadKind.result)
    details: dict[str, JSON] = dict(written_details(written))
    with pytest.raises(ValueError, match="unknown"):
        read_summary({**written, "details": {**details, "unknown": 1}})


def test_the_schema_checks_details_against_the_kind_it_names() -> None:
    schema = json.loads(SCHEMA.read_text())
    written = _summary().to_json()
    jsonschema.validate(written, schema)
    with pytest.raises(jsonschema.ValidationError):  # a regression's details under "workload"
        jsonschema.validate({**written, "kind": "workload"}, schema)
    with pytest.raises(jsonschema.ValidationError):  # a kind no model describes
        jsonschema.validate({**written, "kind": "count"}, schema)


def test_a_file_that_breaks_the_schema_is_refused_on_reading() -> None:
    written = _summary().to_json()
    with pytest.raises(ValueError, match="epsilon"):
        read_summary({**written, "epsilon": "0.3 or so"})
    with pytest.raises(ValueError, match="rho"):
        read_summary({**written, "rho": 0.1})  # an unknown top-level key


def test_the_demos_release_files_validate_against_the_schema(demo: Demo) -> None:
    schema = json.loads(SCHEMA.read_text())
    markers = sorted(demo.published.folder.glob(f"*/{RELEASE_MARKER}"))
    assert len(markers) == 8
    for marker in markers:
        jsonschema.validate(json.loads(marker.read_text()), schema)


def test_the_accounting_a_release_states_is_read_typed() -> None:
    stated = RESULT.model_copy(update={"zcdp_rho": 0.0125, "accounting": "zCDP"})
    summary = read_summary(_summary(result=stated).to_json())
    assert (summary.result.zcdp_rho, summary.result.accounting) == (0.0125, "zCDP")
    details: dict[str, JSON] = dict(written_details(_summary().to_json()))
    with pytest.raises(ValueError, match="zcdp_rho"):
        read_summary({**_summary().to_json(), "details": {**details, "zcdp_rho": "a lot"}})
