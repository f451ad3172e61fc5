"""Every environment variable dppub reads for its own settings, parsed and checked in one place.

``dppub`` checks them before any command touches a ledger (one line, exit 2), and
:func:`dp.pipeline.plan.build_plan` checks them again with the config, so a scheduled run
refuses a bad value at plan time too -- never after the budget is held.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from dppub.dp.errors import ConfigError
from dppub.dp.faults import ACTIONS, POINTS

__all__ = ["DEFAULT_LEDGER_TIMEOUT", "Environment", "environment"]

DEFAULT_LEDGER_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
    ledger_timeout: float
    """``DPPUB_LEDGER_TIMEOUT``: seconds to wait for a ledger another process is writing."""
    memory_budget_mb: float | None
    """``DPPUB_MEMORY_BUDGET_MB``: what ``engine: auto`` may hold in memory (None: unset)."""


def _number(env: Mapping[str, str], name: str, *, positive: bool) -> float | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        what = "a number > 0" if positive else "a number >= 0"
        raise ConfigError(f"environment variable {name} must be {what}, got {raw!r}")
    return value


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], *, many: bool) -> None:
    raw = env.get(name)
    if raw is None:
        return
    bad = [v for v in (raw.split(",") if many else [raw]) if v not in allowed]
    if bad:
        raise ConfigError(
            f"environment variable {name} must be one of {', '.join(allowed)}, got {bad[0]!r}"
        )


def environment(env: Mapping[str, str] | None = None) -> Environment:
    """dppub's environment settings, checked (``os.environ`` unless ``env`` is given).

    Raises:
        ConfigError: one line naming the variable and echoing its value.
    """
    env = os.environ if env is None else env
    timeout = _number(env, "DPPUB_LEDGER_TIMEOUT", positive=False)
    memory = _number(env, "DPPUB_MEMORY_BUDGET_MB", positive=True)
    _number(env, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", positive=True)
    _choice(env, "DPPUB_FAULT_AT", POINTS, many=True)
    _choice(env, "DPPUB_FAULT", ACTIONS, many=False)
    return Environment(
        ledger_timeout=DEFAULT_LEDGER_TIMEOUT if timeout is None else timeout,
        memory_budget_mb=memory,
    )
