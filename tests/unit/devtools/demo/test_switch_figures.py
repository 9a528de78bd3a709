"""The RTO breakdown read from a switch run's log (``akf_devtools.demo.story.step_seconds``) and the catch-up
read from its progress entries (``caught_up_at``)."""

from __future__ import annotations

import json

from akf_devtools.demo.story import caught_up_at, step_seconds, verdict_time

LOG = """\
2026-11-26T19:29:34.227963Z [info     ] [DAG TEST] starting task_id=gate map_index=-1 [airflow.sdk]
2026-11-26T19:29:59.750613Z [info     ] [DAG TEST] end task task_id=gate map_index=-1 [airflow.sdk]
2026-11-26T19:29:59.779834Z [info     ] [DAG TEST] starting task_id=wait_for_down map_index=-1 [airflow.sdk]
2026-11-26T19:30:00.182969Z [info     ] Pausing task as DEFERRED.      [task] task_id=wait_for_down
2026-11-26T19:32:30.388293Z [info     ] [DAG TEST] starting task_id=wait_for_down map_index=-1 [airflow.sdk]
2026-11-26T19:32:31.274605Z [info     ] [DAG TEST] end task task_id=wait_for_down map_index=-1 [airflow.sdk]
2026-11-26T19:32:32.142266Z [info     ] [DAG TEST] starting task_id=fence_and_stop map_index=-1 [airflow.sdk]
2026-11-26T19:32:48.245653Z [info     ] [DAG TEST] end task task_id=fence_and_stop map_index=-1 [airflow.sdk]
2026-11-26T19:32:48.263536Z [info     ] [DAG TEST] starting task_id=plan map_index=-1 [airflow.sdk]
a stray [DAG TEST] end task task_id=plan line from another process
"""


def test_each_step_is_timed_from_its_first_start_to_its_end():
    took = step_seconds(LOG)
    assert took == {"gate": 25.5, "wait_for_down": 151.5, "fence_and_stop": 16.1}  # plan has not ended
    assert verdict_time(LOG) is not None


def _entry(folder, batch, written_at, newest_ms):
    marks = {"orders": {"0": newest_ms - 5000, "1": newest_ms}} if newest_ms is not None else {}
    (folder / str(batch)).write_text(
        json.dumps({"batch_id": batch, "written_at": written_at, "max_timestamp_ms": marks})
    )


def test_caught_up_at_the_first_batch_whose_newest_record_is_recent(tmp_path):
    _entry(tmp_path, 0, 100.0, None)  # a batch without records
    _entry(tmp_path, 1, 110.0, 90_000)  # 20 s behind: the outage's backlog
    _entry(tmp_path, 2, 112.0, 111_000)  # 1 s: caught up
    _entry(tmp_path, 10, 113.0, 112_500)
    (tmp_path / "not-a-batch").write_text("{}")
    assert caught_up_at(str(tmp_path), 2.0) == 112.0
    assert caught_up_at(str(tmp_path), 30.0) == 110.0
    assert caught_up_at(str(tmp_path), 0.1) is None
