"""DP synthetic microdata: AIM (select-measure-generate) with Private-PGM (`mbi`, optional).

``run_aim`` is the core; ``accounting`` converts zCDP to and from (epsilon, delta); ``pgm``
hides mbi (imported on first use). Nothing here reads data or knows about ledgers.
"""

from dppub.dp.synthetic.accounting import cdp_delta, cdp_epsilon, cdp_rho
from dppub.dp.synthetic.aim import (
    AimResult,
    Measurement,
    candidates,
    marginal_answers,
    project_answer,
    quality,
    run_aim,
    workload_cliques,
)

__all__ = [
    "AimResult",
    "Measurement",
    "candidates",
    "cdp_delta",
    "cdp_epsilon",
    "cdp_rho",
    "marginal_answers",
    "project_answer",
    "quality",
    "run_aim",
    "workload_cliques",
]
