"""The crawl database: immutable versions of pages and links, switched atomically by CURRENT."""
