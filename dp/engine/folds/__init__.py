"""The engine's per-kind folds: each an :class:`~dp.engine.Aggregate` (or a pass built on
one) computing one kind's exact aggregates batch by batch, apart from the engine's machinery
(backends, batches, sources, unit bounding) in :mod:`dp.engine`."""
