"""An embedded multi-rack Kafka cluster: librdkafka's mock cluster, driven through ctypes.

The confluent-kafka wheel bundles librdkafka, whose mock cluster speaks enough
of the Kafka protocol for the agent (Metadata, DescribeCluster with racks,
Produce, Fetch, ListOffsets, idempotent producer) on free loopback ports.  It
lacks CreateTopics, DescribeConfigs and DescribeGroups, so topics are created
here with ``rd_kafka_mock_topic_create``.  Decommissioning a broker makes the
mock reassign every partition's replicas over the remaining brokers: a real
change of replica rack sets, which is what the agent must detect.

The mock API is experimental in librdkafka (no ABI promise), so every symbol
is bound with an explicit signature and looked up once; a missing symbol fails
with a clear :class:`EmbeddedClusterError` instead of a crash.

The handle hosting the mock logs through a ctypes log callback into the
agent's structlog pipeline (``client="embedded-cluster"``), like every other
librdkafka client.  librdkafka calls it from its own threads, so the
callback never raises, and clusters still open at interpreter exit are
closed by an ``atexit`` hook before Python tears down.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import logging
import os
import string
import threading
import weakref
from collections.abc import Mapping, Sequence
from ctypes.util import find_library
from types import TracebackType
from typing import Any

from ..core.errors import AgentError
from ..core.logging import kafka_logger, log_librdkafka

_RD_KAFKA_PRODUCER = 0
_ERRSTR_SIZE = 512
CLIENT_NAME = "embedded-cluster"
GROUP_INITIAL_REBALANCE_DELAY_MS = 100

#: void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
_LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)


def _on_log(_rk: int | None, level: int, fac: bytes | None, buf: bytes | None) -> None:
    # Never let an exception cross into librdkafka's thread.
    with contextlib.suppress(BaseException):
        log_librdkafka(
            level,
            (fac or b"").decode(errors="replace"),
            CLIENT_NAME,
            (buf or b"").decode(errors="replace"),
        )


#: one callback object for the process, alive as long as the module (librdkafka keeps a raw pointer)
_log_cb = _LOG_CB(_on_log)
_open: weakref.WeakSet[EmbeddedCluster] = weakref.WeakSet()


@atexit.register
def _close_open_clusters() -> None:
    for cluster in list(_open):
        cluster.close()


class EmbeddedClusterError(AgentError, RuntimeError):
    """The mock cluster could not be loaded, created or changed."""


def _library_candidates() -> list[str]:
    """Paths of the librdkafka that confluent-kafka itself loads, then a system one."""
    import confluent_kafka

    pkg = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    site = os.path.dirname(pkg)
    patterns = [
        os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),  # manylinux wheels
        os.path.join(pkg, ".dylibs", "librdkafka*.dylib"),  # macOS wheels
        os.path.join(site, "confluent_kafka.libs", "*rdkafka*.dll"),  # Windows wheels
    ]
    found = [p for pat in patterns for p in sorted(glob.glob(pat))]
    system = find_library("rdkafka")
    if system:
        found.append(system)
    return found


_lib_lock = threading.Lock()
_lib: Any = None


def load_librdkafka() -> Any:
    """The bundled librdkafka with the mock-cluster functions bound; loaded once per process."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        candidates = _library_candidates()
        if not candidates:
            raise EmbeddedClusterError("librdkafka not found (is confluent-kafka installed from a wheel?)")
        lib = ctypes.CDLL(candidates[0])
        vp, i32, cp = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
        signatures: dict[str, tuple[Any, list[Any]]] = {
            "rd_kafka_conf_new": (vp, []),
            "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
            "rd_kafka_conf_set_log_cb": (None, [vp, _LOG_CB]),
            "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
            "rd_kafka_destroy": (None, [vp]),
            "rd_kafka_mock_cluster_new": (vp, [vp, ctypes.c_int]),
            "rd_kafka_mock_cluster_destroy": (None, [vp]),
            "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
            "rd_kafka_mock_broker_set_rack": (ctypes.c_int, [vp, i32, cp]),
            "rd_kafka_mock_set_controller_id": (None, [vp, i32]),
            "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
            "rd_kafka_mock_broker_decommission": (ctypes.c_int, [vp, i32]),
            "rd_kafka_mock_broker_set_down": (ctypes.c_int, [vp, i32]),
            "rd_kafka_mock_broker_set_up": (ctypes.c_int, [vp, i32]),
            "rd_kafka_err2str": (cp, [ctypes.c_int]),
        }
        for name, (restype, argtypes) in signatures.items():
            try:
                fn = getattr(lib, name)
            except AttributeError as e:
                raise EmbeddedClusterError(f"{candidates[0]} lacks {name}; librdkafka too old?") from e
            fn.restype = restype
            fn.argtypes = argtypes
        # Optional: older librdkafka lacks it, and the cluster works without it (groups just form slower).
        delay = getattr(lib, "rd_kafka_mock_group_initial_rebalance_delay_ms", None)
        if delay is not None:
            delay.restype = None
            delay.argtypes = [vp, i32]
        # Optional: a slow broker (tests of publishes that time out and land later).
        rtt = getattr(lib, "rd_kafka_mock_broker_set_rtt", None)
        if rtt is not None:
            rtt.restype = ctypes.c_int
            rtt.argtypes = [vp, i32, ctypes.c_int]
        # Optional: a topic that metadata requests answer with an error (UNKNOWN_TOPIC_OR_PART: a topic
        # created a moment ago, not yet known to the broker asked).
        topic_error = getattr(lib, "rd_kafka_mock_topic_set_error", None)
        if topic_error is not None:
            topic_error.restype = None
            topic_error.argtypes = [vp, cp, ctypes.c_int]
        _lib = lib
        return lib


def rack_names(count: int) -> tuple[str, ...]:
    """``az-a``, ``az-b``, ...: readable default rack ids."""
    if not 1 <= count <= len(string.ascii_lowercase):
        raise ValueError(f"racks must be between 1 and 26, got {count}")
    return tuple(f"az-{c}" for c in string.ascii_lowercase[:count])


class EmbeddedCluster:
    """A mock Kafka cluster with ``brokers_per_rack`` brokers in each rack.

    Broker ids start at 1 and fill racks in order: with 2 brokers per rack,
    brokers 1-2 are in the first rack, 3-4 in the second, and so on.  Use as a
    context manager, or call :meth:`close`.
    """

    def __init__(self, brokers_per_rack: int = 2, racks: int | Sequence[str] = 3) -> None:
        if brokers_per_rack < 1:
            raise ValueError(f"brokers_per_rack must be at least 1, got {brokers_per_rack}")
        names = rack_names(racks) if isinstance(racks, int) else tuple(racks)
        if not names or len(set(names)) != len(names):
            raise ValueError("racks must be non-empty and distinct")
        self._lib = load_librdkafka()
        self._lock = threading.Lock()
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = self._lib.rd_kafka_conf_new()
        # The handle only hosts the mock cluster: its lines go through structlog, warnings and up,
        # or with the mock's own debug lines when the librdkafka logger is at debug.
        debug = kafka_logger().isEnabledFor(logging.DEBUG)
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"7" if debug else b"4", errstr, _ERRSTR_SIZE)
        if debug:
            self._lib.rd_kafka_conf_set(conf, b"debug", b"mock", errstr, _ERRSTR_SIZE)
        self._lib.rd_kafka_conf_set_log_cb(conf, _log_cb)
        rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            raise EmbeddedClusterError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
        self._rk: int | None = rk
        count = brokers_per_rack * len(names)
        mc = self._lib.rd_kafka_mock_cluster_new(rk, count)
        if not mc:
            self._lib.rd_kafka_destroy(rk)
            self._rk = None
            raise EmbeddedClusterError("rd_kafka_mock_cluster_new failed")
        self._mc: int | None = mc
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
        self._racks: dict[int, str] = {}
        for i in range(count):
            broker_id = i + 1
            rack = names[i // brokers_per_rack]
            self._check(self._lib.rd_kafka_mock_broker_set_rack(mc, broker_id, rack.encode()), "set rack")
            self._racks[broker_id] = rack
        # DescribeCluster and DescribeTopics need a controller to answer.
        self._lib.rd_kafka_mock_set_controller_id(mc, 1)
        # Consumer groups form in a fraction of a second instead of the broker default of 3 s.
        delay = getattr(self._lib, "rd_kafka_mock_group_initial_rebalance_delay_ms", None)
        if delay is not None and delay.argtypes:
            delay(mc, GROUP_INITIAL_REBALANCE_DELAY_MS)
        _open.add(self)

    @property
    def broker_racks(self) -> Mapping[int, str]:
        """Live brokers and their racks."""
        return dict(self._racks)

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            msg = self._lib.rd_kafka_err2str(err).decode(errors="replace")
            raise EmbeddedClusterError(f"{what}: {msg} (error {err})")

    def _handle(self) -> int:
        if self._mc is None:
            raise EmbeddedClusterError("the embedded cluster is closed")
        return self._mc

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        """Create a topic directly in the mock (it has no CreateTopics API)."""
        if replication_factor > len(self._racks):
            raise EmbeddedClusterError(
                f"replication factor {replication_factor} exceeds {len(self._racks)} live brokers"
            )
        with self._lock:
            err = self._lib.rd_kafka_mock_topic_create(
                self._handle(), name.encode(), partitions, replication_factor
            )
        self._check(err, f"create topic {name!r}")

    def decommission(self, broker_id: int) -> None:
        """Remove a broker; the mock reassigns every partition over the remaining brokers."""
        if broker_id not in self._racks:
            raise EmbeddedClusterError(f"no live broker {broker_id}")
        with self._lock:
            err = self._lib.rd_kafka_mock_broker_decommission(self._handle(), broker_id)
            self._check(err, f"decommission broker {broker_id}")
            del self._racks[broker_id]
            if broker_id == 1 and self._racks:
                self._lib.rd_kafka_mock_set_controller_id(self._handle(), min(self._racks))

    def set_down(self, broker_id: int) -> None:
        """Refuse connections to one broker (-1: all); leadership does not move."""
        with self._lock:
            self._check(self._lib.rd_kafka_mock_broker_set_down(self._handle(), broker_id), "set down")

    def set_up(self, broker_id: int) -> None:
        """Accept connections again (-1: all)."""
        with self._lock:
            self._check(self._lib.rd_kafka_mock_broker_set_up(self._handle(), broker_id), "set up")

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of one broker (-1: all) by ``rtt_ms``; 0 restores it."""
        fn = getattr(self._lib, "rd_kafka_mock_broker_set_rtt", None)
        if fn is None or not fn.argtypes:
            raise EmbeddedClusterError("this librdkafka lacks rd_kafka_mock_broker_set_rtt")
        with self._lock:
            self._check(fn(self._handle(), broker_id, rtt_ms), "set rtt")

    def set_group_rebalance_delay(self, delay_ms: int) -> None:
        """How long the coordinator holds a new group's first JoinGroup answers (100 ms by default here)."""
        fn = getattr(self._lib, "rd_kafka_mock_group_initial_rebalance_delay_ms", None)
        if fn is None or not fn.argtypes:
            raise EmbeddedClusterError("this librdkafka lacks rd_kafka_mock_group_initial_rebalance_delay_ms")
        with self._lock:
            fn(self._handle(), delay_ms)

    def set_topic_error(self, name: str, err: int) -> None:
        """Answer metadata requests about topic ``name`` with Kafka error code ``err`` (0 clears it)."""
        fn = getattr(self._lib, "rd_kafka_mock_topic_set_error", None)
        if fn is None or not fn.argtypes:
            raise EmbeddedClusterError("this librdkafka lacks rd_kafka_mock_topic_set_error")
        with self._lock:
            fn(self._handle(), name.encode(), err)

    def close(self) -> None:
        """Stop the brokers and free the handle; idempotent."""
        with self._lock:
            if self._mc is not None:
                self._lib.rd_kafka_mock_cluster_destroy(self._mc)
                self._mc = None
            if self._rk is not None:
                self._lib.rd_kafka_destroy(self._rk)
                self._rk = None

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
