"""A Nutch-style web crawler as an asyncio service."""

__version__ = "0.1.0"
