"""The agent's exceptions, from one base: catch :class:`AgentError` for anything the agent raised on purpose.

Like httpx's ``_exceptions.py``, the hierarchy is written down in one place; each exception lives
beside the code that raises it and derives from :class:`AgentError` (and, where callers already catch
it so, from ``ValueError`` or ``RuntimeError``)::

    AgentError
    ├── CannotRun                   the agent cannot run as configured: exit 2 (plan topic missing,
    │                               another agent writes, a port taken, a counter exhausted...)
    ├── protocol: RecordError (RegistrationRecordError), PlanDecodeError, HeartbeatError
    │                               a control-topic record skipped, with its reason
    ├── settings: SettingsError, HeaderValueError; follower: FollowerError
    │                               bad settings: one line naming the field
    ├── kafka: PublishError         a record not confirmed
    │   ├── DeliveryUncertain, PlanTooLargeError, TopicReadError
    │   └── ha: LeaseUnconfirmed; runtime: StartupTimedOut
    ├── kafka: ProducerFenced, DescribeWorkerDied, EmbeddedClusterError
    ├── ha: LeaseLost; runtime: StartupStopped
    ├── cluster: MetadataError, SnapshotError
    ├── planning: PlanSkipped
    └── alerts: WebhookError, HeaderFileError

A bug (an ``AssertionError``, a ``TypeError``) is never an :class:`AgentError`.
``tests/agent/core/test_errors.py`` checks that every exception class the agent defines derives from it.
"""

from __future__ import annotations


class AgentError(Exception):
    """Base of every exception the agent raises on purpose."""


class CannotRun(AgentError, RuntimeError):
    """The agent cannot run (e.g. its plan topic does not exist and cannot be created)."""
