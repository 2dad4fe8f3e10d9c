"""`python -m coordinator`: run the server until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import uvloop

from protocol import compiled

# kio registers hypothesis strategies for its types whenever hypothesis can be imported (it is
# a test dependency, so a test or dev venv has it); the server never uses them, and that import
# would cost each start a third of its time. A None entry makes the import fail fast.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # None in sys.modules is Python's documented way to make an import fail

from .config import parse_args  # noqa: E402
from .server import Server, StartupError  # noqa: E402
from .server_log import configure as configure_logging  # noqa: E402


async def serve(argv: list[str] | None = None) -> None:
    config = parse_args(argv)
    sink = configure_logging(config.log_level, config.log_format)
    server = Server(config)
    try:
        await server.start()
    except StartupError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if compiled.state.startswith("pure: stale"):  # (said here, not at import: kcoord's output stays its own)
        logging.getLogger("coordinator").warning(
            "running pure Python: the compiled build is %s (make compiled)", compiled.state.removeprefix("pure: ")
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A line tests and scripts can wait for (the port may have been chosen by the OS).
    # With several brokers: each one's first listener, as a bootstrap list.
    first = {x.node_id: x for x in reversed(server.listeners)}
    # With --enable-test-control, a word that says where it listens (the metrics port).
    control = f" control={config.metrics_port}" if config.enable_test_control else ""
    sink.flush()  # (the start-up lines are on disk before anyone reads the ready line)
    print(
        "ready " + ",".join(f"{x.host}:{x.port}" for x in sorted(first.values(), key=lambda x: x.node_id)) + control,
        flush=True,
    )
    await stop.wait()
    logging.getLogger("coordinator").info("shutting down")
    await server.stop()


def main() -> None:
    uvloop.run(serve(sys.argv[1:]))


if __name__ == "__main__":
    main()
