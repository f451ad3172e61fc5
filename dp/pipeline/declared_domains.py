"""Hierarchies and histogram axes built from the declarations alone (no private data).

The one exception: a prefix-mask hierarchy of a text column without declared categories takes
its leaves from the data; only the k-anonymity release (not DP) may use it, and only through
:func:`hierarchy_from_values`. Hierarchies for DP axes must declare their leaves.
"""

from __future__ import annotations

from collections.abc import Sequence

from dppub.dp.anonymity import Hierarchy
from dppub.dp.axes import Axis, category_axis, hierarchy_axis, numeric_axis
from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import PipelineConfig
from dppub.dp.pipeline.limits import (
    MAX_DOMAIN_CELLS,
    MAX_HIERARCHY_BYTES,
    MAX_HIERARCHY_ROWS,
    check_at_most,
    check_regular_file,
)

__all__ = [
    "checked_leaves",
    "declared_columns",
    "declared_hierarchy",
    "hierarchy_from_values",
    "histogram_axis",
    "leaves_from_data",
]


def declared_columns(cfg: PipelineConfig, columns: Sequence[str | None]) -> tuple[str, ...]:
    """``columns`` (Nones left out, each once), all of them declared.

    Raises:
        ConfigError: naming the undeclared ones.
    """
    wanted = tuple(dict.fromkeys(c for c in columns if c is not None))
    undeclared = sorted(c for c in wanted if c not in cfg.dataset.columns)
    if undeclared:
        raise ConfigError(f"columns used but not declared in dataset.columns: {undeclared}")
    return wanted


def leaves_from_data(cfg: PipelineConfig, column: str) -> bool:
    """True if ``column``'s hierarchy takes its leaves from the data (a prefix mask over
    undeclared codes)."""
    model = cfg.hierarchies[column]
    declared = model.file is not None or model.levels is not None or model.bands is not None
    return not declared and cfg.dataset.columns[column].categories is None


def declared_hierarchy(cfg: PipelineConfig, column: str) -> Hierarchy:
    """The hierarchy of ``column`` from its declaration (file, levels, bands, or a prefix mask
    over declared categories).

    Raises:
        ConfigError: the column has no hierarchy, or one that needs the data's leaves.
    """
    model = cfg.hierarchies.get(column)
    if model is None:
        raise ConfigError(f"column {column!r} has no hierarchy")
    spec = cfg.dataset.columns[column]
    if model.file is not None:
        path = check_regular_file(cfg.resolve(model.file), "hierarchy file", MAX_HIERARCHY_BYTES)
        hierarchy = Hierarchy.from_csv(path, sep=model.sep, name=column)
        check_at_most(f"hierarchy file {path}: rows", len(hierarchy.levels[0]), MAX_HIERARCHY_ROWS)
        return hierarchy
    if model.levels is not None:
        return Hierarchy.from_levels(model.levels, name=column)
    if model.bands is not None:
        if spec.type != "int" or spec.bounds is None:
            raise ConfigError(f"hierarchy of {column!r}: bands need an int column with bounds")
        lo, hi = spec.bounds
        return Hierarchy.from_bands(int(lo), int(hi), model.bands, name=column)
    if spec.categories is None:
        raise ConfigError(
            f"hierarchy of {column!r}: a DP stage needs declared leaves; declare the column's "
            "categories"
        )
    return Hierarchy.from_prefix_mask(list(spec.categories), name=column)


def hierarchy_from_values(cfg: PipelineConfig, column: str, values: Sequence[str]) -> Hierarchy:
    """A prefix-mask hierarchy whose leaves are the data's distinct codes (k-anonymity only).

    Codes of another length were dropped on read; with no rows at all, one placeholder code
    keeps the hierarchy's shape (its height is the declared length).
    """
    length = cfg.hierarchies[column].prefix_mask or 0
    return Hierarchy.from_prefix_mask(sorted(values) or ["*" * length], name=column)


def checked_leaves(cfg: PipelineConfig) -> dict[str, list[str]]:
    """Build every hierarchy that declares its leaves, check it against the column's declared
    categories (each must be a leaf: a structural problem, found before any value is read),
    and return the leaves of text columns, which become their domain."""
    out: dict[str, list[str]] = {}
    for column, model in cfg.hierarchies.items():
        spec = cfg.dataset.columns[column]
        if model.file is None and model.levels is None:
            if model.prefix_mask is not None and spec.categories is not None:
                declared_hierarchy(cfg, column)  # declared codes must have the declared length
            continue
        leaves = declared_hierarchy(cfg, column).levels[0]
        if spec.categories is not None:
            missing = [c for c in spec.categories if c not in set(leaves)]
            if missing:
                s, are = ("ies", "are") if len(missing) > 1 else ("y", "is")
                raise ConfigError(
                    f"hierarchy of {column!r}: declared categor{s} {missing} {are} not among "
                    "its leaves"
                )
        elif spec.type == "string":
            out[column] = list(leaves)
    return out


def histogram_axis(
    cfg: PipelineConfig, release: str, column: str, *, bins: int | None, level: int | None
) -> Axis:
    """One declared histogram axis: a fixed hierarchy level, numeric bins, or categories."""
    declared_columns(cfg, [column])
    spec = cfg.table_schema[column]
    if level is not None:
        if column not in cfg.hierarchies:
            raise ConfigError(f"release {release!r}: {column!r} has a level but no hierarchy")
        return hierarchy_axis(column, declared_hierarchy(cfg, column), level=level)
    if spec.is_numeric:
        lo, hi = spec.bounds or (0.0, 0.0)
        cells = bins if bins is not None else (int(hi) - int(lo) + 1 if spec.type == "int" else 1)
        check_at_most(f"release {release!r}: the cells of {column!r}", cells, MAX_DOMAIN_CELLS)
        return numeric_axis(spec, bins=bins)
    if spec.categories is not None:
        return category_axis(spec)
    raise ConfigError(
        f"release {release!r}: column {column!r} has no declared domain (declare categories, "
        "bounds or a hierarchy level)"
    )
