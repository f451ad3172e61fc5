"""Every environment value dppub reads is parsed and checked in one place."""

from pathlib import Path

import pytest

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.environment import DEFAULT_LEDGER_TIMEOUT, environment
from dppub.dp.pipeline.plan import DEFAULT_MEMORY_BUDGET_MB, build_plan, load_config

DEMO = Path(__file__).resolve().parents[3] / "configs" / "demo.yaml"


def test_unset_values_take_their_defaults() -> None:
    env = environment({})
    assert (env.ledger_timeout, env.memory_budget_mb) == (DEFAULT_LEDGER_TIMEOUT, None)


def test_numbers_are_parsed() -> None:
    env = environment({"DPPUB_LEDGER_TIMEOUT": "0", "DPPUB_MEMORY_BUDGET_MB": "12.5"})
    assert (env.ledger_timeout, env.memory_budget_mb) == (0.0, 12.5)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DPPUB_LEDGER_TIMEOUT", "abc"),
        ("DPPUB_LEDGER_TIMEOUT", "inf"),
        ("DPPUB_LEDGER_TIMEOUT", "-0.1"),
        ("DPPUB_MEMORY_BUDGET_MB", "abc"),
        ("DPPUB_MEMORY_BUDGET_MB", "0"),
        ("DPPUB_MEMORY_BUDGET_MB", "nan"),
        ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "soon"),
        ("DPPUB_FAULT_AT", "drawn,nowhere"),
        ("DPPUB_FAULT", "int,term"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        environment({name: value})
    message = str(caught.value)
    assert name in message and "\n" not in message
    assert repr(value) in message or repr(value.split(",")[-1]) in message


def test_the_plan_checks_the_environment_and_carries_the_memory_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = load_config(DEMO)
    assert build_plan(cfg).memory_budget_mb == DEFAULT_MEMORY_BUDGET_MB
    monkeypatch.setenv("DPPUB_MEMORY_BUDGET_MB", "64")
    assert build_plan(cfg).memory_budget_mb == 64.0
    monkeypatch.setenv("DPPUB_MEMORY_BUDGET_MB", "abc")
    with pytest.raises(ConfigError, match="DPPUB_MEMORY_BUDGET_MB"):
        build_plan(cfg)  # a served run refuses it at plan time, before the ledger
