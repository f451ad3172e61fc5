"""``release.json`` has a JSON Schema, generated from its model (``docs/release.schema.json``,
committed): the committed file is the generated one, and what the demo publishes validates
against it; a summary read back from its file writes the same file."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from dppub.dp.budget import PlannedCost, PrivacyCost
from dppub.dp.pipeline.kinds import ReleaseSummary
from dppub.dp.pipeline.kinds.release_file import release_schema
from dppub.dp.publication import RELEASE_MARKER
from tests.dp.pipeline.published_run import Demo

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "release.schema.json"


def test_the_committed_schema_is_the_generated_one() -> None:
    # After a deliberate change of ReleaseFile: write json.dumps(release_schema(), indent=2,
    # sort_keys=True) to docs/release.schema.json.
    assert json.loads(SCHEMA.read_text()) == release_schema()


def _summary(**change: object) -> ReleaseSummary:
    fields: dict[str, object] = {
        "name": "by_education",
        "kind": "regression",
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
        "details": {"model": "trace", "tasks": ["HS-grad"], "zcdp_rho": None},
    }
    return ReleaseSummary(**{**fields, **change})  # type: ignore[arg-type]


def test_a_summary_round_trips_through_its_file() -> None:
    summary = _summary()
    written = summary.to_json()
    jsonschema.validate(written, json.loads(SCHEMA.read_text()))
    assert ReleaseSummary.from_json(written) == summary
    assert ReleaseSummary.from_json(written).to_json() == written


def test_a_file_that_breaks_the_schema_is_refused_on_reading() -> None:
    written = _summary().to_json()
    with pytest.raises(ValueError, match="epsilon"):
        ReleaseSummary.from_json({**written, "epsilon": "0.3 or so"})
    with pytest.raises(ValueError, match="rho"):
        ReleaseSummary.from_json({**written, "rho": 0.1})  # an unknown top-level key


def test_the_demos_release_files_validate_against_the_schema(demo: Demo) -> None:
    schema = json.loads(SCHEMA.read_text())
    markers = sorted(demo.published.folder.glob(f"*/{RELEASE_MARKER}"))
    assert len(markers) == 8
    for marker in markers:
        jsonschema.validate(json.loads(marker.read_text()), schema)


def test_the_accounting_a_release_states_is_read_typed() -> None:
    stated = _summary(details={"zcdp_rho": 0.0125, "accounting": "zCDP", "other": 1}).stated
    assert (stated.zcdp_rho, stated.accounting) == (0.0125, "zCDP")
    assert _summary(details={"rho": 0.0125}).stated.zcdp_rho is None  # only under its name
    with pytest.raises(ValueError, match="zcdp_rho"):
        _ = _summary(details={"zcdp_rho": "a lot"}).stated
