"""The server's log: Kafka's INFO lines for group life cycles, at a cost a churning test suite
does not notice.

A join-sync-leave cycle logs about six INFO lines, as Kafka's coordinator does. Through the
standard library each line costs a LogRecord, a walk of the stack for the caller, a walk of
the logger tree, a strftime and a write system call, together more than the rest of the
cycle. So in the server process (configure(), called by `python -m coordinator`):
- INFO lines of a `Log` (the modules' loggers) go straight to the sink: the line is formatted
  from the message, its arguments and strings made once per logger and once per second (the
  timestamp), with no LogRecord; below the logger's level nothing is built at all;
- every line, the standard library's too, is buffered and written in batches
  (FLUSH_DELAY later; at once from WARNING up, or with no loop running): one write for many
  requests' lines;
- records carry no caller, thread or process (logging's documented optimisations): the line
  formats use none of them.
Everywhere else (the library in a test process, coordinator.testing) a `Log` is a plain
logging.Logger's front: records go wherever the application's logging sends them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

from .log_sink import FLUSH_DELAY, TEXT_FORMAT, JsonFormatter, LineSink, TextFormatter

__all__ = ["FLUSH_DELAY", "TEXT_FORMAT", "JsonFormatter", "Log", "LineSink", "TextFormatter", "configure", "get"]

_MS = tuple(f",{ms:03d}" for ms in range(1000))  # the timestamp's milliseconds, text lines'
_ISO_MS = tuple(f".{ms:03d}" for ms in range(1000))  # JSON lines'


_info_sink: LineSink | None = None  # set by configure() at INFO and below: the server's INFO lines go straight there
_sink: LineSink | None = None  # the one configure() set up
_time = time.time


class Log:
    """A module's logger (`log = server_log.get(__name__)`): logging.Logger's methods, with
    INFO lines written straight to the server's sink once configure() has set one up, while
    every logger of the server takes INFO lines (levels_changed).
    The message is formatted (`msg % args`) only when the line is written."""

    __slots__ = (
        "logger",
        "text_info",
        "json_info",
        "debug",
        "warning",
        "error",
        "exception",
        "critical",
        "log",
        "isEnabledFor",
    )

    def __init__(self, name: str) -> None:
        self.logger = logger = logging.getLogger(name)
        # (the line's parts after the timestamp, made once)
        self.text_info = f" INFO {name}: "
        self.json_info = f'+00:00", "level": "INFO", "logger": {json.dumps(name)}, "message": '
        self.debug = logger.debug
        self.warning = logger.warning
        self.error = logger.error
        self.exception = logger.exception
        self.critical = logger.critical
        self.log = logger.log
        self.isEnabledFor = logger.isEnabledFor

    def info(self, msg: str, *args: Any) -> None:
        sink = _info_sink
        if sink is None:  # (not the server, or INFO off: logging decides, as for the other levels)
            if self.logger.isEnabledFor(20):
                self.logger.info(msg, *args, stacklevel=2)
            return
        # The line emit() would write for this record, made without one: the timestamp's
        # text is the second's (made once a second) and its milliseconds' (made once).
        now = _time()
        second = int(now)
        stamps = sink.stamps
        if second != stamps.second:
            stamps.update(second)
        if sink.json_lines:
            message = json.dumps(msg % args if args else msg)
            line = f'{{"time": "{stamps.iso}{_ISO_MS[int((now - second) * 1000)]}{self.json_info}{message}}}'
        else:
            line = f"{stamps.text}{_MS[int((now - second) * 1000)]}{self.text_info}{msg % args if args else msg}"
        sink.lines.append(line)
        if not sink.pending:
            sink.schedule()


def get(name: str) -> Log:
    return Log(name)


def configure(level: str, log_format: str = "text", stream: TextIO | None = None) -> LineSink:
    """Set up the process's logging for the server: one sink on stderr (or `stream`) at
    `level`, lines as text or JSON. For `python -m coordinator` alone: it takes over the
    process's logging (a library user's process keeps its own); its levels change afterwards
    only through BROKER_LOGGER (coordinator/broker/loggers.py)."""
    global _sink
    # Logging's documented optimisations (the HOWTO's "Optimization"): no caller lookup (a
    # walk of the stack per record), no thread or process names; no format uses them.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    sink = LineSink(sys.stderr if stream is None else stream, json_lines=log_format == "json")
    logging.basicConfig(level=level.upper(), handlers=[sink], force=True)
    _sink = sink
    levels_changed()
    return sink


def levels_changed() -> None:
    """The server's log levels were changed (configure(), or BROKER_LOGGER's
    IncrementalAlterConfigs): INFO lines go straight to the sink only while every logger of
    the server takes them; otherwise logging decides per logger."""
    global _info_sink
    loggers = [logging.getLogger("coordinator")] + [
        v
        for n, v in logging.root.manager.loggerDict.items()
        if n.startswith("coordinator.") and isinstance(v, logging.Logger)
    ]
    _info_sink = _sink if _sink is not None and all(g.isEnabledFor(logging.INFO) for g in loggers) else None
