"""``import dppub`` turns Prefect's telemetry off before Prefect reads its settings: without it,
any Prefect server its calls start (an ephemeral one for ``publish_flow`` with no API, the
one ``dppub serve`` starts) logs ``Failed to send telemetry: ...`` as an error on a machine
without internet, and Prefect's client starts its analytics on import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import os, sys
import dppub
assert "prefect" not in sys.modules
import prefect
from prefect._internal.analytics.enabled import is_telemetry_enabled
from prefect.settings import get_current_settings
print(get_current_settings().server.analytics_enabled, is_telemetry_enabled())
"""
_TELEMETRY = ("DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED")


def _clean_env() -> dict[str, str]:
    """The environment of a user who set neither (the Makefile sets both)."""
    return {k: v for k, v in os.environ.items() if k.upper() not in _TELEMETRY}


@pytest.mark.slow
def test_import_dppub_turns_prefect_telemetry_off() -> None:
    # old code: "True True" -- only the CLI and dppub.publish set them, not `import dppub`
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=_clean_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.slow
def test_a_users_own_choice_is_kept() -> None:
    env = _clean_env() | {"PREFECT_SERVER_ANALYTICS_ENABLED": "true"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "True"
