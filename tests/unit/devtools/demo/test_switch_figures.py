"""The RTO breakdown read from a switch run's log (``akf_devtools.demo.story.step_seconds``)."""

from __future__ import annotations

from akf_devtools.demo.story import step_seconds, verdict_time

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
