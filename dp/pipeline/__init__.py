"""From a config to published releases, engine- and orchestrator-independent.

* :mod:`~dp.pipeline.config` -- the YAML schema (pydantic): dataset, columns and their value
  policies, hierarchies, budget, schedule; each kind adds its own section.
* :mod:`~dp.pipeline.kinds` -- what a release kind is (plan, aggregates, execute, report) and
  the typed :class:`~dp.pipeline.kinds.ReleasePlan` / :class:`~dp.pipeline.kinds.ReleaseSummary`.
* one module per kind: :mod:`~dp.pipeline.anonymity`, :mod:`~dp.pipeline.workloads`,
  :mod:`~dp.pipeline.regressions`, :mod:`~dp.pipeline.clustering`; registered in
  :mod:`~dp.pipeline.registry`.
* :mod:`~dp.pipeline.plan` -- config -> :class:`~dp.pipeline.plan.Plan`, resolved once.
* :mod:`~dp.pipeline.execute` -- the shared scan and each release's computation.
* :mod:`~dp.pipeline.report` -- manifest, ``report.md`` and the budget table.

Prefect never appears here: ``tasks/`` wraps these functions, ``flows/`` orders them.
"""
