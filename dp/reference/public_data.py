"""The public data sets the tests and benchmarks read, kept in the repository (``data/public``).

``data/public`` (its README names each source and licence) holds them small and compressed: each
``;``-separated CSV file of a set as a Parquet file of its text (zstd), the 1-D DPBench histograms
as one ``.npz``. :func:`folder` gives a set's files in their published form -- the CSV files byte
for byte, each histogram as ``<name>.npy`` -- rebuilt once in ``data/public/.cache``, so that every
reader of files (pandas, :meth:`Hierarchy.from_csv`, a comparison tool in another interpreter)
reads them unchanged. Nothing outside the checkout is read; releases never import this module.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

__all__ = ["PUBLIC", "SETS", "folder"]

PUBLIC = Path(__file__).resolve().parents[2] / "data" / "public"
SETS = ("adult", "fars", "dpbench1d")


def _sources(name: str) -> list[Path]:
    if name == "dpbench1d":
        return [PUBLIC / "dpbench1d.npz"]
    return sorted((PUBLIC / name).glob("*.parquet"))


def _write_csv(source: Path, target: Path) -> None:
    """A stored CSV file as it was: its header (if it had one), fields joined by ``;``, its own
    line terminator, and a terminator after the last line only if it had one."""
    table = pq.read_table(source)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    lines = [";".join(table.column_names)] if meta["header"] == "1" else []
    lines += [";".join(row) for row in zip(*table.to_pydict().values(), strict=True)]
    end = meta["line_terminator"] if meta["final_terminator"] == "1" else ""
    target.write_bytes((meta["line_terminator"].join(lines) + end).encode("utf-8"))


def _build(name: str, sources: list[Path], staging: Path) -> None:
    if name == "dpbench1d":
        with np.load(sources[0]) as histograms:
            for key in histograms.files:
                np.save(staging / f"{key}.npy", histograms[key])
        return
    for source in sources:
        _write_csv(source, staging / f"{source.stem}.csv")


@functools.cache
def folder(name: str) -> Path:
    """The folder of data set ``name`` (one of :data:`SETS`) in its published form.

    Built on first use under a name that is the digest of the stored files, so an edit of
    ``data/public`` builds anew; concurrent test processes each build, and the first to finish
    moves its folder into place.
    """
    if name not in SETS:
        raise ValueError(f"no public data set {name!r}: there are {', '.join(SETS)}")
    sources = _sources(name)
    if not sources:
        raise FileNotFoundError(f"{PUBLIC / name} holds no stored files")
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    cache = PUBLIC / ".cache"
    target = cache / f"{name}-{digest.hexdigest()[:16]}"
    if not target.is_dir():
        cache.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
        staging.chmod(0o755)  # mkdtemp's 0700: a tool run as another user reads it too
        _build(name, sources, staging)
        try:
            staging.rename(target)
        except OSError:  # another process moved its copy into place first
            shutil.rmtree(staging)
    return target
