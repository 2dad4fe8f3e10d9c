"""Talking to the HTTP test control (--enable-test-control): one JSON request, or a kcoord
command over it."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request


def http(control: str, method: str, path: str, body: bytes | str | None = None) -> tuple[int, object]:
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(f"http://{control}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if answer.headers["Content-Type"] == "application/json" else raw
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode()


def kcoord(*args: str, control: str) -> subprocess.CompletedProcess:
    """`python -m coordinator.admin ARGS --control CONTROL`, run in this process
    (tests.support.cli.kcoord: no interpreter start per command)."""
    from tests.support.cli import kcoord as run

    return run(*args, "--control", control)
