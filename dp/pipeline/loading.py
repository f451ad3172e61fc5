"""Reading a config file into plain values, refusing what YAML would otherwise let through.

Every problem is one line naming the file and, where there is one, the line: a file too large
(refused before parsing), not UTF-8, a YAML syntax error, a key given twice in one mapping
(YAML keeps the later one silently), a non-finite number anywhere (``.nan``, ``.inf``),
nesting deeper than :data:`~dp.pipeline.limits.MAX_CONFIG_DEPTH`, or a top level that is not a
mapping. A number with an exponent (``1e-6``, ``1.5e3``) is a number, as in YAML 1.2 (YAML
1.1 reads it as text unless it has both a dot and a signed exponent). A config may name the
file that declares its dataset instead of declaring it (:func:`inline_dataset`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.limits import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, check_regular_file

__all__ = ["DATASET_FILE_KEYS", "inline_dataset", "read_config"]

DATASET_FILE_KEYS = ("dataset", "ledger")
"""What a dataset file holds: the ``dataset:`` mapping and, optionally, its ``ledger:``."""


class _Refused(Exception):
    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.mark = mark


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, non-finite numbers and deep nesting."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        depth = getattr(self, "_depth", 0)
        if depth > MAX_CONFIG_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            mark = getattr(event, "start_mark", None)
            raise _Refused(f"nested more than {MAX_CONFIG_DEPTH} levels deep", mark)
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                raise _Refused("a mapping key must be a plain value", key_node.start_mark)
            if key in seen:
                first = seen[key].line + 1
                raise _Refused(
                    f"key {key!r} is given twice (lines {first} and "
                    f"{key_node.start_mark.line + 1}); YAML would silently keep the later one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise _Refused(f"the number {node.value!r} is not finite", node.start_mark)
        return value


def _mapping(loader: _StrictLoader, node: yaml.Node) -> dict[Any, Any]:
    if not isinstance(node, yaml.MappingNode):
        raise _Refused("expected a mapping", node.start_mark)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)
_StrictLoader.add_constructor("tag:yaml.org,2002:map", _mapping)
# YAML 1.1 (PyYAML) reads 1e-6 and 1.5e3 as text, not numbers; with strict number types that
# would refuse the usual way to write a delta. Read them as YAML 1.2 does: as floats.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _where(path: Path, mark: yaml.Mark | None) -> str:
    return f"{path}: line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)


def read_config(path: Path) -> dict[str, Any]:
    """The config file's contents as plain values (see the module docstring).

    Raises:
        ConfigError: one line naming the file, the line and the problem.
    """
    check_regular_file(path, "config", MAX_CONFIG_BYTES)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        raw = yaml.load(text, Loader=_StrictLoader)
    except _Refused as exc:
        raise ConfigError(f"{_where(path, exc.mark)}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}:{where}: YAML error: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping")
    return raw


def inline_dataset(raw: dict[str, Any], config: Path) -> tuple[dict[str, Any], Path | None]:
    """A config whose ``dataset:`` names a dataset file (``dataset: datasets/census.yaml``,
    relative to the config) with that file's ``dataset:`` mapping in its place, and the file.

    Every config that reads the same data names the same file, so they all spend one budget in
    one ledger: the file's ``ledger:`` (default ``ledger.sqlite`` beside it), which such a
    config may not name itself. A config with a ``dataset:`` mapping is returned as it is.

    Raises:
        ConfigError: one line naming the file and the problem.
    """
    named = raw.get("dataset")
    if not isinstance(named, str):
        return raw, None
    file = (config.resolve().parent / named).resolve()
    held = read_config(file)
    extra = [str(k) for k in held if k not in DATASET_FILE_KEYS]
    if extra:
        raise ConfigError(
            f"{file}: a dataset file holds only {' and '.join(DATASET_FILE_KEYS)}, got {extra}"
        )
    if not isinstance(held.get("dataset"), dict):
        raise ConfigError(f"{file}: dataset: must be a mapping (name, path, budget, columns...)")
    if "ledger" in raw:
        raise ConfigError(
            f"{config}: ledger: the budget of dataset {named} is kept in its ledger (the "
            "dataset file's ledger:, else ledger.sqlite beside it): drop ledger: here"
        )
    ledger = {"ledger": held["ledger"]} if "ledger" in held else {}
    return {**raw, "dataset": held["dataset"], **ledger}, file
