"""The long-running crawl service: ``crawler daemon``."""
