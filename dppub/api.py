"""dppub's Python API: plan a config's releases, publish them, or run the Prefect flow inside
your own.

::

    import dppub

    planned = dppub.plan("configs/demo.yaml")
    if planned.fits:
        done = dppub.publish("configs/demo.yaml", out="published")
        print(done.run_id, done.path, done.manifest["total_epsilon"])

A config is the path of its YAML file, as for the CLI: relative paths in it resolve against its
folder, its ``ledger:`` (default: ``ledger.sqlite`` beside it) is where every run of its data
spends, and a served or deployed run re-reads the same file.

:func:`publish` and :func:`plan` are ``dppub run`` and ``dppub plan`` without the printing and
the exit codes: they raise dppub's errors instead (:class:`BudgetExceededError` when the budget
refuses a run, :class:`ConfigError`, :class:`InputError`, :class:`LedgerError`, all
:class:`DPPubError`). Importing this package imports neither Prefect nor the pipeline; the first
call does. It sets dppub's Prefect settings, unless set already and unless Prefect was imported
first (Prefect reads them once): no telemetry (``DO_NOT_TRACK=1``,
``PREFECT_SERVER_ANALYTICS_ENABLED=false``), so no Prefect server it starts tries to send any.

``publish_flow`` is the Prefect flow itself (``dppub-publish``), to call inside your own flow
as a subflow: ``dppub.publish_flow(config_path, ledger_path, out_dir)`` opens, runs and settles
one run in the config's ledger (another ledger is refused) and returns its
:class:`Publication`. Prefect keeps no result of it.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dppub.dp.errors import (
    BudgetExceededError,
    ConfigError,
    DPPubError,
    InputError,
    LedgerError,
)
from dppub.flows.server import prefect_env

if "prefect" not in sys.modules:  # Prefect reads its settings once, when first imported
    prefect_env()

if TYPE_CHECKING:
    from dppub.dp.pipeline.publish import Publication
    from dppub.flows.commands import Failure

__all__ = [
    "BudgetExceededError",
    "ConfigError",
    "DPPubError",
    "InputError",
    "LedgerError",
    "PlanReport",
    "Publication",
    "plan",
    "publish",
    "publish_flow",
]

PathArg = str | os.PathLike[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanReport:
    """A config's plan and whether its ledger would accept the run now (what ``dppub plan``
    shows; reads no data)."""

    fits: bool
    """The ledger would accept the run: it fits the budget and the config agrees with what the
    ledger recorded for its data."""
    refusal: str | None
    """Why not (the line ``dppub run`` would refuse with), or None."""
    total_epsilon: float
    """What the run would spend."""
    remaining_epsilon: float
    """What the budget in force leaves before the run."""
    details: dict[str, Any]
    """Everything ``dppub plan --json`` prints: releases, costs, expected errors, budget."""


def plan(config: PathArg, *, ledger: PathArg | None = None) -> PlanReport:
    """Plan ``config`` and ask its ledger, read-only, whether it would accept the run.

    Args:
        config: The config file.
        ledger: A SQLite file or ``postgresql://`` URL; default: the config's ``ledger:``, else
            ``ledger.sqlite`` beside the config. May not differ from the config's ``ledger:``.

    Raises:
        ConfigError: the config is invalid, or ``ledger`` is not the config's.
        LedgerError: the ledger cannot be read.
    """
    from dppub.dp.pipeline.environment import environment
    from dppub.dp.pipeline.kinds.base import as_float
    from dppub.flows.commands import plan_payload

    environment()
    details = plan_payload(Path(config), _location(ledger))
    refusal = details.get("refusal")
    return PlanReport(
        fits=bool(details["fits"]),
        refusal=None if refusal is None else str(refusal),
        total_epsilon=as_float(details["total_epsilon"]),
        remaining_epsilon=as_float(details["remaining_epsilon"]),
        details=details,
    )


def publish(
    config: PathArg,
    *,
    ledger: PathArg | None = None,
    out: PathArg | None = None,
    engine: str | None = None,
) -> Publication:
    """Run ``config``'s publication once, exactly as ``dppub run`` does (the same functions,
    in this process): reserve its cost, run the publication, publish, commit.

    With a Prefect API configured (``PREFECT_API_URL``, or the Prefect profile, as Prefect
    resolves it) the run is the Prefect flow, recorded there; without one it runs the same
    steps without Prefect (no server is started).

    Args:
        config: The config file.
        ledger: As for :func:`plan`.
        out: The publication folder (default: ``published`` in dppub's state folder, as for
            the CLI).
        engine: Override the config's engine: ``auto``, ``memory``, ``stream`` or ``dask``.

    Returns:
        The published run: its id, folder and manifest.

    Raises:
        BudgetExceededError: the budget refuses the run; nothing was reserved or written.
        DPPubError: any other error dppub raises on purpose (:class:`ConfigError`,
            :class:`InputError`, :class:`LedgerError`, ...). Once the run was reserved, the
            message ends like ``dppub run``'s line, with how the run was settled (``run R was
            aborted, nothing was spent``, or ``charged`` once noise was drawn).
        KeyboardInterrupt: Ctrl-C, re-raised once the run is settled.
    """
    from dppub.dp.pipeline.environment import environment
    from dppub.flows.server import STATE

    timeout = environment().ledger_timeout
    from dppub.flows.commands import execute_opened, open_run
    from dppub.flows.interrupts import Signals

    path, target = Path(config), Path(out) if out is not None else STATE / "published"
    signals = Signals()  # no handlers here: Ctrl-C stays Python's KeyboardInterrupt
    opened = open_run(path, _location(ledger), target, engine, timeout, signals)
    failure = execute_opened(opened, path, target, engine, signals=signals)
    if failure is not None:
        raise _raised(failure)
    from dppub.dp.pipeline.publish import Publication

    final = opened.run.staging.final
    manifest = json.loads((final / "manifest.json").read_text(encoding="utf-8"))
    return Publication(
        run_id=opened.run.run_id, path=final, manifest=manifest, cost=opened.plan.total
    )


def _location(ledger: PathArg | None) -> str | None:
    return None if ledger is None else os.fspath(ledger)


def _raised(failure: Failure) -> BaseException:
    """The exception a failed run raises: dppub's own error carries ``dppub run``'s line
    (cause and settlement); any other keeps its message and gets the line as a note."""
    error = failure.error
    if error is None:  # a signal noted while nothing failed
        return KeyboardInterrupt(failure.line)
    if isinstance(error, DPPubError):
        error.args = (failure.line,)
    else:
        error.add_note(f"dppub: {failure.line}")
    return error


def __getattr__(name: str) -> Any:
    """``publish_flow`` and ``Publication``, imported on first use (Prefect, the pipeline)."""
    if name == "publish_flow":
        from dppub.flows.publish import publish as flow

        return flow
    if name == "Publication":
        from dppub.dp.pipeline.publish import Publication

        return Publication
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
