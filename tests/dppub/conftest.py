"""The fixtures of tests/flows that the CLI's tests (moved here with the CLI) use."""

from tests.flows.conftest import config_factory  # noqa: F401 (the fixture)
