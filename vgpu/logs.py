"""Structured logging, set up once per process.

JSON lines when stderr is not a terminal (what log collectors want), coloured key=value
when a person is watching. ``VGPU_LOG_LEVEL`` and ``VGPU_LOG_FORMAT`` (``json``/``console``)
override the choice.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog


class _Stderr:
    """``sys.stderr`` as it is when a line is written, not when logging was set up: a test
    harness (pytest's capsys) or a daemon may swap it, and a logger holding the old,
    closed stream would fail every later call."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def setup(level: str | None = None, fmt: str | None = None) -> None:
    level_name = (level or os.environ.get("VGPU_LOG_LEVEL") or "info").upper()
    numeric = logging.getLevelName(level_name)
    if not isinstance(numeric, int):
        numeric = logging.INFO
    fmt = fmt or os.environ.get("VGPU_LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    renderer: Any = (
        structlog.dev.ConsoleRenderer() if fmt == "console" else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    # Libraries (aiohttp, kubernetes, grpc) log through stdlib logging; keep them quiet
    # unless asked, and on the same stream.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def get(name: str) -> Any:
    # Lazy: the logger binds to whatever configuration setup() made by its first use, so
    # modules may call this at import time, before the command line chose the format.
    return structlog.get_logger(name)
