"""A fast fuzz run (bench/fuzz.py has the long one): seeded random mutations of valid frames
of every api key and version the server serves. It must keep answering valid requests and
log no traceback: bad input is a Kafka error or a clean close with a WARNING."""

from __future__ import annotations

import pytest

from tests.support import fuzz

pytestmark = [
    pytest.mark.slow,
    pytest.mark.process,
]  # server processes started, killed and restarted, or filled to their limits


def test_mutated_frames_of_every_api_version(server_factory):
    server = server_factory("--fetch-max-wait-ms", "50")
    apis = fuzz.served(server.port)
    assert len(apis) > 100  # every registered version is covered
    sent = fuzz.run(server.port, count=3 * len(apis), seed=16)
    assert sent == 3 * len(apis)
    assert server.proc.poll() is None
    log = server.log_text()
    assert "Traceback" not in log, log[max(log.find("Traceback") - 500, 0) :][:4000]
    assert " ERROR " not in log, log[max(log.find(" ERROR ") - 500, 0) :][:4000]


def test_the_request_decoder_raises_only_its_defined_errors(server):
    """Mutations of every served api version fed to decode_request in this process: only
    MalformedRequest / UnknownApi may escape (kio's own errors are wrapped)."""
    apis = fuzz.served(server.port)
    outcome = fuzz.decode_only(apis, count=30 * len(apis), seed=17)
    assert outcome["decoded"] > 0 and outcome["refused"] > 0, outcome


def test_decoders_under_hypothesis(server):
    """Hypothesis builds requests of every served api version from their schemas (boundary
    numbers, nulls where allowed, odd strings) and mutates some: a valid frame decodes, a
    mutated one raises only MalformedRequest / UnknownApi; failures shrink to a minimal
    frame. bench/fuzz.py --hypothesis runs the same for as long as wanted."""
    outcome = fuzz.hypothesis_decode(fuzz.served(server.port), examples=400)
    assert outcome["decoded"] and outcome["refused"], outcome  # both kinds of input were reached
