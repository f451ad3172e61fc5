"""report.html and the audit page in headless Chromium: no console error, nothing fetched,
every plot present and drawn (not blank)."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from dppub.commands import audit_payload
from dppub.dp.ledger import Ledger
from dppub.dp.pipeline.audit_page import render_audit_html
from tests.browser.chromium import Browser, Page
from tests.dp.pipeline.published_run import Demo

# Where each inlined plot is, in document coordinates.
_PLOTS = """Array.from(document.querySelectorAll('figure.plot svg')).map(e => {
  const r = e.getBoundingClientRect();
  return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height,
          marks: e.querySelectorAll('path, rect, use, image').length};
})"""


def _open(browser: Browser, path: Path) -> Page:
    page = browser.new_page()
    page.goto(path.as_uri())
    return page


def _check_plots(page: Page, expected: int) -> None:
    plots = page.evaluate(_PLOTS)
    assert len(plots) == expected
    for plot in plots:
        assert plot["width"] > 300 and plot["height"] > 80, plot  # laid out at a readable size
        assert plot["marks"] > 10, plot
        clip = {k: plot[k] for k in ("x", "y", "width", "height")}
        image = Image.open(io.BytesIO(page.screenshot(clip))).convert("RGB")
        colours = image.getcolors(maxcolors=1 << 20) or []
        dark = sum(n for n, c in colours if isinstance(c, tuple) and sum(c) < 3 * 235)  # RGB
        inked = dark / (image.width * image.height)
        # A blank plot is one colour; axes, text and data give hundreds (anti-aliasing).
        assert len(colours) >= 20, plot
        assert inked > 0.01, plot


def _check_self_contained(page: Page, path: Path) -> None:
    assert page.errors() == []
    assert {u for u in page.requested() if not u.startswith("data:")} == {path.as_uri()}


def test_the_report_renders_in_chromium(browser: Browser, demo: Demo) -> None:
    path = demo.published.folder / "report.html"
    page = _open(browser, path)
    _check_self_contained(page, path)
    _check_plots(page, 1 + len(demo.published.summaries))
    text = page.evaluate("document.body.innerText")
    assert demo.published.manifest["guarantee"]["statement"] in text
    assert "left for the next run" in text


def test_the_audit_page_renders_in_chromium(browser: Browser, demo: Demo, tmp_path: Path) -> None:
    payload = audit_payload(str(demo.ledger), None)
    history = Ledger(str(demo.ledger), create=False).history()
    path = tmp_path / "audit.html"
    path.write_text(render_audit_html(payload, history), encoding="utf-8")
    page = _open(browser, path)
    _check_self_contained(page, path)
    _check_plots(page, 1)
    text = page.evaluate("document.body.innerText")
    assert demo.charged_run in text
    assert "income_by_education[Bachelors]" in text


# The page's scroll width and every table's hidden width (its columns beyond its box), in CSS
# pixels, with all details open.
_OVERFLOW = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const tables = Array.from(document.querySelectorAll('table'));
  return {scroll: document.documentElement.scrollWidth,
          hidden: tables.map(t => t.scrollWidth - t.clientWidth)};
})()"""


def test_the_audit_page_fits_a_1280_pixel_window(
    browser: Browser, demo: Demo, tmp_path: Path
) -> None:
    payload = audit_payload(str(demo.ledger), None)
    history = Ledger(str(demo.ledger), create=False).history()
    path = tmp_path / "audit.html"
    path.write_text(render_audit_html(payload, history), encoding="utf-8")
    page = browser.new_page()
    page.send(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=800,
        deviceScaleFactor=1,
        mobile=False,
    )
    page.goto(path.as_uri())
    layout = page.evaluate(_OVERFLOW)
    # Old page: 1,282 pixels wide, its release table reaching 1,443.
    assert layout["scroll"] <= 1280, layout
    assert len(layout["hidden"]) >= 4 and max(layout["hidden"]) <= 1, layout
