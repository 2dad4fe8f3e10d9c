"""The server's log (coordinator/server_log.py): a Log's INFO lines, written without a
LogRecord, read as the standard library's lines read (text and JSON); nothing is built below
the level; lines are written in batches, at once from WARNING up."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re

import pytest

from coordinator import server_log

TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) coordinator\.t: (.*)")


@pytest.fixture
def restore_logging():
    """configure() takes over the process's logging: give the test process its own back."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging._srcfile, logging.logThreads, logging.logProcesses)
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging._srcfile, logging.logThreads, logging.logProcesses = saved[2:]
        logging.logMultiprocessing = True
        server_log._info_sink = None


class Loud:
    """An argument that fails the test if it is ever turned into text."""

    def __str__(self) -> str:
        raise AssertionError("formatted below the log level")


def test_text_lines_read_as_the_standard_librarys(restore_logging):
    out = io.StringIO()
    server_log.configure("INFO", "text", out)
    log = server_log.get("coordinator.t")

    async def run() -> None:
        log.info("group %s: generation %d", "g", 3)  # the fast path, buffered for the loop
        log.info("plain")
        assert out.getvalue() == ""  # (written together, later)
        log.log(logging.WARNING, "careful %s", "now")  # the standard library's path: written at once, in order
        lines = out.getvalue().splitlines()
        assert [TEXT_LINE.fullmatch(x).groups() for x in lines] == [  # type: ignore[union-attr]  # a mismatch fails the test either way
            ("INFO", "group g: generation 3"),
            ("INFO", "plain"),
            ("WARNING", "careful now"),
        ]
        log.debug("%s", Loud())  # below the level: its argument is never formatted
        log.info("later")
        await asyncio.sleep(server_log.FLUSH_DELAY * 4)
        assert out.getvalue().splitlines()[-1].endswith(" INFO coordinator.t: later")

    asyncio.run(run())


def test_json_lines(restore_logging):
    out = io.StringIO()
    server_log.configure("INFO", "json", out)
    log = server_log.get("coordinator.t")
    log.info('member %s joins "%s"', "m", "x")  # no loop: written at once
    log.error("bad %d", 7)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["message"] == 'member m joins "x"' and second["message"] == "bad 7"
    assert (first["level"], first["logger"], second["level"]) == ("INFO", "coordinator.t", "ERROR")
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", x["time"]) for x in (first, second))


def test_below_info_nothing_is_built(restore_logging):
    out = io.StringIO()
    server_log.configure("WARNING", "text", out)
    log = server_log.get("coordinator.t")
    log.info("%s", Loud())
    assert out.getvalue() == ""


def test_outside_the_server_a_log_is_the_applications_logger(caplog):
    log = server_log.get("coordinator.t")
    with caplog.at_level(logging.INFO, logger="coordinator.t"):
        log.info("seen %d", 1)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("coordinator.t", "seen 1")]
