"""Command implementations behind ``crawler.cli``: each takes the loaded config and parsed arguments."""
