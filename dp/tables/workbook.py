"""``answers.xlsx``: a published table as the workbook offices publish (openpyxl).

One sheet per measure, its wide block (:mod:`dp.tables.wide`): a title, a header, the rows;
numbers are numbers, shown with their published digits (the number format of their power of
ten); a withheld cell holds ``[c]``; a value flagged ``use with caution`` or ``unreliable``
is shaded (light and dark orange) and carries its flag as a comment. A ``Notes`` sheet says
what the table guarantees and how it was made: one line per note, as given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

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
    """Write the workbook (module doc) to ``path``."""
    from openpyxl import Workbook  # only where a table is written
    from openpyxl.comments import Comment
    from openpyxl.styles import Font, PatternFill

    book = Workbook()
    first = book.active
    assert first is not None
    book.remove(first)
    bold = Font(bold=True)
    for block, name in zip(blocks, _sheet_names([b.measure for b in blocks]), strict=True):
        sheet = book.create_sheet(name)
        sheet.append([block.title])
        sheet["A1"].font = bold
        sheet.append(list(block.header))
        for cell in sheet[2]:
            cell.font = bold
        for i, labels in enumerate(block.rows):
            sheet.append(list(labels))
            r = sheet.max_row
            for j in range(len(block.columns)):
                cell = sheet.cell(row=r, column=len(labels) + j + 1)
                text, flag = block.text[i][j], block.quality[i][j]
                if text == "" or not np.isfinite(block.values[i, j]):
                    cell.value = text or None
                    continue
                cell.value = float(block.values[i, j])
                cell.number_format = _number_format(float(block.exponent[i, j]))
                if flag in _FILLS:
                    cell.fill = PatternFill("solid", fgColor=_FILLS[flag])
                    cell.comment = Comment(flag, "dppub")
        sheet.freeze_panes = sheet.cell(row=3, column=len(block.down) + 1)
    sheet = book.create_sheet("Notes")
    for topic, text in [*notes, ("Marks", MARKS)]:
        sheet.append([topic, text])
        sheet.cell(row=sheet.max_row, column=1).font = bold
    sheet.column_dimensions["A"].width = 16
    sheet.column_dimensions["B"].width = 120
    book.save(path)
