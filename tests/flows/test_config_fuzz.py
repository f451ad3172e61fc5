"""Property-based fuzzing of configs through the real ``dppub plan``.

Valid demo configs are mutated -- wrong types, missing and extra keys, extreme and non-finite
numbers, huge sizes, unicode, nesting -- and every outcome must be exit 0, 2 or 3 with at most
one line on stderr, no traceback, within seconds. Seeded (``derandomize``), so the examples are
the same on every run.
"""

import math
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dppub import cli
from tests.examples import example

ROOT = Path(__file__).resolve().parents[2]
DEMO: dict[str, Any] = example("demo.yaml")

SCALARS = st.one_of(
    st.sampled_from([-1, 0, 1, 2, 7, 10**9, 10**18, -(10**18)]),
    st.sampled_from([-1.0, 0.0, 1e-320, 0.5, 1e300, math.nan, math.inf, -math.inf]),
    st.booleans(),
    st.none(),
    st.text(min_size=0, max_size=12),
    st.sampled_from(["auto", "prefix", "drop", "ÿ€😀", "../../etc/passwd", "{period}"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(DEMO)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(yaml.safe_dump(DEMO))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = raw
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.sampled_from(["set", "delete", "extra"]))
            if action == "set":
                parent[path[-1]] = draw(VALUES)
            elif action == "delete" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif isinstance(parent, dict):
                parent[draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced the path
    return raw


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(raw=mutated())
def test_mutated_configs_fail_in_one_line_or_plan(tmp_path: Path, raw: dict[str, Any]) -> None:
    config = tmp_path / "fuzz.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True))
    started = time.monotonic()
    result = CliRunner().invoke(
        cli.app, ["plan", str(config), "--ledger", str(tmp_path / "none.sqlite")]
    )
    assert time.monotonic() - started < 15
    assert result.exit_code in (0, 2, 3), result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) <= 1, result.stderr
    if result.exit_code:
        assert lines and lines[0].startswith("dppub: error:")
    assert not (tmp_path / "none.sqlite").exists()  # plan never creates a ledger
