"""A logger that looks up structlog's configuration on every call.

structlog bakes the level filter into a logger when it is bound; a daemon whose
log level changes on SIGHUP must not keep loggers bound to the old level, so
everything the daemon runs (jobs and the fetcher included) gets one of these.
"""

from __future__ import annotations

from typing import Any

import structlog


class LiveLogger:
    def __init__(self, **context: Any) -> None:
        self._context = context

    def bind(self, **more: Any) -> LiveLogger:
        return LiveLogger(**{**self._context, **more})

    def __getattr__(self, name: str) -> Any:
        return getattr(structlog.get_logger().bind(**self._context), name)
