"""A published table in the layout offices use: per measure, the first key down, the second
across, a ``Total`` row and column where margins are published.

One block per measure (:class:`Block`), read off the published long rows
(:class:`dp.tables.office.OfficeTable`, nothing else): the first key's labels down (and any
third or later key beside it), the second key's across (a one-key table: one column, the
measure); a key summed out (``*``) is ``Total``, last. ``answers_wide.csv`` stacks the blocks
(:func:`wide_csv`): a title line naming the measure, a header line, the rows, a blank line. A
number has its published digits; a withheld cell is ``[c]`` (the ONS's mark for a value not
published); a combination the table does not publish is blank.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from dppub.dp.stopping import checked
from dppub.dp.tables.margins import STAR
from dppub.dp.tables.office import OfficeTable
from dppub.dp.tables.precision import as_text
from dppub.dp.tables.quality import SUPPRESSED

__all__ = ["TOTAL", "WITHHELD", "Block", "wide_blocks", "wide_csv"]

TOTAL = "Total"
WITHHELD = "[c]"


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One measure's wide table."""

    measure: str
    down: tuple[str, ...]
    """The key columns down (the first key, then any after the second)."""
    across: str | None
    """The key across (None for a one-key table)."""
    rows: tuple[tuple[str, ...], ...]
    columns: tuple[str, ...]
    values: npt.NDArray[np.float64]
    """The published answers (NaN: blank or withheld)."""
    text: tuple[tuple[str, ...], ...]
    """Each value as published (``[c]`` withheld, blank where there is none)."""
    quality: tuple[tuple[str, ...], ...]
    """Each value's ``quality`` flag (blank where there is none)."""
    exponent: npt.NDArray[np.float64]
    """Each value's power of ten (:mod:`dp.tables.precision`)."""

    @property
    def title(self) -> str:
        if self.across is None:
            return f"{self.measure} by {self.down[0]}"
        return f"{self.measure} by {', '.join(self.down)} (down) and {self.across} (across)"

    @property
    def header(self) -> tuple[str, ...]:
        return (*self.down, *self.columns)


def _labels(values: pd.Series) -> list[str]:
    """Distinct labels in published order, a summed-out key last."""
    seen = list(dict.fromkeys(values.tolist()))
    return [v for v in seen if v != STAR] + [v for v in seen if v == STAR]


def _shown(label: str) -> str:
    return TOTAL if label == STAR else label


def wide_blocks(table: OfficeTable, keys: Sequence[str]) -> list[Block]:
    """One block per measure (module doc), in the table's measure order."""
    frame = table.answers.reset_index(drop=True)
    text = as_text(frame["answer"].to_numpy(np.float64), table.exponent)
    down = [keys[0], *keys[2:]]
    across = keys[1] if len(keys) > 1 else None
    blocks: list[Block] = []
    answer = frame["answer"].to_numpy(np.float64)
    quality = frame["quality"].astype(str).tolist()
    measures = frame["measure"].to_numpy(str)
    for measure in dict.fromkeys(measures.tolist()):
        at = np.flatnonzero(measures == measure)
        sub = frame.iloc[at]
        labels = list(sub[down].itertuples(index=False, name=None))
        rows = sorted(dict.fromkeys(labels), key=lambda r: tuple(v == STAR for v in r))
        columns = [measure] if across is None else _labels(sub[across])
        col_of = [measure] * len(at) if across is None else sub[across].tolist()
        at_row = {r: i for i, r in enumerate(rows)}
        at_col = {c: j for j, c in enumerate(columns)}
        values = np.full((len(rows), len(columns)), np.nan)
        exponent = np.full_like(values, np.nan)
        cells = [["" for _ in columns] for _ in rows]
        flags = [["" for _ in columns] for _ in rows]
        for i, label, col in checked(zip(at, labels, col_of, strict=True), "the wide table"):
            r, c = at_row[label], at_col[col]
            values[r, c], exponent[r, c] = answer[i], table.exponent[i]
            flags[r][c] = quality[i]
            cells[r][c] = WITHHELD if quality[i] == SUPPRESSED else text[i]
        blocks.append(
            Block(
                measure=measure,
                down=tuple(down),
                across=across,
                rows=tuple(tuple(_shown(v) for v in r) for r in rows),
                columns=tuple(_shown(c) for c in columns),
                values=values,
                text=tuple(tuple(r) for r in cells),
                quality=tuple(tuple(r) for r in flags),
                exponent=exponent,
            )
        )
    return blocks


def wide_csv(blocks: Sequence[Block]) -> str:
    """``answers_wide.csv``: the blocks one after another (module doc).

    >>> block = Block(measure="count", down=("sex",), across="age", rows=(("F",), ("Total",)),
    ...               columns=("0-9", "Total"), values=np.zeros((2, 2)),
    ...               text=(("12", "[c]"), ("30", "41")), quality=(), exponent=np.zeros((2, 2)))
    >>> print(wide_csv([block]).replace(chr(13), ""), end="")
    count by sex (down) and age (across)
    sex,0-9,Total
    F,12,[c]
    Total,30,41
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # quotes a label holding "\r" (RFC 4180)
    for n, block in enumerate(blocks):
        if n:
            writer.writerow([])
        writer.writerow([block.title])
        writer.writerow(block.header)
        for labels, cells in checked(zip(block.rows, block.text, strict=True), "answers_wide.csv"):
            writer.writerow([*labels, *cells])
    return out.getvalue()
