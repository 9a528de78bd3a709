from __future__ import annotations

import signal
import subprocess

import pytest
from akf_devtools.errors import SandboxError
from akf_devtools.sandbox.hadoop import READY_FILE, HadoopMiniCluster


def test_addresses_come_from_the_ready_file(tmp_path):
    cluster = HadoopMiniCluster(tmp_path)
    cluster.conf_dir.mkdir()
    (cluster.conf_dir / READY_FILE).write_text(
        "rm_webapp_address=localhost:40001\nrm_address=localhost:40002\n"
        "fs_default_fs=hdfs://localhost:40003\nwebhdfs=webhdfs://localhost:40004\n"
    )
    assert cluster.resource_manager_url == "http://localhost:40001"
    assert cluster.webhdfs_url == "http://localhost:40004/webhdfs/v1"
    assert cluster.addresses()["fs_default_fs"] == "hdfs://localhost:40003"
    assert cluster.env == {"HADOOP_CONF_DIR": str(cluster.conf_dir), "YARN_CONF_DIR": str(cluster.conf_dir)}


def test_addresses_before_up_say_so(tmp_path):
    with pytest.raises(
        SandboxError, match=r"the minicluster has not written .*ready.properties.*call up\(\) first"
    ):
        HadoopMiniCluster(tmp_path).addresses()


def test_container_processes_are_found_by_their_working_folder(tmp_path):
    cluster = HadoopMiniCluster(tmp_path)
    container = cluster.work_dir / "local" / "appcache" / "application_1_0001" / "container_1_0001_01_000001"
    container.mkdir(parents=True)
    assert cluster.container_pids() == []
    sleeper = subprocess.Popen(["sleep", "30"], cwd=container)
    try:
        assert cluster.container_pids() == [sleeper.pid]
        assert cluster.container_pids("application_1_0001") == [sleeper.pid]
        assert cluster.container_pids("application_1_0002") == []
        # down() without a running JVM still kills what containers were left behind.
        cluster.down(timeout=1)
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()
