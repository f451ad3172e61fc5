"""The small Markdown the release kinds write for ``report.md``, as HTML for ``report.html``.

A kind's :meth:`~dp.pipeline.kinds.ReleaseKind.report` lines are paragraphs with inline
```code``` and pipe tables; this turns exactly that into escaped HTML, so both reports say the
same thing without a Markdown dependency.

>>> print(markdown_html(["Strategy `OPT0`.", "", "| a |", "|--:|", "| <2> |"]))
<p>Strategy <code>OPT0</code>.</p>
<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>&lt;2&gt;</td></tr></tbody></table>
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markupsafe import Markup, escape

__all__ = ["markdown_html"]

_CODE = re.compile(r"`([^`]+)`")
_RULE = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")


def _inline(text: str) -> str:
    return _CODE.sub(r"<code>\1</code>", str(escape(text)))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(lines: Sequence[str]) -> str:
    head, *body = [ln for ln in lines if not _RULE.match(ln.strip())]
    th = "".join(f"<th>{_inline(c)}</th>" for c in _cells(head))
    rows = "".join(
        "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(r)) + "</tr>" for r in body
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{rows}</tbody></table>"


def markdown_html(lines: Sequence[str]) -> Markup:
    """Paragraphs and pipe tables (``lines`` may hold several lines each) as HTML."""
    blocks: list[str] = []
    table: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if table:
            blocks.append(_table(table))
            table.clear()
        if para:
            blocks.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()

    for line in (ln for chunk in lines for ln in str(chunk).splitlines() or [""]):
        stripped = line.strip()
        if stripped.startswith("|"):
            if para:
                flush()
            table.append(stripped)
        elif not stripped:
            flush()
        else:
            if table:
                flush()
            para.append(stripped)
    flush()
    return Markup("\n".join(blocks))
