r"""What ``report.md`` shows of a release's results: the first rows of its published CSV files,
as Markdown pipe tables.

A kind names its previews (:attr:`dp.pipeline.kinds.base.ReleaseKind.previews`): which file,
how many rows, which columns; :func:`preview_lines` reads them from the run folder. Only
released files are read, so the report shows nothing the release did not publish.

A value is shown with the digits its noise supports: where the preview names a row's standard
error, the row's values are rounded to the power of ten at or below a tenth of it (the tables'
rule, :mod:`dp.tables.precision`); any other decimal to 6 significant digits. The file
keeps what it published; the report says when it shows fewer digits. Post-processing of
released values only.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> (folder / "t").mkdir()
>>> _ = (folder / "t" / "answers.csv").write_text("key,answer\r\na|b,12\r\nc,7\r\nd,3\r\n")
>>> print("\n".join(preview_lines("t", folder, (Preview(file="answers.csv", rows=2),))))
First 2 of 3 rows of `answers.csv`:
<BLANKLINE>
| key | answer |
|---|---:|
| a\|b | 12 |
| c | 7 |
>>> _display(["2086.0911728424985", "9.1786225266111678", "x"], [0, 1, 2], [0, 1], 1)
(['2086.1', '9.2', 'x'], True, False)
>>> _display(["38.123456789", "", "24000000", "1234567.891", "0.30000000000000004"],
...     range(5), [], None)
(['38.1235', '', '24000000', '1234568', '0.3'], False, True)
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dppub.dp.tables.precision import as_text, exponents, round_at

__all__ = ["Preview", "preview_lines"]

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    """One published CSV file of a release, as ``report.md`` shows its head."""

    file: str
    """The file's name in the release's folder (``answers.csv``)."""
    rows: int = 5
    """How many of its first rows."""
    columns: tuple[str, ...] | None = None
    """Which of its columns, in this order (None: all; a column it lacks is left out)."""
    what: str = ""
    """What the rows are, after the file's name (``: the model's coefficients``)."""
    error: tuple[str, ...] = ()
    """The column of a row's standard error: the first of these the file has (none: no
    rounding to the noise)."""
    rounded: tuple[str, ...] = ()
    """The columns rounded with it (the value, its standard error, its interval)."""


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def _short(text: str, value: float) -> str:
    """A decimal to 6 significant digits (an integer, or a number in exponent form, as it is)."""
    if "." not in text or "e" in text.lower():
        return text
    if abs(value) >= 1.0:
        short = f"{value:.{max(0, 6 - len(str(int(abs(value)))))}f}"
    else:
        short = f"{value:.6g}"
    return short if len(short) < len(text.strip()) else text


def _display(
    row: Sequence[str], wanted: Iterable[int], rounded: Sequence[int], error: int | None
) -> tuple[list[str], bool, bool]:
    """Row ``row``'s ``wanted`` cells as shown: the ``rounded`` ones at the power of ten its
    standard error (cell ``error``) supports, any other decimal to 6 significant digits; and
    whether either changed a cell."""
    se = None if error is None else _number(row[error])
    e = exponents([np.nan if se is None else se], counts=[False])
    out: list[str] = []
    by_noise = shortened = False
    for i in wanted:
        value = _number(row[i])
        if value is None:
            out.append(row[i])
        elif i in rounded and np.isfinite(e[0]):
            out.append(as_text(round_at([value], e), e)[0])
            by_noise |= out[-1] != row[i]
        else:
            out.append(_short(row[i], value))
            shortened |= out[-1] != row[i]
    return out, by_noise, shortened


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    numeric = [all(_NUMBER.match(r[i].strip()) for r in rows) for i in range(len(header))]
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    return [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        rule,
        *("| " + " | ".join(_cell(c) for c in r) + " |" for r in rows),
    ]


def _preview(path: Path, preview: Preview) -> list[str]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return []
        head: list[list[str]] = []
        total = 0
        for row in reader:
            total += 1
            if len(head) < preview.rows:
                head.append(row + [""] * (len(header) - len(row)))
    names = preview.columns if preview.columns is not None else header
    wanted = [i for c in names for i, h in enumerate(header) if h == c]
    if not wanted:
        return []
    shown = f"First {len(head)} of {total} rows" if len(head) < total else f"All {total} rows"
    if total <= 1:
        shown = "The only row" if total else "No rows"
    rounded = [i for i, h in enumerate(header) if h in preview.rounded]
    error = next((header.index(c) for c in preview.error if c in header), None)
    shown_rows = [_display(r, wanted, rounded, error) for r in head]
    rows = [cells for cells, _, _ in shown_rows]
    notes = []
    if any(by_noise for _, by_noise, _ in shown_rows):
        notes.append("values with a standard error to the digits it supports")
    if any(shortened for _, _, shortened in shown_rows):
        notes.append("other decimals to 6 significant digits")
    digits = f" (shown: {'; '.join(notes)}; the file has every digit)" if notes else ""
    lines = [f"{shown} of `{preview.file}`{preview.what}{digits}:"]
    return lines + (["", *_table([header[i] for i in wanted], rows)] if rows else [])


def preview_lines(name: str, folder: Path, previews: Sequence[Preview]) -> list[str]:
    """Release ``name``'s previews, from its folder in the run folder ``folder`` (a file it did
    not publish is skipped). Paragraphs and tables, separated by blank lines."""
    lines: list[str] = []
    for preview in previews:
        path = folder / name / preview.file
        if not path.is_file():
            continue
        shown = _preview(path, preview)
        if shown:
            lines += ["", *shown] if lines else shown
    return lines
