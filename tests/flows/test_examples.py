"""The shipped examples publish in sequence on one ledger, in two orders, and the audit shows
one dataset (tests/dp/pipeline/test_examples.py checks their declarations and budget)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.values import obj

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
EXAMPLES = ("demo.yaml", "tables.yaml", "synthetic.yaml")


@pytest.mark.slow
def test_the_examples_publish_in_sequence_on_one_ledger(tmp_path: Path, census_small: Path) -> None:
    """The shipped files as they are, on a small sample where the census lives, in the README's
    order (every order's budget is checked without publishing in tests/dp/pipeline; publishing
    synthetic data twice here cost minutes of the suite)."""
    order = EXAMPLES
    import dppub
    from dppub.commands import audit_lines, audit_payload

    shutil.copytree(CONFIGS, tmp_path / "configs", ignore=shutil.ignore_patterns("*.sqlite"))
    (tmp_path / "data" / "sample").mkdir(parents=True)
    shutil.copy(census_small, tmp_path / "data" / "sample" / "census.parquet")
    ledger, out = tmp_path / "state" / "ledger.sqlite", tmp_path / "state" / "published"
    done = [dppub.publish(tmp_path / "configs" / n, ledger=ledger, out=out) for n in order]
    assert {d.path.parent for d in done} == {out / "census_demo"}
    payload = audit_payload(str(ledger), None)
    datasets = obj(payload["datasets"])
    assert list(datasets) == ["census_demo"]  # one dataset, one budget
    assert obj(datasets["census_demo"])["lifetime_spent_epsilon"] == pytest.approx(6.0)
    assert sum(1 for line in audit_lines(payload) if line.startswith("census_demo ")) == 1
