"""Under a privacy unit, a workload's noise is calibrated to m times the row sensitivity at the
unit-level cost: for Gaussian noise less than group privacy's, for Laplace the same."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dppub.dp.calibration import gaussian_sigma
from tests.dp.pipeline.published_run import demo_config, publish_in_process


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_a_unit_workload_is_measured_at_m_times_its_sensitivity(
    tmp_path: Path, census_small: Path, noise: str
) -> None:
    m, eps, delta = 4, 0.5, 1e-6
    frame = pd.read_parquet(census_small)
    frame["household"] = [f"h{i % 700}" for i in range(len(frame))]
    data = tmp_path / "households.parquet"
    frame.to_parquet(data, index=False)
    config = demo_config(tmp_path, data)
    raw = yaml.safe_load(config.read_text())
    raw["dataset"].update(privacy_unit="household", max_rows_per_unit=m)
    raw["dataset"]["columns"]["household"] = {"type": "string"}
    raw["dataset"]["budget"] = {"epsilon": 100.0, "delta": 1e-3}
    workload = {
        "name": "age_by_sex",
        "epsilon": eps,
        "attributes": [{"column": "age", "level": 2}, {"column": "sex"}],
        "workload": "marginals",
        "marginal_k": 2,
        "noise": noise,
        **({"delta": delta} if noise == "gaussian" else {}),
    }
    raw["workloads"] = [workload]
    for section in ("regressions", "clustering", "anonymize"):
        raw.pop(section, None)
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    published = publish_in_process(config, tmp_path / "ledger.sqlite", tmp_path / "out")
    (summary,) = published.summaries
    sens = summary.sensitivity
    assert sens is not None
    answers = pd.read_csv(published.folder / "age_by_sex" / "answers.csv")
    assert np.isfinite(answers["answer"]).all()
    if noise == "laplace":
        return  # m x the L1 sensitivity at epsilon: the scale of epsilon / m (tested in dp.matrix)
    rho = summary.result.zcdp_rho
    assert rho is not None
    sigma = sens / math.sqrt(2.0 * rho)
    assert sigma == pytest.approx(gaussian_sigma(l2_sensitivity=sens, epsilon=eps, delta=delta))
    # Group privacy over m rows would have needed more noise for the same guarantee (1% more
    # here; 0.2-13% over epsilon 0.1-10 and m 2-10 at delta 1e-6).
    row_delta = delta / (m * math.exp((m - 1) * eps / m))
    grouped = gaussian_sigma(l2_sensitivity=sens / m, epsilon=eps / m, delta=row_delta)
    assert sigma < grouped
