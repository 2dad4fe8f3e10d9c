"""docs/kafka-differences.md is the rendering of the differential suite's table of known
differences (tests/support/kafka_differences.py), and the table is well formed. Runs without
Java: the page must stay true wherever the suite itself is skipped."""

from __future__ import annotations

from tests.support import kafka_differences as kd


def test_the_page_is_the_rendering_of_the_table():
    assert kd.PAGE.read_text() == kd.render(), (
        "docs/kafka-differences.md is out of date: python -m tests.support.kafka_differences --write"
    )


def test_each_difference_has_one_entry_a_level_a_kind_and_a_reason():
    keys = [d.key for d in kd.DIFFERENCES]
    assert sorted(k for k in set(keys) if keys.count(k) > 1) == []
    levels = {level for level, _ in kd.LEVELS}
    assert [d.key for d in kd.DIFFERENCES if d.key.split("/", 1)[0] not in levels] == []
    assert [d.key for d in kd.DIFFERENCES if d.kind not in (kd.GAP, kd.DELIBERATE)] == []
    assert [d.key for d in kd.DIFFERENCES if not d.what.strip() or not d.reason.strip()] == []


def test_observations_name_the_entry_to_add_and_the_one_to_delete():
    listed = kd.DIFFERENCES[0].key
    obs = kd.Observations()
    obs.compare("wire/Example/not-listed", {"error_code": 0}, {"error_code": 3})
    obs.compare(listed, 1, 1)
    obs.compare("wire/Example/same", [1, 2], [1, 2])
    added, deleted = obs.problems()
    assert "_d('wire/Example/not-listed'" in added and "error_code: kafka=0 ours=3" in added
    assert deleted.startswith(f"{listed}: listed") and "delete its entry" in deleted
