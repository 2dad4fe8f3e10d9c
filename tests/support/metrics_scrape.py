"""Reading the server's Prometheus text: every sample, and one value by name and labels."""

from __future__ import annotations

import urllib.error
import urllib.request
from prometheus_client.parser import text_string_to_metric_families


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """Every sample: (name, its labels) -> value."""
    status, text = get(port, "/metrics")
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float | None:
    want = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None
