"""Where a series finds what it published: the ledger's rows, and the state they seal.

Each run of a series records one ledger row per measure, named ``<series>[<period>]`` (the last
period it published) with kind ``series``; its ``output_hash`` is the SHA-256 of the release's
files (:func:`dp.publication.sha256_files`), among them ``state.json``, the
:class:`~dp.series.state.SeriesState` (noisy measurements and published values only). The
ledger's hash chain seals that hash. A copy of the release's files is kept beside the ledger,
in ``<ledger>.series/<dataset>/<series>/<output hash>/``, so the next run finds the state
without knowing where runs were published: it takes the newest committed row of its series,
opens the folder of that hash, recomputes the hash and refuses, with one line and before
anything is reserved, a folder that is missing or whose files do not hash to it. Folders of
runs that never committed are left over and never read.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from dppub.dp.errors import InputError
from dppub.dp.ledger import Ledger, NoLedgerError
from dppub.dp.ledger.history import committed_releases
from dppub.dp.publication import sha256_files
from dppub.dp.series.state import SeriesState, load_state

__all__ = [
    "LABEL",
    "Published",
    "check_alone",
    "last_published",
    "record_name",
    "save_copy",
    "series_runs",
    "store_folder",
]

LABEL = "series"
"""The kind's label in the ledger."""

STATE_FILE = "state.json"


def record_name(series: str, period: str) -> str:
    """The ledger row of a run of ``series`` that published up to ``period``."""
    return f"{series}[{period}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Published:
    """What the series' runs published so far, as the ledger seals it."""

    periods: tuple[str, ...]
    """The last period of each committed run, oldest first."""
    state: SeriesState | None
    """The state after the newest committed run (None: nothing published yet)."""
    folder: Path | None = None
    """The newest committed run's files (checked against the ledger's hash), or None."""


def store_folder(ledger: str, dataset: str, series: str) -> Path:
    """Where copies of ``series``' states live: beside a SQLite ledger (for a PostgreSQL one,
    in the working folder's ``dppub-series``)."""
    if ledger.startswith(("postgresql://", "postgres://")):
        base = Path("dppub-series")
    else:
        base = Path(ledger).with_name(Path(ledger).name + ".series")
    return base / dataset / series


def last_published(
    ledger: str, dataset: str, series: str, *, strategy: str, horizon: int
) -> Published:
    """The committed runs of ``series`` in ``ledger`` and the state the newest one sealed.

    Raises:
        InputError: one line: the state of the newest committed run is missing, or its files
            do not hash to what the ledger recorded (edited or replaced).
    """
    try:
        book = Ledger(ledger, create=False)
    except NoLedgerError:
        return Published(periods=(), state=None)
    rows = [
        r
        for r in committed_releases(book.store, dataset, LABEL)
        if str(r["release"]).startswith(f"{series}[")
    ]
    if not rows:
        return Published(periods=(), state=None)
    runs: dict[str, dict[str, object]] = {}
    for r in rows:  # one row per measure, all with the run's output hash
        runs.setdefault(str(r["run_id"]), r)
    periods = tuple(str(r["release"])[len(series) + 1 : -1] for r in runs.values())
    newest = list(runs.values())[-1]
    digest = str(newest["output_hash"])
    folder = store_folder(ledger, dataset, series) / digest
    where = f"series {series!r}: the state of its run {newest['run_id']}"
    if not (folder / STATE_FILE).is_file():
        raise InputError(f"{where} is missing ({folder}): nothing published")
    if sha256_files(folder) != digest:
        raise InputError(
            f"{where} does not match the ledger's hash (edited or replaced): nothing published"
        )
    text = (folder / STATE_FILE).read_text()
    state = load_state(text, _digest(text), name=series, strategy=strategy, horizon=horizon)
    return Published(periods=periods, state=state, folder=folder)


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save_copy(release_dir: Path, ledger: str, dataset: str, series: str) -> str:
    """Copy the release's files beside the ledger under their hash; return the hash (what
    the ledger will record as the release's ``output_hash``)."""
    digest = sha256_files(release_dir)
    target = store_folder(ledger, dataset, series) / digest
    target.mkdir(parents=True, exist_ok=True)
    for f in sorted(release_dir.iterdir()):
        if f.is_file():
            shutil.copyfile(f, target / f.name)
    return digest


def series_runs(book: Ledger, dataset: str | None = None) -> list[dict[str, object]]:
    """Each series in the ledger, one entry each (``dppub audit``): its dataset and name, the
    last period of each committed run, and what its runs charged."""
    out: dict[tuple[str, str], dict[str, object]] = {}
    seen: set[str] = set()
    for r in committed_releases(book.store, dataset, LABEL):
        name, _, period = str(r["release"]).partition("[")
        entry = out.setdefault(
            (str(r["dataset"]), name),
            {"dataset": r["dataset"], "series": name, "periods": [], "epsilon": 0.0},
        )
        if str(r["run_id"]) not in seen:
            seen.add(str(r["run_id"]))
            entry["periods"].append(period.rstrip("]"))  # type: ignore[attr-defined]
        entry["epsilon"] = float(entry["epsilon"]) + float(r["epsilon"])  # type: ignore[arg-type]
    return list(out.values())


def check_alone(
    ledger: str, dataset: str, series: str, config_hash: str, planned: tuple[str, ...]
) -> None:
    """Once the run holds its reservation, before any noise: the series' committed runs are
    still those it was planned on, and no other run of its config is pending (two runs planned
    at once would publish one period twice; both may refuse, none publishes twice).

    Raises:
        InputError: one line; the run is then aborted at no cost.
    """
    try:
        book = Ledger(ledger, create=False)
    except NoLedgerError:  # a scan outside a run (a test): nothing published, none pending
        if planned:
            raise InputError(f"series {series!r}: its ledger {ledger} is gone") from None
        return
    periods = tuple(
        str(r["release"])[len(series) + 1 : -1]
        for r in {
            str(r["run_id"]): r
            for r in committed_releases(book.store, dataset, LABEL)
            if str(r["release"]).startswith(f"{series}[")
        }.values()
    )
    if periods != planned:
        raise InputError(
            f"series {series!r}: another run published it (up to {periods[-1]}) since this run "
            "was planned: nothing published"
        )
    pending = [r for r in book.pending() if r.dataset == dataset and r.config_hash == config_hash]
    if len(pending) > 1:
        raise InputError(
            f"series {series!r}: {len(pending)} runs of its config are pending at once "
            f"({', '.join(r.run_id for r in pending)}); a series publishes one run at a time: "
            "nothing published"
        )
