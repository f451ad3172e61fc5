"""The anonymity fixtures (Adult, a small synthetic table) for the reference implementations."""

from tests.dp.anonymity.conftest import adult, small

__all__ = ["adult", "small"]
