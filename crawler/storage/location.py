"""Where ``crawl_dir`` lives, for the storage modules: defined below the config, in crawler/crawldir.py."""

from crawler.crawldir import (  # noqa: F401 - the storage package's name for them
    REMOTE_SCHEMES,
    Remote,
    default_staging_dir,
    local_crawl_path,
    parse_remote,
    staging_path,
)
