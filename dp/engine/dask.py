"""The Dask backend: one task per Parquet fragment, partials merged in order on the caller.

The same :class:`~dp.engine.aggregate.Aggregate` objects as the streaming backend run unchanged:
each fragment's partial is :func:`~dp.engine.aggregate.fragment_partial` (its batches folded in
order) computed on a worker, and :func:`~dp.engine.aggregate.merge_partials` combines them in
fragment order here. The arithmetic and its order are those of
:class:`~dp.engine.aggregate.StreamingBackend`, so the exact aggregates are bit-identical
(float sums included). Partials are domain- or model-sized, so shipping them back is cheap.

Noise is never added here or on a worker: the caller adds it once to the merged result.

Pitfalls this design avoids: one *Prefect* task per partition is overhead, not parallelism
(figures: ``bench/RESULTS.md``, History), so the partitioning is done by dask inside one
caller; and ``get_dask_client()`` inside a Prefect task hangs with ``threads_per_worker=1``
(it connects a second client, which does not secede from the worker's only thread) -- inside
a worker this backend uses the worker's own client through
``dask.compute``, which secedes while it waits; elsewhere it takes an explicit scheduler address
(or the caller's current client). ``dask`` is imported lazily, so :mod:`dp.engine` works
without it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dppub.dp.engine.aggregate import Aggregate, StreamingBackend, fragment_partial, merge_partials
from dppub.dp.engine.batches import DEFAULT_BATCH_SIZE, Batch, open_scan
from dppub.dp.errors import ConfigError
from dppub.dp.schema import TableSchema

__all__ = ["DaskBackend"]

P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class DaskBackend:
    """Run aggregates with dask, one task per fragment (see the module docstring)."""

    batch_size: int = DEFAULT_BATCH_SIZE
    """Upper bound on rows per batch inside each worker task."""
    address: str | None = None
    """Scheduler address (``tcp://host:8786``); None uses the current default client, or dask's
    local threaded scheduler when there is none."""

    def run(self, aggregate: Aggregate[P, R], source: str | Path, schema: TableSchema) -> R:
        """Check ``source`` here (metadata only), fold fragments on workers, merge here.

        Raises:
            ConfigError: dask (or distributed, with ``address``) is not installed.
            InputError: as the streaming backend (raised from the worker that met it).
        """
        try:
            import dask
            from dask.delayed import delayed
        except ImportError:
            raise ConfigError("the dask engine needs 'dask[distributed]' installed") from None
        scan = open_scan(source, schema, aggregate.columns, batch_size=self.batch_size)
        # pure=False: the tasks read files, so their results must never be cached by key.
        tasks = [
            delayed(fragment_partial, pure=False)(aggregate, scan, fragment)
            for fragment in scan.fragments
        ]
        partials = self._compute(dask, tasks)
        return merge_partials(aggregate, partials)

    def batches(
        self, source: str | Path, schema: TableSchema, columns: Sequence[str]
    ) -> Iterator[Batch]:
        """A sequential pass (writing a table) streams here, on the caller."""
        return StreamingBackend(batch_size=self.batch_size).batches(source, schema, columns)

    def _compute(self, dask: Any, tasks: list[Any]) -> list[Any]:
        if self.address is None or _on_worker():
            # On a worker (a Prefect task on the DaskTaskRunner), dask.compute uses the worker's
            # own client and secedes from its thread pool while waiting; a second Client would
            # not, and could deadlock a one-thread worker.
            return list(dask.compute(*tasks))
        try:
            from distributed import Client
        except ImportError:
            raise ConfigError("a scheduler address needs 'distributed' installed") from None
        with Client(self.address, set_as_default=False) as client:  # type: ignore[no-untyped-call]
            return list(client.gather(client.compute(tasks)))


def _on_worker() -> bool:
    """True inside a task running on a dask worker."""
    try:
        from distributed import get_worker
    except ImportError:
        return False
    try:
        get_worker()
    except ValueError:
        return False
    return True
