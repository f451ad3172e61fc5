"""mbi is an optional extra: without it a synthetic release fails with one line that says how
to install it."""

from __future__ import annotations

import sys

import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.synthetic import pgm


def test_without_mbi_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mbi", None)  # `import mbi` raises ImportError
    with pytest.raises(ConfigError) as caught:
        pgm.model_size({"a": 2}, [("a",)])
    message = str(caught.value)
    assert "pip install 'dppub[synth]'" in message
    assert "\n" not in message
