"""dppub's Python API: plan a config's releases, publish them, or run the Prefect flow inside
your own.

::

    import dppub

    planned = dppub.plan("configs/demo.yaml")
    print(planned.text)
    if planned.fits:
        done = dppub.publish("configs/demo.yaml", out="published")
        print(done.run_id, done.path, done.manifest["total_epsilon"])
        for name, release in done.releases.items():
            print(name, release.kind, release.result["mechanism"], list(release.answers))

:func:`plan` and :func:`publish` (:mod:`dppub.api`) are ``dppub plan`` and ``dppub run``
without the printing and the exit codes: they raise dppub's errors instead. A config is its
file's path, or a config object (``dppub.Config(...)``, the typed model of a config file).
Importing this package imports neither Prefect nor the pipeline; the first call does. It sets
dppub's Prefect settings, unless set already and unless Prefect was imported first (Prefect
reads them once): no telemetry (``DO_NOT_TRACK=1``, ``PREFECT_SERVER_ANALYTICS_ENABLED=false``),
so no Prefect server it starts tries to send any.

``publish_flow`` is the Prefect flow itself (``dppub-publish``), to call inside your own flow
as a subflow: ``dppub.publish_flow(config_path, ledger_path, out_dir)`` opens, runs and settles
one run in the config's ledger (another ledger is refused) and returns its
:class:`Publication`. Prefect keeps no result of it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from dppub.api import PlannedRelease, PlanReport, plan, publish
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

if TYPE_CHECKING:  # imported on first use (the pipeline, Prefect): see __getattr__
    from dppub.dp.pipeline.config import PipelineConfig
    from dppub.dp.pipeline.published import Publication, ReleaseResult
    from dppub.flows.publish import publish as publish_flow

    Config: type[PipelineConfig]

__all__ = [
    "BudgetExceededError",
    "Config",
    "ConfigError",
    "DPPubError",
    "InputError",
    "LedgerError",
    "PlanReport",
    "PlannedRelease",
    "Publication",
    "ReleaseResult",
    "plan",
    "publish",
    "publish_flow",
]


def __getattr__(name: str) -> object:
    """The names that import the pipeline or Prefect, imported on first use: ``Config`` (the
    config model with every registered release section), ``Publication``, ``ReleaseResult``
    and ``publish_flow``."""
    if name == "Config":
        from dppub.dp.pipeline.registry import config_model

        return config_model()
    if name in ("Publication", "ReleaseResult"):
        from dppub.dp.pipeline import published

        return getattr(published, name)
    if name == "publish_flow":
        from dppub.flows.publish import publish as flow

        return flow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
