"""From a config to published releases, engine- and orchestrator-independent.

* :mod:`~dp.pipeline.config` -- the YAML schema (pydantic): dataset, columns and their value
  policies, hierarchies, budget, schedule; each kind adds its own section.
* :mod:`~dp.pipeline.kinds` -- the release kinds: the contract in
  :mod:`~dp.pipeline.kinds.base` (plan, scan, execute, report, plot, guarantee; the typed
  :class:`~dp.pipeline.kinds.base.ReleasePlan` / :class:`~dp.pipeline.kinds.base.ReleaseSummary`)
  and one module per kind (``k_anonymity``, ``workload``, ``regression``, ``clustering``),
  registered in :mod:`~dp.pipeline.registry`.
* :mod:`~dp.pipeline.plan` -- config -> :class:`~dp.pipeline.plan.Plan`, resolved once.
* :mod:`~dp.pipeline.execute` -- the shared scan and each release's computation.
* :mod:`~dp.pipeline.report` -- manifest, ``report.md`` and the budget table.

Prefect never appears here: ``tasks/`` wraps these functions, ``flows/`` orders them.
"""
