"""matplotlib figures rendered to inline SVG, with the pages' shared look.

matplotlib is imported on first use (about half a second): ``dppub plan``, ``audit`` without
``--html`` and a report with nothing to plot never pay for it. Figures are made with
:class:`matplotlib.figure.Figure` and saved straight to SVG -- no pyplot, no GUI backend, no
global figure registry, nothing that a display or another thread of the flow could disturb.

Text stays text (``svg.fonttype: none``): the page's own font draws it and it can be searched
and copied. Each figure gets its own ``svg.hashsalt``, so the element ids of two figures inlined
in one page never collide and the same figure always renders to the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "BAND",
    "BUDGET",
    "INK",
    "MUTED",
    "PALETTE",
    "WARN",
    "label_inches",
    "new_figure",
    "style",
    "to_svg",
]

INK = "#1f4e79"
"""Released values."""
BAND = "#9dc3e6"
"""Their interval bands."""
BUDGET = "#c00000"
"""Budget lines."""
WARN = "#ed7d31"
"""Charged-but-unpublished runs, suppressed records."""
MUTED = "#7f7f7f"
"""Reference lines and secondary series."""
PALETTE = ("#1f4e79", "#ed7d31", "#548235", "#7030a0", "#bf9000", "#2e75b6", "#843c0c")
"""One colour per series (tasks, clusters, datasets)."""

_RC: Any = {  # matplotlib types rcParams as literal keys
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "svg.fonttype": "none",
}


@dataclass
class _Style:
    stack: ExitStack
    applied: bool = False


_STYLE: ContextVar[_Style | None] = ContextVar("dppub_figure_style", default=None)


@contextmanager
def style() -> Iterator[None]:
    """The pages' look for every figure made and saved inside (axes read it when created).

    matplotlib is imported by the first figure made inside, not here: a page that draws none
    (a report whose releases have nothing to plot) never imports it.
    """
    with ExitStack() as stack:
        token = _STYLE.set(_Style(stack))
        try:
            yield
        finally:
            _STYLE.reset(token)


def new_figure(
    width: float = 7.0,
    height: float = 3.0,
    *,
    left: float = 0.8,
    right: float = 0.2,
    bottom: float = 0.6,
    top: float = 0.4,
    gap: float = 0.5,
) -> Figure:
    """An empty figure, sizes and margins in inches; make and save it inside :func:`style`.

    Margins are fixed rather than computed by a layout engine: constrained layout measured
    every label twice and doubled the report's rendering time. Callers widen a margin for
    long labels (:func:`label_inches`); ``gap`` is the space between subplots as a fraction of
    their size.
    """
    from matplotlib.figure import Figure

    current = _STYLE.get()
    if current is not None and not current.applied:  # the first figure inside style()
        import matplotlib

        current.stack.enter_context(matplotlib.rc_context(_RC))
        current.applied = True
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(
        left=left / width,
        right=1.0 - right / width,
        bottom=bottom / height,
        top=1.0 - top / height,
        wspace=gap,
        hspace=gap,
    )
    return fig


def label_inches(labels: Iterable[object], *, minimum: float = 0.5) -> float:
    """About how wide the longest of ``labels`` is at the pages' tick size, in inches."""
    return max(minimum, 0.25 + 0.068 * max((len(str(x)) for x in labels), default=0))


def to_svg(fig: Figure, *, key: str) -> Markup:
    """The figure as an ``<svg>`` element to inline in a page; ``key`` names it uniquely
    within the page (it salts the element ids)."""
    import matplotlib

    buf = io.StringIO()
    rc: Any = {"svg.hashsalt": f"dppub-{key}"}
    with matplotlib.rc_context(rc):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "dppub"})
    text = buf.getvalue()
    start = text.find("<svg")  # drop the XML prolog and doctype: invalid inside HTML
    svg = text[start:].replace("<svg ", f'<svg role="img" aria-label="{escape(key)}" ', 1)
    return Markup(svg)  # matplotlib's own output; it escapes the labels
