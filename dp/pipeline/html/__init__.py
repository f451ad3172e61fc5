"""The HTML pages dppub writes: ``report.html`` of a run and the ``audit --html`` page.

Self-contained files: Jinja2 templates shipped with the package (``templates/``), the styles
inlined, every plot a matplotlib figure inlined as SVG. No script, font or image is fetched,
so a page reads the same offline, from a mail attachment or an archive years later. Only
public values reach a page: released files, release summaries, manifests and ledger rows.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from dppub.dp.pipeline.html.markdown import markdown_html

__all__ = ["render_page"]

_ENV: Environment | None = None


def _env() -> Environment:
    global _ENV
    if _ENV is None:
        _ENV = Environment(
            loader=PackageLoader("dppub.dp.pipeline.html", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,  # a missing value is a bug, not an empty cell
            trim_blocks=True,
            lstrip_blocks=True,
        )
        _ENV.filters["num"] = _num
        _ENV.filters["md"] = lambda text: markdown_html([str(text)])
        _ENV.filters["when"] = _when
    return _ENV


def _num(value: Any, digits: int = 4) -> str:
    """A number as people read it (``0.3``, ``1.5e-06``, ``23249``); ``—`` for none."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.{digits}g}"


def _when(value: Any) -> Markup:
    """An ISO 8601 UTC timestamp to the second (``2026-11-25 21:40:16``), never wrapped in a
    narrow table cell.

    >>> str(_when("2026-11-25T21:40:16.640059+00:00"))
    '<span class="when">2026-11-25 21:40:16</span>'
    """
    return Markup('<span class="when">{}</span>').format(str(value)[:19].replace("T", " "))


def render_page(template: str, **context: Any) -> str:
    """Render one of the package's templates (``report.html.j2``, ``audit.html.j2``)."""
    return _env().get_template(template).render(**context)
