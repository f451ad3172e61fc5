"""The dashboard of the Prefect server ``dppub serve`` starts, on a port other than 4200,
reaches that server's API, whatever UI setting the environment carries."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from dppub.flows.server import local_server, stop_server


@pytest.mark.parametrize("name", ["PREFECT_SERVER_UI_API_URL", "PREFECT_UI_API_URL"])
def test_the_dashboard_of_a_served_server_finds_its_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # old code, with PREFECT_SERVER_UI_API_URL inherited: the dashboard asked port 4200
    # ("Can't connect to Server API"); Prefect reads that name before PREFECT_UI_API_URL.
    monkeypatch.setenv(name, "http://127.0.0.1:4200/api")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    server, url = local_server(tmp_path / "state")
    try:
        assert not url.startswith("http://127.0.0.1:4200/")
        base = url.removesuffix("/api")
        with urllib.request.urlopen(f"{base}/ui-settings", timeout=30) as resp:
            assert json.loads(resp.read())["api_url"] == url
    finally:
        stop_server(server)
