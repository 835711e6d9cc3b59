"""Structured logging: the one place that calls ``structlog.configure``.

Logs go to stderr (stdout carries only results): one JSON object per line when
stderr is not a terminal or ``log.format: json``, readable console lines on a
terminal. ``log.file`` receives JSON lines as well, whatever stderr gets.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

import structlog

from crawler.config import LogConfig

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _json_default(value: Any) -> str:
    return str(value)


def _render_json(event_dict: dict[str, Any]) -> str:
    return json.dumps(event_dict, default=_json_default, ensure_ascii=False)


class _FileTee:
    """Writes each event as a JSON line to ``log.file`` before stderr rendering."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        self.stream.write(_render_json(event_dict) + "\n")
        self.stream.flush()
        return event_dict


def configure_logging(cfg: LogConfig, stderr: TextIO | None = None) -> None:
    stream = stderr or sys.stderr
    use_json = cfg.format == "json" or (cfg.format == "auto" and not stream.isatty())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    if cfg.file:
        processors.append(_FileTee(open(cfg.file, "a", encoding="utf-8")))  # noqa: SIM115 - lives as long as the process
    if use_json:
        processors.append(lambda _l, _m, ev: _render_json(ev))
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=stream.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[cfg.level]),
        # One write() per line (PrintLogger writes the newline separately): fetch processes share
        # stderr, and a line written in one call under PIPE_BUF never interleaves with another's.
        logger_factory=structlog.WriteLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )


def get_logger(**context: Any) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger().bind(**context)
