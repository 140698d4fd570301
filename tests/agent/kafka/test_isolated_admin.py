"""rackplan.agent.kafka.isolated_admin: DescribeGroups in a child process, whose abort the agent survives.

librdkafka#4605 aborts the process running a coordinator-targeted Admin call
during a broker fault (bench/bench_broker_faults.py measures it on the real
cluster: 1 agent abort in 10 faults in-process, 0 in 36 with the child).  Here
the child is killed with SIGABRT mid-call, as the bug does.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException, Node, TopicPartition
from confluent_kafka.admin._group import ConsumerGroupDescription, MemberAssignment, MemberDescription

from rackplan.agent.core.logging import configure, get_logger
from rackplan.agent.groups.membership import real_group
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.errors import error_name
from rackplan.agent.kafka.isolated_admin import (
    DescribeWorkerDied,
    GroupDescribeWorker,
    IsolatedGroupsAdmin,
    _register_reducers,
    isolated_admin,
)


def gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture
def log() -> io.StringIO:
    out = io.StringIO()
    configure("json", "info", stream=out)
    return out


def events(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


@pytest.fixture
def mock() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers_per_rack=1, racks=3) as c:
        yield c


def test_descriptions_cross_the_pipe_as_confluent_kafkas_own_objects() -> None:
    desc = ConsumerGroupDescription(
        "g",
        False,
        [
            MemberDescription(
                "m-1", "client-1", "/10.0.0.1", MemberAssignment([TopicPartition("orders", 3)]), "inst-1"
            )
        ],
        "range",
        ConsumerGroupState.STABLE,
        Node(2, "127.0.0.1", 9092, "az-b"),
    )
    _register_reducers()
    back = pickle.loads(pickle.dumps(desc))
    assert isinstance(back, ConsumerGroupDescription)
    assert real_group(back) == real_group(desc)
    err = pickle.loads(pickle.dumps(KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow"))))
    assert isinstance(err, KafkaException) and error_name(err) == "_TIMED_OUT"


def test_the_child_answers_as_the_client_itself_would(mock: EmbeddedCluster, log: io.StringIO) -> None:
    # librdkafka's mock has no DescribeGroups: the in-process client and the child refuse alike.
    from confluent_kafka.admin import AdminClient

    config: dict[str, str | int | float | bool] = {"bootstrap.servers": mock.bootstrap_servers}
    client = AdminClient(config)
    direct = client.describe_consumer_groups(["g1", "g2"], request_timeout=5)
    admin = isolated_admin(config, get_logger("t"), log_format="json", log_level="info")
    try:
        via_child = admin.describe_consumer_groups(["g1", "g2"], request_timeout=5)
        assert sorted(via_child) == ["g1", "g2"]
        for gid in ("g1", "g2"):
            with pytest.raises(KafkaException) as a:
                direct[gid].result(timeout=15)
            with pytest.raises(KafkaException) as b:
                via_child[gid].result(timeout=0)  # resolved when the call returned
            assert error_name(b.value) == error_name(a.value) == "_UNSUPPORTED_FEATURE"
        pid = admin.worker.pid
        assert pid is not None and not gone(pid)
    finally:
        admin.close()
    assert gone(pid)  # close() ends the child


def test_an_abort_of_the_child_fails_that_call_only_and_a_new_child_answers_later(log: io.StringIO) -> None:
    clock = [0.0]
    # No broker: the child waits on FindCoordinator for the whole request timeout, mid-call when it aborts.
    worker = GroupDescribeWorker(
        {"bootstrap.servers": f"127.0.0.1:{closed_port()}"}, get_logger("t"), clock=lambda: clock[0]
    )
    admin = IsolatedGroupsAdmin(admin=None, worker=worker)  # type: ignore[arg-type]
    result: dict[str, Any] = {}
    caller = threading.Thread(
        target=lambda: result.update(admin.describe_consumer_groups(["g1", "g2"], request_timeout=20))
    )
    caller.start()
    try:
        deadline = time.monotonic() + 20
        while worker.pid is None:
            assert time.monotonic() < deadline, "no child started"
            time.sleep(0.01)
        first = worker.pid
        os.kill(first, signal.SIGABRT)  # what librdkafka's failed assertion does
        caller.join(30)
        assert not caller.is_alive()
        for gid in ("g1", "g2"):
            with pytest.raises(DescribeWorkerDied, match="SIGABRT"):
                result[gid].result(timeout=0)
        (ended,) = [e for e in events(log) if e["event"].startswith("describe worker ended")]
        assert (ended["how"], ended["level"], ended["restart_in_s"]) == ("SIGABRT", "error", 1.0)
        assert worker.died == ["SIGABRT"]

        # Within the backoff no child is started: the call fails at once, saying why.
        with pytest.raises(DescribeWorkerDied, match="restarting"):
            admin.describe_consumer_groups(["g1"], request_timeout=1)["g1"].result(timeout=0)
        assert worker.pid is None

        clock[0] += 1.0
        again = admin.describe_consumer_groups(["g1"], request_timeout=1)["g1"]
        with pytest.raises(KafkaException):  # a new child, whose client found no broker within 1 s
            again.result(timeout=0)
        assert worker.pid is not None and worker.pid != first and worker.deaths == 0
    finally:
        admin.close()


def test_the_child_ends_when_the_agent_is_killed() -> None:
    # kill -9 of the agent (or of its supervisor's child) leaves no describe worker behind.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from rackplan.agent.kafka.isolated_admin import GroupDescribeWorker\n"
        "from rackplan.agent.core.logging import get_logger\n"
        f"w = GroupDescribeWorker({{'bootstrap.servers': '127.0.0.1:{closed_port()}'}}, get_logger('t'))\n"
        "w.describe(['g1'], 1.0)\n"
        "print(w.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    agent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert agent.stdout is not None
    lines = iter(agent.stdout.readline, "")
    child = int(next(line for line in lines if line.strip().isdigit()))  # the child logs there too
    try:
        assert not gone(child)
        agent.kill()
        agent.wait(timeout=10)
        deadline = time.monotonic() + 30
        while not gone(child):
            assert time.monotonic() < deadline, "the describe worker outlived the agent"
            time.sleep(0.05)
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)


def test_a_terminals_ctrl_c_is_the_agents_not_the_childs() -> None:
    # Ctrl-C in a terminal sends SIGINT to the whole foreground process group. The agent stops on it (its
    # handler); the child, blocked reading the pipe, printed a KeyboardInterrupt traceback and died.
    import subprocess
    import sys

    code = (
        "import signal, sys\n"
        "from rackplan.agent.kafka.isolated_admin import GroupDescribeWorker\n"
        "from rackplan.agent.core.logging import get_logger\n"
        "signal.signal(signal.SIGINT, lambda *a: print('agent stops', flush=True))\n"
        f"w = GroupDescribeWorker({{'bootstrap.servers': '127.0.0.1:{closed_port()}'}}, get_logger('t'))\n"
        "w.describe(['g1'], 1.0)\n"
        "print(w.pid, flush=True)\n"
        "sys.stdin.read()\n"
        "w.describe(['g1'], 1.0)\n"
        "print('deaths', w.died, flush=True)\n"
        "w.close()\n"
    )
    agent = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    assert agent.stdout is not None and agent.stdin is not None
    lines = iter(agent.stdout.readline, "")
    child = int(next(line for line in lines if line.strip().isdigit()))
    try:
        os.killpg(agent.pid, signal.SIGINT)
        assert next(line for line in lines if "agent stops" in line)
        time.sleep(1.0)  # the old child was dead by then
        assert not gone(child), "the describe worker died of the Ctrl-C meant for the agent"
        out, err = agent.communicate("", timeout=60)
    finally:
        agent.kill()
        if not gone(child):
            os.kill(child, signal.SIGKILL)
    assert "deaths []" in out, out  # the same child answered the next call
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert agent.returncode == 0, err


def test_committed_offsets_come_from_the_child_as_the_client_would_give_them(
    mock: EmbeddedCluster, log: io.StringIO
) -> None:
    """ListConsumerGroupOffsets is coordinator-targeted too (librdkafka#4605's path): the agent asks the child
    and gets what the in-process client gets.  (librdkafka's mock answers a whole-group OffsetFetch with no
    partitions, so the offsets themselves crossing the pipe are shown by ``_committed`` below and, on real
    Kafka, by integration/test_kafka_traffic.py's group-behind test, which reads them through this child.)"""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    mock.create_topic("orders", 3, 1)
    config: dict[str, str | int | float | bool] = {"bootstrap.servers": mock.bootstrap_servers}
    consumer = Consumer({**config, "group.id": "readers", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("orders", 0, 7)], asynchronous=False)
    finally:
        consumer.close()
    request = [ConsumerGroupTopicPartitions("readers")]
    client = AdminClient(config)  # kept: a collected client never resolves its futures
    direct = client.list_consumer_group_offsets(request, request_timeout=5)
    answer = direct["readers"].result(timeout=15)
    expected = {(tp.topic, tp.partition, tp.offset) for tp in answer.topic_partitions or []}
    admin = isolated_admin(config, get_logger("t"), log_format="json", log_level="info")
    try:
        via_child = admin.list_consumer_group_offsets(request, request_timeout=5)
        got = via_child["readers"].result(timeout=0)  # resolved when the call returned
        assert isinstance(got, ConsumerGroupTopicPartitions) and got.group_id == "readers"
        assert {(tp.topic, tp.partition, tp.offset) for tp in got.topic_partitions or []} == expected
        assert admin.worker.pid is not None
    finally:
        admin.close()


def test_the_childs_answer_keeps_committed_partitions_and_drops_failed_ones() -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError

    from rackplan.agent.kafka.isolated_admin import _committed

    class Part:  # confluent-kafka's TopicPartition, whose error cannot be set from Python
        def __init__(self, topic: str, partition: int, offset: int, error: Any = None) -> None:
            self.topic, self.partition, self.offset, self.error = topic, partition, offset, error

    class Admin:
        def list_consumer_group_offsets(self, requests: list[Any], **_kw: Any) -> dict[str, Any]:
            from concurrent.futures import Future

            (req,) = requests
            f: Future[Any] = Future()
            if req.group_id == "gone":
                f.set_exception(KafkaException(KafkaError(KafkaError.GROUP_ID_NOT_FOUND)))
            else:
                failed = Part("orders", 1, -1, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
                tps = [Part("orders", 0, 7), failed, Part("audit", 2, 3)]
                f.set_result(ConsumerGroupTopicPartitions(req.group_id, tps))  # type: ignore[arg-type]
            return {req.group_id: f}

    _register_reducers()
    answer = pickle.loads(pickle.dumps(_committed(Admin(), ["readers", "gone"], 1.0)))
    assert answer["readers"] == (True, [("orders", 0, 7), ("audit", 2, 3)])
    ok, err = answer["gone"]
    assert not ok and error_name(err) == "GROUP_ID_NOT_FOUND"


def test_an_abort_while_reading_committed_offsets_fails_that_call_only(log: io.StringIO) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    worker = GroupDescribeWorker({"bootstrap.servers": f"127.0.0.1:{closed_port()}"}, get_logger("t"))
    admin = IsolatedGroupsAdmin(admin=None, worker=worker)  # type: ignore[arg-type]
    result: dict[str, Any] = {}
    request = [ConsumerGroupTopicPartitions("g1")]
    caller = threading.Thread(
        target=lambda: result.update(admin.list_consumer_group_offsets(request, request_timeout=20))
    )
    caller.start()
    try:
        deadline = time.monotonic() + 20
        while worker.pid is None:
            assert time.monotonic() < deadline, "no child started"
            time.sleep(0.01)
        os.kill(worker.pid, signal.SIGABRT)
        caller.join(30)
        assert not caller.is_alive()
        with pytest.raises(DescribeWorkerDied, match="SIGABRT"):
            result["g1"].result(timeout=0)
        assert worker.died == ["SIGABRT"]
    finally:
        admin.close()


def test_the_child_logs_where_the_agent_logs_not_on_its_stdout(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``rackplan demo`` logs to a file and tells its story on stdout: the child's librdkafka lines (its
    AdminClient is ``rdkafka#producer-1``) went to the inherited stdout, into the story (CI, stop 38's
    run).  Now the child's stdout is the agent's log stream."""
    path = tmp_path / "agent.log"
    with path.open("w", encoding="utf-8") as stream:
        configure("json", "info", stream=stream)
        config: dict[str, str | int | float | bool] = {"bootstrap.servers": f"127.0.0.1:{closed_port()}"}
        admin = isolated_admin(config, get_logger("t"), log_format="json", log_level="info")
        try:
            got = admin.describe_consumer_groups(["g"], request_timeout=2)
            with pytest.raises(KafkaException):
                got["g"].result(timeout=0)
        finally:
            admin.close()
    child = [
        e
        for e in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
        if e.get("logger") == "rackplan.librdkafka" and "Connection refused" in e["event"]
    ]
    assert child, path.read_text(encoding="utf-8")
    assert "Connection refused" not in capfd.readouterr().out
