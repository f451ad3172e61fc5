"""Documented limits on what a config may ask for, checked from the config alone.

A publishing tool that runs unattended must refuse, within seconds and in one line, a config
that would otherwise hang (a 20 MB YAML list, a billion histogram bins, a billion iterations,
a hierarchy file that is ``/dev/zero``), exhaust memory, or make the ledger's sums meaningless
(``epsilon: 1e308``). Every limit is far above what a real release needs; each refusal names
the limit.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
from pathlib import Path
from typing import Any

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.validation import check_delta, check_epsilon

__all__ = [
    "MAX_BOUND",
    "MAX_CLUSTERS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CRON_LENGTH",
    "MAX_DELTA",
    "MAX_DOMAIN_CELLS",
    "MAX_EPSILON",
    "MAX_HIERARCHY_BYTES",
    "MAX_HIERARCHY_ROWS",
    "MAX_INTERVAL_SECONDS",
    "MAX_ITERATIONS",
    "MAX_NAME_LENGTH",
    "MAX_QUERIES",
    "MAX_RHO",
    "MAX_SYNTHETIC_VALUES",
    "MAX_TABLE_ANSWERS",
    "check_at_most",
    "check_bound",
    "check_config_delta",
    "check_config_epsilon",
    "check_cron",
    "check_planned_total",
    "check_regular_file",
    "check_rho",
]

MAX_EPSILON = 1_000.0
"""Every epsilon of a config (a release's, the budget's, a cap's, a plan's total) is at most
1,000. Beyond a few dozen epsilon promises nothing; the limit keeps the largest cost within
10^9 of the smallest accepted (:data:`dp.validation.MIN_EPSILON`), so the ledger's float64
sums of any number of runs stay finite and its relative tolerance (10^-9) is never worth more
than one smallest charge."""
MAX_DELTA = 0.01
"""Every delta of a config is in ``[0, 0.01]``: delta is the chance the guarantee fails
outright, meaningful only when far below 1 / rows."""
MAX_RHO = 100.0
"""A zCDP ``rho`` is in ``(0, 100]``: its (epsilon, delta) conversion then stays below
:data:`MAX_EPSILON` for any delta a float can hold (at most 646)."""
MAX_BOUND = 2.0**63
"""A column's declared bounds lie within ``[-2^63, 2^63]`` (int64's range): a regression's or
k-means' sensitivity and sums of squares over any number of rows then stay finite."""
MAX_NAME_LENGTH = 64
"""Dataset and release names (folder and file names) have at most 64 characters."""
MAX_CRON_LENGTH = 200
"""A schedule's cron expression has at most 200 characters."""
MAX_INTERVAL_SECONDS = 366 * 86_400
"""A schedule's ``interval_seconds`` is in ``[1, 31,622,400]`` (one leap year)."""

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
MAX_TABLE_ANSWERS = 1 << 20
"""A table publishes at most 1,048,576 answers (groups times the measures' values, counted
before margins are added): a count over 10^6 groups takes about 1 GB and a few minutes."""
MAX_SYNTHETIC_VALUES = 1 << 26
"""A synthetic table's rows times columns (its ``rows``, else its ``max_rows``) is at most
67,108,864: its codes, the published frame and the bootstrap's samples are held in memory."""
MAX_HIERARCHY_BYTES = 64 << 20
"""A hierarchy file of more than 64 MiB is refused before it is read."""
MAX_HIERARCHY_ROWS = 1_000_000
"""A hierarchy file may have at most 1,000,000 rows (leaves)."""


def check_config_epsilon(epsilon: float, *, name: str = "epsilon") -> float:
    """``epsilon`` if it is in ``[MIN_EPSILON, MAX_EPSILON]``, else a one-line error."""
    eps = check_epsilon(epsilon, name=name)
    if eps > MAX_EPSILON:
        raise ConfigError(
            f"{name} must be at most {MAX_EPSILON:,g} (a larger one protects nothing and "
            f"breaks the ledger's sums), got {eps!r}"
        )
    return eps


def check_config_delta(delta: float, *, name: str = "delta") -> float:
    """``delta`` if it is in ``[0, MAX_DELTA]``, else a one-line error."""
    d = check_delta(delta, name=name)
    if d > MAX_DELTA:
        raise ConfigError(
            f"{name} must be in [0, {MAX_DELTA:g}] (the chance the guarantee fails outright), "
            f"got {d!r}"
        )
    return d


def check_rho(rho: float) -> float:
    """``rho`` if it is in ``(0, MAX_RHO]``, else a one-line error."""
    if not 0.0 < rho <= MAX_RHO:
        raise ConfigError(f"rho must be in (0, {MAX_RHO:g}], got {rho!r}")
    return rho


def check_bound(value: float) -> float:
    """A declared bound if its magnitude is at most ``MAX_BOUND``, else a one-line error."""
    if not abs(value) <= MAX_BOUND:
        raise ConfigError(f"a bound must lie within [-2^63, 2^63], got {value!r}")
    return value


def check_planned_total(total: PrivacyCost) -> PrivacyCost:
    """A plan's composed cost (what the ledger reserves) within the same limits as one
    release's: many releases of the largest epsilon add up beyond what any budget holds."""
    if total.epsilon > MAX_EPSILON:  # 0 is fine: a plan of non-DP releases costs nothing
        check_config_epsilon(total.epsilon, name="the releases' total epsilon")
    check_config_delta(total.delta, name="the releases' total delta")
    return total


@functools.cache
def _prefect_croniter() -> Any:
    """The cron parser ``dppub serve`` hands a schedule to: Prefect's vendored croniter, loaded
    from its file (``dp/`` never imports Prefect, which would load all of it)."""
    spec = importlib.util.find_spec("prefect")  # a top-level package: found, not imported
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = Path(root) / "_vendor" / "croniter" / "croniter.py"
        module_spec = importlib.util.spec_from_file_location("_dppub_croniter", path)
        if path.is_file() and module_spec is not None and module_spec.loader is not None:
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            return module.croniter
    raise ConfigError("schedule.cron cannot be checked: Prefect's cron parser is not installed")


def check_cron(cron: str) -> str:
    """``cron`` if Prefect's cron schedule accepts it (its croniter parses it and it has no
    random or hashed field) and some date matches it, else a one-line error."""
    if not _prefect_croniter().is_valid(cron) or any(
        f.casefold() in ("r", "h") for f in cron.split()
    ):
        raise ConfigError(
            f"invalid cron {cron!r}: five fields, minute hour day month weekday "
            "(e.g. '0 3 * * 1': Mondays at 03:00)"
        )
    try:  # a valid cron that names no real date ('0 0 30 2 *') would be served and never run
        _prefect_croniter()(cron, datetime.datetime(2001, 1, 1)).get_next(datetime.datetime)
    except Exception:  # croniter's CroniterBadDateError (its class lives in the loaded file)
        raise ConfigError(f"cron {cron!r} never fires: no date matches it") from None
    return cron


def check_at_most(what: str, value: int, limit: int) -> int:
    """``value`` if it is at most ``limit``, else a one-line :class:`ConfigError`."""
    if value > limit:
        raise ConfigError(f"{what} is {value:,}, more than the limit of {limit:,}")
    return value


def check_regular_file(path: Path, what: str, limit: int) -> Path:
    """``path`` if it is a regular file of at most ``limit`` bytes (not a device, a pipe or a
    folder, which could be read for ever)."""
    try:
        if not path.exists():
            raise ConfigError(f"{what} {path} does not exist")
        if not path.is_file():
            raise ConfigError(f"{what} {path} is not a regular file")
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if size > limit:
        raise ConfigError(f"{what} {path} has {size:,} bytes, more than the limit of {limit:,}")
    return path
