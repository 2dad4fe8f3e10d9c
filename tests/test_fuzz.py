"""A fast fuzz run (bench/fuzz.py has the long one): seeded random mutations of valid frames
of every api key and version the server serves. It must keep answering valid requests and
log no traceback: bad input is a Kafka error or a clean close with a WARNING."""

from __future__ import annotations

from bench import fuzz


def test_mutated_frames_of_every_api_version(server_factory):
    server = server_factory("--fetch-max-wait-ms", "50")
    apis = fuzz.served(server.port)
    assert len(apis) > 100  # every registered version is covered
    sent = fuzz.run(server.port, count=3 * len(apis), seed=16)
    assert sent == 3 * len(apis)
    assert server.proc.poll() is None
    log = server.log_text()
    assert "Traceback" not in log, log[max(log.find("Traceback") - 500, 0):][:4000]
    assert " ERROR " not in log, log[max(log.find(" ERROR ") - 500, 0):][:4000]


def test_the_request_decoder_raises_only_its_defined_errors(server):
    """Mutations of every served api version fed to decode_request in this process: only
    MalformedRequest / UnknownApi may escape (kio's own errors are wrapped)."""
    apis = fuzz.served(server.port)
    outcome = fuzz.decode_only(apis, count=30 * len(apis), seed=17)
    assert outcome["decoded"] > 0 and outcome["refused"] > 0, outcome


def test_decoders_under_hypothesis(server):
    """Hypothesis drives the same decoder: a served api version, a sampled valid body and
    its mutations, or a valid header before arbitrary bytes; failures shrink to a minimal
    frame. Only MalformedRequest / UnknownApi may escape."""
    import random
    import struct

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from protocol.messages import MalformedRequest, UnknownApi, decode_request

    apis = fuzz.served(server.port)

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.sampled_from(apis), st.integers(0, 2**32), st.booleans(), st.binary(max_size=64))
    def decode(api, seed, mutated, tail):
        api_key, version = api
        rng = random.Random(seed)
        frame = fuzz.valid_frame(api_key, version, rng, 7)
        if frame is None:
            return
        if mutated:
            frame = fuzz.mutate(frame, rng)
        else:  # the valid header (and client id), then bytes hypothesis chooses
            header = frame[4:4 + 8 + 2 + len("fuzz")]
            frame = struct.pack(">i", len(header) + len(tail)) + header + tail
        try:
            decode_request(frame[4:])
            seen["decoded"] += 1
        except (MalformedRequest, UnknownApi):
            seen["refused"] += 1

    seen = {"decoded": 0, "refused": 0}
    decode()
    assert seen["decoded"] and seen["refused"], seen  # both kinds of input were reached
