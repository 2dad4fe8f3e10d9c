"""Helpers that test modules share. Test modules import from here, never from each other or
from bench/."""
