"""Admin operations outlive their requests (librdkafka#4605: an operation timing out first can abort)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rackplan.agent.kafka.timeouts import (
    admin_client_config,
    operation_timeout_s,
    result_timeout_s,
)


@given(
    request_timeout_s=st.floats(min_value=0.05, max_value=600),
    user_socket_ms=st.none() | st.integers(min_value=10, max_value=300_000),
)
def test_every_request_ends_before_its_operation(
    request_timeout_s: float, user_socket_ms: int | None
) -> None:
    config = {"bootstrap.servers": "b:9092"} | (
        {} if user_socket_ms is None else {"socket.timeout.ms": user_socket_ms}
    )
    out = admin_client_config(config, request_timeout_s)
    socket_s = out["socket.timeout.ms"] / 1000
    assert 10 <= out["socket.timeout.ms"] <= 300_000  # librdkafka's bounds
    # A request is failed by the broker thread's once-a-second scan after socket.timeout.ms at the latest.
    assert socket_s + 1.0 < operation_timeout_s(request_timeout_s)
    assert operation_timeout_s(request_timeout_s) < result_timeout_s(request_timeout_s)
    if user_socket_ms is not None:
        assert out["socket.timeout.ms"] <= user_socket_ms  # a user's shorter timeout is kept
    assert config.get("socket.timeout.ms") == user_socket_ms  # the input is not changed
    assert out["bootstrap.servers"] == "b:9092"


@given(st.sampled_from(["abc", "1.5", -5, "-5", 0, 300_001, True, "", " 12x"]))
def test_a_value_librdkafka_refuses_is_passed_on_for_it_to_refuse(value: object) -> None:
    """Not read with ``int()`` here (a message naming no setting) nor clamped into range (``-5`` quietly
    became 10 ms): librdkafka refuses it, and the agent names ``kafka.config`` (found by an adversarial hunt)."""
    out = admin_client_config({"socket.timeout.ms": value}, 15.0)
    assert out["socket.timeout.ms"] is value


def test_a_whole_number_given_as_text_is_capped_too() -> None:
    assert admin_client_config({"socket.timeout.ms": "120000"}, 15.0)["socket.timeout.ms"] == 15_000
    assert admin_client_config({"socket.timeout.ms": " 900 "}, 15.0)["socket.timeout.ms"] == 900
