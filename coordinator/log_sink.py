"""The server log's sink (server_log.py): lines buffered and written in batches, and the
formatters of the standard library's records. Kept apart from server_log.py, which the
compiled build compiles: logging holds its handlers by weak reference, and these classes
subclass logging's, so they stay interpreted Python.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import time
from typing import TextIO

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FLUSH_DELAY = 0.1  # seconds: INFO lines are written together, this long after the first


class _Stamps:
    """The timestamp's text of the current second, made once per second (strftime and
    localtime are most of a formatted line's cost)."""

    __slots__ = ("second", "text", "iso")

    def __init__(self) -> None:
        self.second = -1
        self.text = ""
        self.iso = ""

    def update(self, second: int) -> None:
        self.second = second
        self.text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        self.iso = datetime.datetime.fromtimestamp(second, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`'s lines, with the timestamp's text made once per second."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._stamps = _Stamps()

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        second = int(record.created)
        if second != self._stamps.second:
            self._stamps.update(second)
        return f"{self._stamps.text},{int(record.msecs):03d} {record.levelname} {record.name}: {record.getMessage()}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message (and the
    exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


class LineSink(logging.Handler):
    """Formatted lines buffered and written together at most FLUSH_DELAY later: many
    requests' lines cost one write system call, not one each. WARNING and above, and lines
    logged with no loop running in their thread, are written at once (with everything
    buffered before them, in order); logging.shutdown() at exit writes what is left. A
    process killed outright loses at most FLUSH_DELAY of INFO lines."""

    def __init__(self, stream: TextIO, json_lines: bool = False) -> None:
        super().__init__()
        self.stream = stream
        self.json_lines = json_lines
        self.setFormatter(JsonFormatter() if json_lines else TextFormatter())
        self.lines: list[str] = []
        self.pending = False  # a flush is scheduled on the loop
        self.stamps = _Stamps()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.lines.append(line)
        if record.levelno >= logging.WARNING:
            self.flush()
        elif not self.pending:
            self.schedule()

    def schedule(self) -> None:
        """Write the buffered lines FLUSH_DELAY from now (now, with no loop in this thread)."""
        loop = asyncio._get_running_loop()
        if loop is None:
            self.flush()
        else:
            self.pending = True
            loop.call_later(FLUSH_DELAY, self.flush)

    def flush(self) -> None:
        self.acquire()
        try:
            self.pending = False
            if self.lines:
                text = "\n".join(self.lines) + "\n"
                self.lines.clear()
                self.stream.write(text)
                self.stream.flush()
        except (OSError, ValueError):  # (a closed or broken stderr: the lines are lost, the server goes on)
            pass
        finally:
            self.release()
