"""Warm starts: a content-addressed, versioned on-disk cache of chosen strategies.

Choosing a strategy never looks at the data (:func:`dp.matrix.select.select_strategy`), so the
choice made for a workload holds for every later run and process; only its computation costs
(seconds for an optimized strategy over 1,024 cells). :func:`cached_select_strategy` keeps it on
disk:

* **where**: ``$DPPUB_CACHE_DIR``, else ``$XDG_CACHE_HOME/dppub``, else ``~/.cache/dppub``
  (created private to the user, mode 0700);
* **key**: the SHA-256 of the entry format, the *code version* (a hash of the source of
  :mod:`dp.matrix` and the numpy and scipy versions, so any change to strategy code or to the
  numerical libraries is a new key, and stale entries are simply never read again), the
  workload's queries and domain, and the candidate generator;
* **writes** go to a temporary file in the same folder, flushed to disk, then renamed over the
  entry: a reader sees a whole entry or none, and concurrent writers of one key write the same
  bytes, so processes may share the folder without locks;
* **reads** check the header and the SHA-256 of the payload; a truncated, corrupt or foreign
  entry, or one that is not a strategy over the workload's domain, is ignored, recomputed and
  overwritten. The cache only ever saves time: when its folder cannot be written, strategies
  are computed as if it did not exist.

Entries are Python pickles, so the folder must be writable by the user alone (the same trust as
the interpreter's own ``__pycache__``); it holds data-independent objects only. Delete it at any
time to reclaim space.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy

from dppub.dp.matrix.select import select_strategy
from dppub.dp.matrix.strategy import Strategy
from dppub.dp.matrix.workload import Workload

__all__ = ["CACHE_ENV", "cache_dir", "cache_key", "cached_select_strategy", "code_version"]

CACHE_ENV = "DPPUB_CACHE_DIR"
"""Environment variable that overrides the cache folder."""

_FORMAT = b"dppub-strategy-cache 1\n"
_MATRIX_DIR = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dppub"


@functools.cache
def code_version() -> str:
    """Hash of everything a chosen strategy depends on besides its inputs."""
    digest = hashlib.sha256(f"numpy {np.__version__} scipy {scipy.__version__}\n".encode())
    for path in sorted(_MATRIX_DIR.glob("*.py")):
        digest.update(path.name.encode() + b"\n" + path.read_bytes())
    return digest.hexdigest()


def _candidates_id(candidates: Callable[[Workload], list[Strategy]] | None) -> str | None:
    """A stable name for the candidate generator, or ``None`` if it has none: only module-level
    functions are named (a lambda, closure or partial may capture anything)."""
    if candidates is None:
        return "default"
    if not inspect.isfunction(candidates) or candidates.__closure__:
        return None
    name = f"{candidates.__module__}.{candidates.__qualname__}"
    return None if "<" in name else name


def cache_key(
    workload: Workload,
    candidates: Callable[[Workload], list[Strategy]] | None = None,
    noise: str = "laplace",
) -> str | None:
    """The entry name for ``workload`` (``None``: not cacheable, see :func:`_candidates_id`)."""
    cands = _candidates_id(candidates)
    if cands is None:
        return None
    kind = type(workload).__name__ if noise == "laplace" else f"{type(workload).__name__}/{noise}"
    parts = (_FORMAT.decode(), code_version(), kind, workload.key)
    text = "\n".join((*parts, repr(workload.domain), cands))
    return hashlib.sha256(text.encode()).hexdigest()


def _read(path: Path, workload: Workload) -> Strategy | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head, _, rest = blob.partition(b"\n")
    digest, _, payload = rest.partition(b"\n")
    if head + b"\n" != _FORMAT or hashlib.sha256(payload).hexdigest().encode() != digest:
        return None
    try:
        value = pickle.loads(payload)
    except Exception:  # any unpickling failure means a corrupt entry: recompute it
        return None
    if not isinstance(value, Strategy) or value.domain != workload.domain:
        return None
    return value


def _write(path: Path, strategy: Strategy) -> None:
    payload = pickle.dumps(strategy, protocol=pickle.HIGHEST_PROTOCOL)
    blob = _FORMAT + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    with contextlib.suppress(OSError):  # a read-only or full disk only costs the warm start
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def cached_select_strategy(
    workload: Workload,
    *,
    candidates: Callable[[Workload], list[Strategy]] | None = None,
    directory: Path | None = None,
    noise: str = "laplace",
) -> Strategy:
    """:func:`dp.matrix.select.select_strategy`, remembered on disk across processes.

    Args:
        workload: the workload to answer.
        candidates: optional candidate generator (a module-level function; other callables
            bypass the cache).
        directory: cache folder (default :func:`cache_dir`).
        noise: ``"laplace"`` or ``"gaussian"`` (which sensitivity the choice weighs).

    Returns:
        The same strategy :func:`~dp.matrix.select.select_strategy` returns.
    """
    key = cache_key(workload, candidates, noise)
    if key is None:
        return select_strategy(workload, candidates=candidates, noise=noise)
    path = (directory or cache_dir()) / f"{key}.strategy"
    hit = _read(path, workload)
    if hit is not None:
        return hit
    chosen = select_strategy(workload, candidates=candidates, noise=noise)
    _write(path, chosen)
    return chosen
