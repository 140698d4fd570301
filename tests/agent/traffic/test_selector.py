"""The replica selector check: every broker asked (DescribeConfigs), the verdict, retries, refusals said once."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import structlog
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from rackplan.agent.settings.traffic import TrafficSettings
from rackplan.agent.testing import FakeAdmin, done, kafka_error
from rackplan.agent.traffic.selector import RACK_AWARE, SETTING, SelectorCheck, judged_mode, verdict


@dataclass(frozen=True)
class Entry:
    value: str | None


@dataclass
class SelectorAdmin(FakeAdmin):
    """A FakeAdmin whose brokers answer DescribeConfigs: broker id -> its ``replica.selector.class`` (None:
    unset), or a ``KafkaError`` code it fails with; brokers not listed fail UNSUPPORTED_FEATURE."""

    selectors: dict[int, str | int | None] = field(default_factory=dict)
    #: how many times each broker failed before it answers (transient failures)
    flaky: dict[int, int] = field(default_factory=dict)
    asked: list[list[str]] = field(default_factory=list)

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        self.asked.append([r.name for r in resources])
        out: dict[Any, Future[Any]] = {}
        for r in resources:
            b = int(r.name)
            said = self.selectors.get(b, KafkaError._UNSUPPORTED_FEATURE)
            if self.flaky.get(b, 0) > 0:
                self.flaky[b] -= 1
                said = KafkaError._TRANSPORT
            if isinstance(said, int):
                out[r] = kafka_error(said)
            else:
                out[r] = done({SETTING: Entry(said), "broker.rack": Entry("az-a")})
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def check(admin: FakeAdmin, clock: Clock, slept: list[float] | None = None, **settings: Any) -> SelectorCheck:
    s = TrafficSettings.model_validate({"replica_selector_check_s": 60, **settings})
    naps = [] if slept is None else slept
    return SelectorCheck(admin, s, structlog.get_logger(), clock=clock, sleep=naps.append)


def test_every_broker_is_asked_on_its_own_and_the_verdict_follows_their_answers() -> None:
    admin = SelectorAdmin({}, selectors=dict.fromkeys((1, 2, 3), RACK_AWARE))
    c = check(admin, Clock())
    r = c.check([1, 2, 3])
    assert r is not None and r.state == "rack-aware"
    assert sorted(admin.asked) == [["1"], ["2"], ["3"]]  # one BROKER resource per request
    assert r.as_json()["brokers"]["2"] == {"replica_selector_class": RACK_AWARE}
    admin.selectors[2] = None  # broker 2 restarted without the setting
    c.clock.now = 60.0  # type: ignore[attr-defined]
    r = c.check([1, 2, 3])
    assert r is not None and r.state == "absent" and r.lacking() == [2]


def test_brokers_that_refuse_give_unknown_said_once_never_a_crash() -> None:
    admin = SelectorAdmin({}, selectors={1: KafkaError.CLUSTER_AUTHORIZATION_FAILED, 2: RACK_AWARE})
    clock = Clock()
    slept: list[float] = []
    c = check(admin, clock, slept)
    with structlog.testing.capture_logs() as logs:
        for step in range(4):
            clock.now = 60.0 * step
            r = c.check([1, 2, 3])  # 3 is not listed: unsupported
            assert r is not None and r.state == "unknown"
            assert dict(r.failed) == {1: "CLUSTER_AUTHORIZATION_FAILED", 3: "_UNSUPPORTED_FEATURE"}
    said = [e for e in logs if "cannot tell" in e["event"]]
    assert len(said) == 1 and said[0]["log_level"] == "info"
    assert slept == []  # refusals are not transient: never asked again within a check
    assert len(admin.asked) == 4 * 3


def test_transient_failures_are_asked_again_with_backoff_within_the_check() -> None:
    admin = SelectorAdmin({}, selectors=dict.fromkeys((1, 2), RACK_AWARE), flaky={2: 2})
    slept: list[float] = []
    r = check(admin, Clock(), slept, replica_selector_attempts=3).check([1, 2])
    assert r is not None and r.state == "rack-aware"
    assert len(slept) == 2 and admin.asked.count(["2"]) == 3 and admin.asked.count(["1"]) == 1


def test_a_broker_silent_at_a_later_check_keeps_its_last_answer() -> None:
    admin = SelectorAdmin({}, selectors={1: RACK_AWARE, 2: None})
    clock = Clock()
    c = check(admin, clock, replica_selector_attempts=1)
    with structlog.testing.capture_logs() as logs:
        assert (r := c.check([1, 2])) is not None and r.state == "absent"
        admin.selectors[2] = KafkaError._TRANSPORT
        clock.now = 60.0
        assert (r := c.check([1, 2])) is not None and r.state == "absent" and r.values[2] is None
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1 and warned[0]["brokers"] == [2] and RACK_AWARE in warned[0]["fix"]


def test_asked_again_only_when_due_or_for_a_new_broker() -> None:
    admin = SelectorAdmin({}, selectors=dict.fromkeys((1, 2, 3), RACK_AWARE))
    clock = Clock()
    c = check(admin, clock)
    c.check([1, 2])
    clock.now = 30.0
    c.check([1, 2])
    assert len(admin.asked) == 2  # not due
    c.check([1, 2, 3])
    assert len(admin.asked) == 5  # a broker not asked before: every broker asked at once
    assert check(admin, clock, replica_selector_check_s=0).check([1]) is None  # 0: never asked


def test_the_default_fake_admin_is_unknown() -> None:
    r = check(FakeAdmin({}), Clock()).check([1, 2, 3])
    assert r is not None and r.state == "unknown" and r.values == {}


answers = st.dictionaries(
    st.integers(0, 6), st.sampled_from([RACK_AWARE, None, "com.example.Selector"]), max_size=6
)


@given(answers, st.dictionaries(st.integers(7, 9), st.sampled_from(["_TRANSPORT", "_UNSUPPORTED_FEATURE"])))
def test_verdict_is_absent_when_any_broker_lacks_it_rack_aware_only_when_every_one_has_it(
    values: dict[int, str | None], failed: dict[int, str]
) -> None:
    state = verdict(values, failed)
    lacking = any(v != RACK_AWARE for v in values.values())
    assert (state == "absent") == lacking
    assert (state == "rack-aware") == (bool(values) and not lacking and not failed)
    assert judged_mode("nearest-replica", state) == ("leader" if lacking else "nearest-replica")
    assert judged_mode("leader", state) == "leader"
