"""Headless Chromium driven over the DevTools protocol, for tests that look at real pages.

Chromium is a prerequisite, like ``make``: nothing here installs it. Where ``chromium`` is not on
``PATH`` the browser tests skip with one line naming the command that installs it (``.ci/run``
installs it and sets ``DPPUB_REQUIRE_ALL=1``, under which a skip fails: ``tests/conftest.py``).
The browser runs with the flags a closed network needs (no background networking, no component
updates), and each page records its console errors, uncaught exceptions and every URL it
requested.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

__all__ = ["INSTALL", "Browser", "Page", "find_chromium"]

INSTALL = "apt-get install chromium"

FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--window-size=1200,900",
)


def find_chromium() -> str:
    """The path of Chromium; where it is missing, the calling test skips naming its install."""
    found = shutil.which("chromium")
    if found is None:
        pytest.skip(f"the browser tests need Chromium, not on PATH: {INSTALL} (Debian, as root)")
    return found


class Page:
    """One tab: navigate, evaluate, screenshot; console errors and requests are recorded."""

    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=1200,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )

    def send(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """Call a DevTools method and return its result (events meanwhile are recorded)."""
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self._ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def _drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.events.append(json.loads(self._ws.recv(timeout=left)))
            except TimeoutError:
                return

    def goto(self, url: str, timeout: float = 30.0) -> None:
        """Open ``url`` and wait for its load event."""
        seen = len(self.events)
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events[seen:]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load in {timeout} s")
            self._drain(0.2)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float) -> bool:
        """Poll a JavaScript condition until it is true (False at the timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            self._drain(0.5)
        return False

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        """A PNG of the viewport, or of ``clip`` (document coordinates, CSS pixels)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": clip is not None}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])

    def errors(self) -> list[str]:
        """Console errors, failed assertions and uncaught exceptions seen so far."""
        self._drain(0.1)
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                out.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif method == "Runtime.exceptionThrown":
                out.append(str(params["exceptionDetails"].get("exception", params)))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(f"{params['entry'].get('url', '')}: {params['entry']['text']}")
        return out

    def requested(self) -> list[str]:
        """Every URL the page asked for."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]


class Browser:
    """A headless Chromium for one test session; close it when done."""

    def __init__(self, executable: str, profile: Path) -> None:
        self._log = (profile.parent / "chromium.log").open("wb")
        self._proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start; see {self._log.name}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        self._pages: list[ClientConnection] = []

    def new_page(self) -> Page:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT"
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            target = json.loads(resp.read())
        ws = connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self._pages.append(ws)
        return Page(ws)

    def close(self) -> None:
        for ws in self._pages:
            ws.close()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()
