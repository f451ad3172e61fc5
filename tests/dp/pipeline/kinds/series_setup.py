"""A small monthly series on a generated admissions table, written into a test's folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import yaml

from dppub.dp.pipeline.kinds.series.planning import SeriesSpec
from dppub.dp.pipeline.kinds.series.publishing import full_figures, rounded_figures
from dppub.dp.pipeline.plan import load_plan

ROOT = Path(__file__).resolve().parents[4]


def _generator() -> ModuleType:
    name = "dppub_generate_admissions"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "data" / "generate_admissions.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def admissions(directory: Path, *, patients: int = 400, seed: int = 7) -> Path:
    """The generated table (``data/generate_admissions.py``), ``patients`` patients."""
    path = directory / "admissions.parquet"
    _generator().make_admissions(seed, patients=patients).to_parquet(path, index=False)
    return path


def example_series() -> dict[str, Any]:
    """``configs/monthly_series.yaml`` as values."""
    raw: dict[str, Any] = yaml.safe_load((ROOT / "configs" / "monthly_series.yaml").read_text())
    return raw


def series_config(directory: Path, data: Path, *, name: str = "series.yaml", **series: Any) -> Path:
    """The example config on ``data`` over 12 months, its series item updated by ``series``
    (a key set to None is removed)."""
    raw = example_series()
    raw["dataset"]["path"] = str(data)
    raw.pop("schedule")
    item = {**raw["series"][0], "horizon": 12, **series}
    raw["series"] = [{k: v for k, v in item.items() if v is not None}]
    path = directory / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def spec_of(config: Path, period: str) -> SeriesSpec:
    """The plan of the config's series run for ``period`` (its mechanism, measures, groups)."""
    (release,) = load_plan(config, period=period).releases
    spec = release.spec
    assert isinstance(spec, SeriesSpec)
    return spec


def read_text(path: Path) -> pd.DataFrame:
    """A published CSV file with every cell as the text it holds."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def published_and_full(spec: SeriesSpec, folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``history.csv`` of the run published in ``folder`` as text, and the same figures at full
    precision recomputed from its ``state.json``, both in one order (by published period,
    period, figure, measure, group): the text must be the full figures rounded."""
    keys = ["published", "period", "figure", "measure", "group"]
    text = read_text(folder / "history.csv").sort_values(keys, kind="stable")
    full = full_figures(spec, folder).sort_values(keys, kind="stable")
    return text.reset_index(drop=True), full.reset_index(drop=True)


def as_published(full: pd.DataFrame) -> pd.DataFrame:
    """Full-precision figures of the example series as its CSV files write them."""
    return rounded_figures(full, ("count",))
