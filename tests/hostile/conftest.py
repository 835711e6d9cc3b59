"""Fixtures the hostile tests share with the fetcher tests."""

from tests.fetcher.conftest import servers  # noqa: F401 - the inline-server fixture, reused as is
