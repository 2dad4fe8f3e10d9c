"""Running `python -m coordinator` with bad settings: its one line on stderr and exit status."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.process import ROOT


def start(*args: str, env: dict | None = None, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


async def refused(*args: str) -> str:
    """The one line a server started with ARGS prints before it exits with status 2, found in
    this process, without an interpreter start: parse_args's usage error, else Server.start's
    StartupError (which `python -m coordinator` prints as its line). Each kind has a test that
    starts the process itself (start, one_error_line)."""
    import contextlib
    import io

    from coordinator.config import parse_args
    from coordinator.server import Server, StartupError

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            config = parse_args(list(args))
    except SystemExit as e:
        lines = err.getvalue().splitlines()
        assert e.code == 2 and len(lines) == 1, err.getvalue()
        return lines[0]
    server = Server(config)
    try:
        await server.start()
    except StartupError as e:
        line = str(e)
        assert "\n" not in line and "Traceback" not in line, line
        return line
    await server.stop()
    raise AssertionError(f"a server started with {args}")


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def kcoord(*args: str) -> subprocess.CompletedProcess:
    """`python -m coordinator.admin ARGS` run in this process: its entry point (`run`), what
    it writes to stdout and stderr and its exit status, without an interpreter start and the
    imports per command (a second of CPU each, dozens of commands a test). The tests that run
    `python -m coordinator.admin` itself (tests/test_admin_cli.py) keep a subprocess."""
    import contextlib
    import io

    from coordinator.admin.cli import run

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run(list(args), prog="python -m coordinator.admin")
        except SystemExit as e:
            code = e.code
    status = code if isinstance(code, int) else (0 if code is None else 1)
    text = lambda stream: stream.buffer.getvalue().decode("utf-8", "replace")  # noqa: E731
    return subprocess.CompletedProcess(["kcoord", *args], status, text(out), text(err))
