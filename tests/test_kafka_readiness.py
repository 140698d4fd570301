"""integration/kafka/readiness.py: the launcher's cluster is judged ready by what it answers, not by its logs."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from integration.kafka.readiness import api_versions_answer, internal_topics_without_leader, judge


@contextmanager
def fake_broker(answer: bytes | None) -> Iterator[int]:
    """A listener that reads one request and writes ``answer`` (None: accepts, never answers)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            seen.append(conn.recv(size))
            if answer is not None:
                conn.sendall(struct.pack(">i", len(answer)) + answer)
            else:
                conn.recv(1)  # until the client gives up

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()
        t.join(5)
    assert seen and struct.unpack(">hh", seen[0][:4]) == (18, 0)  # ApiVersions v0 was asked


def test_a_broker_that_answers_api_versions_serves() -> None:
    with fake_broker(struct.pack(">ihi", 1, 0, 0)) as port:
        assert api_versions_answer("127.0.0.1", port)


def test_an_error_or_no_answer_is_not_serving() -> None:
    with fake_broker(struct.pack(">ihi", 1, 35, 0)) as port:  # UNSUPPORTED_VERSION
        assert not api_versions_answer("127.0.0.1", port)
    with fake_broker(None) as port:
        assert not api_versions_answer("127.0.0.1", port, timeout=0.5)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    assert not api_versions_answer("127.0.0.1", port)


def metadata(brokers: list[int], leaders: dict[str, list[int]]) -> Any:
    topics = {
        name: SimpleNamespace(partitions={p: SimpleNamespace(leader=lead) for p, lead in enumerate(ls)})
        for name, ls in leaders.items()
    }
    return SimpleNamespace(brokers={b: object() for b in brokers}, topics=topics)


def test_internal_partitions_need_a_live_leader() -> None:
    md = metadata([1, 2], {"__consumer_offsets": [1, -1, 3], "orders": [-1], "__transaction_state": [2]})
    # -1: no leader; 3: a leader that is not registered; an ordinary topic is not the launcher's business
    assert internal_topics_without_leader(md, [1, 2]) == ["__consumer_offsets-1", "__consumer_offsets-2"]


@pytest.fixture
def serving() -> Iterator[dict[str, tuple[str, int]]]:
    with fake_broker(struct.pack(">ihi", 1, 0, 0)) as port:
        yield {"kafka-1": ("127.0.0.1", port)}


class Admin:
    def __init__(self, md: Any) -> None:
        self.md = md

    def list_topics(self, timeout: float) -> Any:
        return self.md


def test_ready_when_every_expected_broker_is_registered_and_internal_topics_have_leaders(
    serving: dict[str, tuple[str, int]],
) -> None:
    # No log file is read: a rolled-over log cannot make a serving cluster "not ready".
    r = judge(lambda: Admin(metadata([1, 2], {"__consumer_offsets": [1, 2]})), serving, expect=[1, 2])
    assert r.ready and r.brokers == {1, 2}


def test_not_ready_names_what_is_missing(serving: dict[str, tuple[str, int]]) -> None:
    r = judge(lambda: Admin(metadata([1], {"__consumer_offsets": [1, 2]})), serving, expect=[1, 2])
    assert not r.ready
    assert r.why_not == ("brokers [2] not registered (or fenced)", "no leader for __consumer_offsets-1")


def test_a_node_that_does_not_serve_yet_is_named_and_no_client_is_made() -> None:
    made: list[int] = []

    def admin() -> Any:
        made.append(1)
        raise AssertionError("no client before every node serves")

    with fake_broker(None) as port:
        r = judge(admin, {"kafka-3": ("127.0.0.1", port)}, expect=[3], timeout=0.5)
    assert not r.ready and r.why_not[0].startswith("kafka-3 does not answer ApiVersions") and not made
