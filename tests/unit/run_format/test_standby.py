"""The warm standby's slot: one holder, a handoff taken once, a stop before any handoff."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from airflow_kafka_failover.core.exceptions import ConfigError
from airflow_kafka_failover.run_format.standby import (
    SlotBusy,
    StandbySlot,
    StandbyStopped,
    standby_dir,
)

HOLDER = """
import sys, time
from airflow_kafka_failover.run_format.standby import StandbySlot
slot = StandbySlot(sys.argv[1])
slot.claim()
slot.write_state("waiting")
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """A second process holding the slot (as a warm driver would), killed at the end."""
    folder = tmp_path / "standby"
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    yield folder, process
    process.kill()
    process.wait()


def test_slot_folder_is_per_pair_and_cluster(tmp_path):
    assert standby_dir(str(tmp_path), "orders", "B") == tmp_path / "orders" / "B" / "standby"


def test_a_second_warm_driver_of_the_slot_refuses_naming_the_holder(holder):
    folder, process = holder
    with pytest.raises(SlotBusy, match=f"pid {process.pid}"):
        StandbySlot(folder).claim()


def test_the_slot_is_free_again_when_its_holder_dies_however_it_dies(holder):
    folder, process = holder
    slot = StandbySlot(folder)
    assert slot.held() and slot.waiting()
    process.kill()
    process.wait()
    assert not slot.held() and not slot.waiting()  # state.json still says waiting: the lock decides
    slot.claim()
    assert slot.held()


def test_a_handoff_is_taken_once(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    slot.claim()
    slot.write_state("waiting")
    slot.hand_off("/runs/p/B/epoch-3/settings.json", 3)
    assert not slot.waiting()  # a handoff is pending
    handoff = slot.wait_for_handoff(poll_s=0.01)
    assert (handoff.settings, handoff.epoch) == ("/runs/p/B/epoch-3/settings.json", 3)
    assert not slot.handoff_file.exists()
    with pytest.raises(StandbyStopped):
        slot.wait_for_handoff(poll_s=0.01, keep_waiting=lambda: False)


def test_a_waiting_driver_gets_a_handoff_written_while_it_waits(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    slot.claim()
    threading.Timer(0.2, lambda: StandbySlot(slot.folder).hand_off("/s.json", 7)).start()
    started = time.monotonic()
    assert slot.wait_for_handoff(poll_s=0.01).epoch == 7
    assert time.monotonic() - started < 5


def test_a_second_handoff_while_one_is_pending_is_refused(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    slot.hand_off("/s.json", 1)
    with pytest.raises(ConfigError, match="already pending"):
        slot.hand_off("/s.json", 2)


def test_a_damaged_handoff_names_the_file_and_is_not_used(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    slot.folder.mkdir(parents=True)
    slot.handoff_file.write_text('{"settings": "/s.json"}')
    with pytest.raises(ConfigError, match="handoff.json is not a handoff"):
        slot.wait_for_handoff(poll_s=0.01)
    assert not slot.handoff_file.exists()  # moved aside: a later switch can hand off again


def test_a_stop_request_ends_the_wait_before_any_handoff(tmp_path):
    slot = StandbySlot(tmp_path / "standby")
    slot.claim()
    threading.Timer(0.2, StandbySlot(slot.folder).request_stop).start()
    with pytest.raises(StandbyStopped, match="asked to stop"):
        slot.wait_for_handoff(poll_s=0.01)
