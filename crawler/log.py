"""Structured logging: the one place that calls ``structlog.configure``.

Logs go to stderr (stdout carries only results): one JSON object per line when
stderr is not a terminal or ``log.format: json``, readable console lines on a
terminal. ``log.file`` receives JSON lines as well, whatever stderr gets.

Configuring again (the daemon's SIGHUP) opens ``log.file`` afresh and closes
the handle the previous configuration held, so a changed path leaks nothing
and a rotated file is let go. A line a job thread is writing through the old
configuration at that moment goes to the new file, not to a closed one.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any, TextIO


def _import_structlog_without_rich() -> None:
    # structlog imports rich when it loads (~50 ms of every command's start, rich.pretty and
    # rich.traceback) for what this configuration never uses: rich tracebacks in ConsoleRenderer,
    # which format_exc_info has already turned into text, and rich reprs of locals in dict tracebacks.
    # Hidden only while structlog loads: the progress bars still import rich when a terminal shows them.
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()

import structlog  # noqa: E402

from crawler.config import LogConfig  # noqa: E402
from crawler.errors import ConfigError  # noqa: E402

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _json_default(value: Any) -> str:
    return str(value)


def _render_json(event_dict: dict[str, Any]) -> str:
    return json.dumps(event_dict, default=_json_default, ensure_ascii=False)


class FileTee:
    """Writes each event as a JSON line to ``log.file`` before stderr rendering."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.stream: TextIO | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise ConfigError(f"log.file: cannot open {path}: {exc.strerror or exc}") from None
        self.successor: FileTee | None = None
        self._lock = threading.Lock()  # job threads log too

    def __call__(self, logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        self.write(_render_json(event_dict) + "\n")
        return event_dict

    def write(self, line: str) -> None:
        with self._lock:
            if self.stream is not None:
                self.stream.write(line)
                self.stream.flush()
                return
            successor = self.successor
        if successor is not None:
            successor.write(line)

    def close(self, successor: FileTee | None = None) -> None:
        """Close the file; lines still arriving here go to ``successor`` (None: stderr has them)."""
        with self._lock:
            if self.stream is not None:
                self.stream.close()
            self.stream = None
            self.successor = successor


def current_file_tee() -> FileTee | None:
    """The ``log.file`` writer of the current configuration, if any."""
    return next((p for p in structlog.get_config().get("processors", []) if isinstance(p, FileTee)), None)


def configure_logging(cfg: LogConfig, stderr: TextIO | None = None) -> None:
    """(Re)configure logging; raises ConfigError naming ``log.file`` when it cannot be opened (nothing changes)."""
    stream = stderr or sys.stderr
    old_tee = current_file_tee()
    tee = FileTee(cfg.file) if cfg.file else None
    use_json = cfg.format == "json" or (cfg.format == "auto" and not stream.isatty())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    if tee is not None:
        processors.append(tee)
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
    if old_tee is not None:
        old_tee.close(successor=tee)


def get_logger(**context: Any) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger().bind(**context)
