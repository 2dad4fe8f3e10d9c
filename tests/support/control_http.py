"""Talking to the HTTP test control (--enable-test-control): one JSON request, or a kcoord
command over it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

from tests.support.process import ROOT


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
    return subprocess.run(
        [sys.executable, "-m", "coordinator.admin", *args, "--control", control],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
