"""Generalization hierarchies for quasi-identifiers (full-domain recoding).

A hierarchy maps every *leaf* (a value a column may take) to one label per level: level 0 is the
leaf itself, higher levels are coarser, and the last level is typically ``*``. This is the model of
ARX (Prasser & Kohlmayer, "Putting statistical disclosure control into practice: the ARX data
anonymization tool", 2015), whose CSV format ``value;level1;...;*`` is read by
:meth:`Hierarchy.from_csv`.

Levels must be *monotone*: a coarser level never splits a group of a finer one. Lattice search and
its pruning (Kohlmayer et al., "Flash: efficient, stable and optimal k-anonymity", 2012) rely on it.

A row repeated verbatim (ARX's FARS age file lists ``99`` twice) encodes once but stays in the
*domain*: ARX's Loss measures a label by the rows of the hierarchy under it
(``DomainShareMaterialized``), so :meth:`Hierarchy.group_sizes` and :attr:`Hierarchy.domain_size`
count rows as given.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.errors import ConfigError, InputError

__all__ = ["Hierarchy"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hierarchy:
    """An immutable, validated generalization hierarchy for one column.

    >>> h = Hierarchy.from_levels({"a": ["ab", "*"], "b": ["ab", "*"], "c": ["c", "*"]})
    >>> h.height, h.labels(1)
    (3, ['ab', 'c'])
    """

    levels: tuple[tuple[str, ...], ...]
    """``levels[l][j]`` is the label of leaf ``j`` at level ``l``; ``levels[0]`` are the leaves."""
    name: str = "hierarchy"
    """Used in error messages and reports (typically the column name)."""
    _rows: tuple[int, ...] = field(init=False, repr=False)
    """Rows the source gave each leaf (1 unless a row is repeated verbatim)."""
    _codes: tuple[IntArray, ...] = field(init=False, repr=False, compare=False)
    _labels: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        levels = tuple(tuple(level) for level in self.levels)
        if not levels or not levels[0]:
            raise ConfigError(f"hierarchy {self.name!r} has no leaves")
        width = len(levels[0])
        for lvl, row in enumerate(levels):
            if len(row) != width:
                raise ConfigError(
                    f"hierarchy {self.name!r}: level {lvl} has {len(row)} labels, expected {width}"
                )
            if not all(isinstance(v, str) for v in row):
                raise ConfigError(f"hierarchy {self.name!r}: level {lvl} labels must be strings")
        index = {leaf: j for j, leaf in enumerate(levels[0])}
        rows = (1,) * width
        if len(index) != width:
            levels, rows = self._drop_repeated_rows(levels)
            index = {leaf: j for j, leaf in enumerate(levels[0])}
        codes: list[IntArray] = []
        labels: list[tuple[str, ...]] = []
        for row in levels:
            # Codes number groups by first appearance, so the order depends only on the hierarchy.
            uniq, code = _first_appearance_codes(row)
            codes.append(code)
            labels.append(uniq)
        for lvl in range(1, len(levels)):
            # Monotone iff every finer group maps to exactly one coarser label.
            pairs = np.unique(np.stack([codes[lvl - 1], codes[lvl]]), axis=1)
            if pairs.shape[1] != len(labels[lvl - 1]):
                split = np.flatnonzero(np.bincount(pairs[0]) > 1)[0]
                raise ConfigError(
                    f"hierarchy {self.name!r}: level {lvl} splits group "
                    f"{labels[lvl - 1][split]!r} of level {lvl - 1} (levels must be monotone)"
                )
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "_rows", rows)
        object.__setattr__(self, "_codes", tuple(codes))
        object.__setattr__(self, "_labels", tuple(labels))
        object.__setattr__(self, "_index", index)

    def _drop_repeated_rows(
        self, levels: tuple[tuple[str, ...], ...]
    ) -> tuple[tuple[tuple[str, ...], ...], tuple[int, ...]]:
        # ARX's own files repeat some rows verbatim (FARS age has '99' twice): keep the first
        # copy and how many there were. A leaf listed twice with different generalizations is
        # ambiguous: reject it.
        rows: dict[str, tuple[str, ...]] = {}
        copies: dict[str, int] = {}
        for row in zip(*levels, strict=True):
            if rows.setdefault(row[0], row) != row:
                raise ConfigError(
                    f"hierarchy {self.name!r}: duplicate leaf {row[0]!r} with different levels"
                )
            copies[row[0]] = copies.get(row[0], 0) + 1
        return tuple(zip(*rows.values(), strict=True)), tuple(copies.values())

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_csv(cls, path: str | Path, sep: str = ";", *, name: str | None = None) -> Hierarchy:
        """Read an ARX hierarchy file: one row per leaf, ``value;level1;level2;...;*``."""
        path = Path(path)
        label = name if name is not None else path.stem
        try:
            with path.open(newline="", encoding="utf-8") as fh:
                rows = [row for row in csv.reader(fh, delimiter=sep) if row]
        except OSError as exc:
            raise ConfigError(f"cannot read hierarchy {label!r} from {str(path)!r}: {exc}") from exc
        if not rows:
            raise ConfigError(f"hierarchy file {str(path)!r} is empty")
        for i, row in enumerate(rows, start=1):
            if len(row) != len(rows[0]):
                raise ConfigError(
                    f"hierarchy {label!r}: row {i} has {len(row)} fields, expected {len(rows[0])}"
                )
        return cls(levels=tuple(zip(*rows, strict=True)), name=label)

    @classmethod
    def from_bands(
        cls, lo: int, hi: int, widths: Sequence[int], *, name: str = "bands"
    ) -> Hierarchy:
        """Integer interval ladder over the declared domain ``[lo, hi]``, then ``*``.

        Bands are aligned at ``lo`` and clipped at ``hi``; each width must divide the next so that
        levels are monotone.

        >>> Hierarchy.from_bands(20, 29, [5, 10]).levels[1][:6]
        ('20-24', '20-24', '20-24', '20-24', '20-24', '25-29')
        """
        ints = [lo, hi, *widths]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints):
            raise ConfigError(f"hierarchy {name!r}: lo, hi and widths must be integers")
        if lo > hi:
            raise ConfigError(f"hierarchy {name!r}: need lo <= hi, got [{lo}, {hi}]")
        if hi - lo >= 10_000_000:
            raise ConfigError(f"hierarchy {name!r}: domain [{lo}, {hi}] is too large to enumerate")
        prev = 1
        for w in widths:
            if w <= prev or w % prev != 0:
                raise ConfigError(
                    f"hierarchy {name!r}: widths must increase and each divide the next, "
                    f"got {list(widths)}"
                )
            prev = w
        values = range(lo, hi + 1)
        levels: list[tuple[str, ...]] = [tuple(str(v) for v in values)]
        for w in widths:
            starts = [lo + (v - lo) // w * w for v in values]
            levels.append(tuple(f"{s}-{min(s + w - 1, hi)}" for s in starts))
        levels.append(("*",) * len(values))
        return cls(levels=tuple(levels), name=name)

    @classmethod
    def from_prefix_mask(
        cls, leaves: Sequence[str], *, name: str = "prefix", mask: str = "*"
    ) -> Hierarchy:
        """Redact one trailing character per level: ``190146 -> 19014* -> ... -> ******``, then
        a ``*``-only top level.

        >>> Hierarchy.from_prefix_mask(["1901", "1902"]).labels(2)
        ['19**']
        """
        leaves = [str(v) for v in leaves]
        if not leaves:
            raise ConfigError(f"hierarchy {name!r} has no leaves")
        size = len(leaves[0])
        if any(len(v) != size for v in leaves):
            raise ConfigError(f"hierarchy {name!r}: prefix-mask leaves must all have one length")
        levels = [tuple(v[: size - r] + mask * r for v in leaves) for r in range(size + 1)]
        if levels[-1][0] != mask:
            levels.append((mask,) * len(leaves))
        return cls(levels=tuple(levels), name=name)

    @classmethod
    def from_levels(
        cls, mapping: Mapping[str, Sequence[str]], *, name: str = "taxonomy"
    ) -> Hierarchy:
        """Categorical taxonomy from config: ``leaf -> [level1, level2, ...]``."""
        rows = [(str(leaf), *(str(x) for x in up)) for leaf, up in mapping.items()]
        if not rows:
            raise ConfigError(f"hierarchy {name!r} has no leaves")
        for row in rows:
            if len(row) != len(rows[0]):
                raise ConfigError(
                    f"hierarchy {name!r}: leaf {row[0]!r} has {len(row) - 1} levels, "
                    f"expected {len(rows[0]) - 1}"
                )
        return cls(levels=tuple(zip(*rows, strict=True)), name=name)

    # ------------------------------------------------------------------ queries
    @property
    def height(self) -> int:
        """Number of levels, including level 0 (the leaves)."""
        return len(self.levels)

    @property
    def leaves(self) -> tuple[str, ...]:
        """The leaf values, in file/config order (a repeated row once)."""
        return self.levels[0]

    @property
    def domain_size(self) -> int:
        """``|D|`` of ARX's Loss: the hierarchy's rows, a repeated row counted each time."""
        return sum(self._rows)

    def _check_level(self, level: int) -> int:
        if isinstance(level, bool) or not isinstance(level, int | np.integer):
            raise ConfigError(f"hierarchy {self.name!r}: level must be an integer, got {level!r}")
        if not 0 <= level < self.height:
            raise ConfigError(
                f"hierarchy {self.name!r}: level must be in [0, {self.height - 1}], got {level}"
            )
        return int(level)

    def labels(self, level: int) -> list[str]:
        """Distinct labels at ``level`` in first-appearance order: the declared domain of the
        generalized column. Depends only on the hierarchy, never on data."""
        return list(self._labels[self._check_level(level)])

    def group_codes(self, level: int) -> IntArray:
        """Leaf index -> index into :meth:`labels` at ``level`` (a read-only lookup array)."""
        codes = self._codes[self._check_level(level)]
        codes.flags.writeable = False
        return codes

    def group_sizes(self, level: int) -> IntArray:
        """Rows of the hierarchy under each label of ``level``: ``|leaves(g)|`` of ARX's Loss,
        which, like :attr:`domain_size`, counts a repeated row each time."""
        codes = self._codes[self._check_level(level)]
        return np.bincount(codes, weights=self._rows).astype(np.int64)

    def encode(self, values: pd.Series) -> IntArray:
        """Leaf index of every value; raises :class:`InputError` naming only the count of unknowns.

        Values are compared as strings; integral floats (``39.0``) match the leaf ``"39"``.
        """
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        lookup = np.array([self._index.get(_as_leaf(u), -1) for u in uniques], dtype=np.int64)
        out = np.where(codes >= 0, lookup[np.maximum(codes, 0)] if len(lookup) else -1, -1)
        if np.any(out < 0):
            # Neither the values nor how many there are: messages can be persisted by the
            # orchestrator, and a count of bad rows is an exact statistic of the private table.
            column = values.name if values.name is not None else self.name
            raise InputError(f"column {column!r} has values that are not leaves of its hierarchy")
        return out.astype(np.int64)

    def generalize(self, values: pd.Series, level: int) -> pd.Series:
        """Replace every value by its label at ``level`` (categorical over :meth:`labels`)."""
        lvl = self._check_level(level)
        codes = self._codes[lvl][self.encode(values)]
        cats = pd.Categorical.from_codes(codes, categories=pd.Index(self._labels[lvl]))
        return pd.Series(cats, index=values.index, name=values.name)

    def digest(self) -> str:
        """SHA-256 of the hierarchy content (for reports and audit records)."""
        h = hashlib.sha256()
        for row in self.levels:
            h.update("\x1f".join(row).encode())
            h.update(b"\x1e")
        if self.domain_size != len(self.leaves):  # repeated rows change the Loss: part of content
            h.update(",".join(map(str, self._rows)).encode())
        return h.hexdigest()


def _as_leaf(value: object) -> str:
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _first_appearance_codes(row: tuple[str, ...]) -> tuple[tuple[str, ...], IntArray]:
    seen: dict[str, int] = {}
    code = np.fromiter((seen.setdefault(v, len(seen)) for v in row), np.int64, len(row))
    return tuple(seen), code
