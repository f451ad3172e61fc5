"""The README's series figure: configs/monthly_series.yaml run month by month on the generated
admissions table (``data/generate_admissions.py``), every run's published figures gathered.

Usage: ``python bench/series_figure.py [--months 12] [--out docs/series.svg]``

Runs in a temporary folder (its own ledger); prints one table: each month's run, what it
charged, and the series' count in the North with its 95% interval.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from dppub.api import publish
from dppub.dp.pipeline.html.figures import style
from dppub.dp.pipeline.kinds.series.plot import series_figure
from dppub.dp.pipeline.kinds.series.publishing import full_figures
from dppub.dp.pipeline.plan import load_plan

ROOT = Path(__file__).resolve().parents[1]


def _admissions(folder: Path) -> Path:
    spec = importlib.util.spec_from_file_location("gen", ROOT / "data" / "generate_admissions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen"] = module
    spec.loader.exec_module(module)
    path = folder / "admissions.parquet"
    module.make_admissions(20270101).to_parquet(path, index=False)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "series.svg")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        raw = yaml.safe_load((ROOT / "configs" / "monthly_series.yaml").read_text())
        raw["dataset"]["path"] = str(_admissions(folder))
        config = folder / "monthly_series.yaml"
        config.write_text(yaml.safe_dump(raw, sort_keys=False))
        frames = []
        print(f"{'month':<8} {'epsilon':>9} {'North':>8} {'95% interval':>20}")
        for k in range(args.months):
            month = f"{2026 + k // 12}-{k % 12 + 1:02d}"
            (release,) = load_plan(config, period=month).releases
            run = publish(config, out=folder / "out", period=month)
            # The month's figures at full precision (figures.csv holds them rounded to the
            # digits the noise supports): recomputed from the run's state.
            figures = full_figures(release.spec, run.path / "admissions_monthly")
            figures = figures[figures["published"] == month]
            frames.append(figures)
            north = figures[
                (figures["figure"] == "per_period")
                & (figures["measure"] == "count")
                & (figures["group"] == "North")
            ].iloc[0]
            interval = f"[{north['ci_low']:.1f}, {north['ci_high']:.1f}]"
            print(f"{month:<8} {run.cost.epsilon:>9.4f} {north['value']:>8.1f} {interval:>20}")
        with style():
            fig = series_figure(pd.concat(frames, ignore_index=True), "admissions_monthly")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(args.out, format=args.out.suffix.lstrip("."), metadata={"Date": None})
        shutil.rmtree(folder / "out")
    print(args.out)


if __name__ == "__main__":
    main()
