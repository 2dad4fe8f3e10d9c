"""`python -m coordinator.admin`: the same as `kcoord`."""

from .cli import run

run(prog="python -m coordinator.admin")
