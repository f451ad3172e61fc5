"""Documented limits on what a config may ask for, checked from the config alone.

A publishing tool that runs unattended must refuse, within seconds and in one line, a config
that would otherwise hang (a 20 MB YAML list, a billion histogram bins, a billion iterations,
a hierarchy file that is ``/dev/zero``) or exhaust memory. Every limit is far above what a real
release needs; each refusal names the limit.
"""

from __future__ import annotations

from pathlib import Path

from dp.errors import ConfigError

__all__ = [
    "MAX_CLUSTERS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_DOMAIN_CELLS",
    "MAX_HIERARCHY_BYTES",
    "MAX_HIERARCHY_ROWS",
    "MAX_ITERATIONS",
    "MAX_QUERIES",
    "check_at_most",
    "check_regular_file",
]

MAX_CONFIG_BYTES = 1 << 20
"""A config file of more than 1 MiB is refused before it is parsed."""
MAX_CONFIG_DEPTH = 20
"""Mappings and lists nested more than 20 deep are refused."""
MAX_DOMAIN_CELLS = 1 << 22
"""A workload's histogram may have at most 4,194,304 cells (the product of its axes)."""
MAX_QUERIES = 1 << 22
"""A workload may ask at most 4,194,304 queries."""
MAX_ITERATIONS = 1_000
"""DP k-means runs at most 1,000 Lloyd iterations (each costs a pass over the data)."""
MAX_CLUSTERS = 10_000
"""DP k-means fits at most 10,000 centres."""
MAX_HIERARCHY_BYTES = 64 << 20
"""A hierarchy file of more than 64 MiB is refused before it is read."""
MAX_HIERARCHY_ROWS = 1_000_000
"""A hierarchy file may have at most 1,000,000 rows (leaves)."""


def check_at_most(what: str, value: int, limit: int) -> int:
    """``value`` if it is at most ``limit``, else a one-line :class:`ConfigError`."""
    if value > limit:
        raise ConfigError(f"{what} is {value:,}, more than the limit of {limit:,}")
    return value


def check_regular_file(path: Path, what: str, limit: int) -> Path:
    """``path`` if it is a regular file of at most ``limit`` bytes (not a device, a pipe or a
    folder, which could be read for ever)."""
    try:
        if not path.is_file():
            raise ConfigError(f"{what} {path} is not a regular file")
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if size > limit:
        raise ConfigError(f"{what} {path} has {size:,} bytes, more than the limit of {limit:,}")
    return path
