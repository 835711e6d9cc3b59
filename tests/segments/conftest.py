"""Segment tests reuse the fetcher's inline loopback servers."""

from tests.fetcher.conftest import servers  # noqa: F401 - a fixture, found by pytest by name
