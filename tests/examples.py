"""The shipped example configs (``configs/``) as plain values that a test may change and write
elsewhere: the dataset a config names (``dataset: datasets/census.yaml``) written in, with its
path made absolute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dppub.dp.pipeline.loading import inline_dataset, read_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def example(name: str) -> dict[str, Any]:
    """``configs/<name>`` with its dataset declared in it."""
    path = CONFIGS / name
    raw, file = inline_dataset(read_config(path), path)
    if file is not None:
        raw["dataset"]["path"] = str((file.parent / raw["dataset"]["path"]).resolve())
    return raw
