"""``answers.xlsx``: a published table as the workbook offices publish (openpyxl).

One sheet per measure, its wide block (:mod:`dp.tables.wide`): a title, a header, the rows;
numbers are numbers, shown with their published digits (the number format of their power of
ten); a withheld cell holds ``[c]``; a value flagged ``use with caution`` or ``unreliable``
is shaded (light and dark orange; the flag is in ``answers.csv``). A ``Notes`` sheet says
what the table guarantees and how it was made: one line per note, as given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dppub.dp.stopping import checked
from dppub.dp.tables.wide import Block

__all__ = ["MARKS", "write_workbook"]

_FILLS = {"use with caution": "FFE0B2", "unreliable": "FFB74D"}
MARKS = (
    "[c]: withheld (suppress:, its published count is below the threshold); light orange: use "
    "with caution; dark orange: unreliable (quality column of answers.csv); Total: a published "
    "margin"
)
_MAX_SHEET = 31


def _sheet_names(measures: Sequence[str]) -> list[str]:
    """Valid, distinct sheet names (at most 31 characters, none of ``[]:*?/\\``)."""
    names: list[str] = []
    for m in measures:
        base = re.sub(r"[\[\]:*?/\\]", "_", m)[:_MAX_SHEET] or "measure"
        name, n = base, 1
        while name in names or name == "Notes":
            n += 1
            name = f"{base[: _MAX_SHEET - len(str(n)) - 1]}_{n}"
        names.append(name)
    return names


def _number_format(exponent: float) -> str:
    if not np.isfinite(exponent) or exponent >= 0:
        return "0" if np.isfinite(exponent) else "General"
    return "0." + "0" * int(-exponent)


def write_workbook(path: Path, blocks: Sequence[Block], notes: Sequence[tuple[str, str]]) -> None:
    """Write the workbook (module doc) to ``path``; streamed (openpyxl's write-only mode)."""
    from openpyxl import Workbook  # only where a table is written
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import Font, PatternFill
    from openpyxl.utils import get_column_letter

    book = Workbook(write_only=True)
    bold = Font(bold=True)
    fills = {flag: PatternFill("solid", fgColor=colour) for flag, colour in _FILLS.items()}

    def heading(sheet: Any, values: Sequence[str]) -> list[Any]:
        cells = [WriteOnlyCell(sheet, value=v) for v in values]
        for cell in cells:
            cell.font = bold
        return cells

    for block, name in zip(blocks, _sheet_names([b.measure for b in blocks]), strict=True):
        sheet = book.create_sheet(name)
        sheet.freeze_panes = f"{get_column_letter(len(block.down) + 1)}3"
        sheet.append(heading(sheet, [block.title]))
        sheet.append(heading(sheet, block.header))
        for i, labels in checked(enumerate(block.rows), "writing answers.xlsx"):
            row: list[Any] = list(labels)
            for j in range(len(block.columns)):
                text, value = block.text[i][j], float(block.values[i, j])
                if text == "" or not np.isfinite(value):
                    row.append(text or None)
                    continue
                cell = WriteOnlyCell(sheet, value=value)
                cell.number_format = _number_format(float(block.exponent[i, j]))
                fill = fills.get(block.quality[i][j])
                if fill is not None:
                    cell.fill = fill
                row.append(cell)
            sheet.append(row)
    sheet = book.create_sheet("Notes")
    sheet.column_dimensions["A"].width = 16
    sheet.column_dimensions["B"].width = 120
    for topic, text in [*notes, ("Marks", MARKS)]:
        sheet.append([*heading(sheet, [topic]), text])
    book.save(path)
