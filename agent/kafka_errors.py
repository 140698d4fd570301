"""The name of a Kafka error, however confluent-kafka hands it over: one helper for every module.

confluent-kafka reports an error as a ``KafkaError`` (a metadata entry, a
message, a callback) or raises a ``KafkaException`` whose first argument is
one.  Retry and fence decisions compare names (``"UNKNOWN_TOPIC_OR_PART"``),
so every module reads them the same way.
"""

from __future__ import annotations


def error_name(err: object, default: str | None = None) -> str:
    """The ``KafkaError`` name of ``err``: a ``KafkaError``, or an exception whose first argument is one.

    Anything else gives ``default``, or when that is None the text of the
    error itself; ``None`` (no error) gives ``""``.
    """
    if err is None:
        return ""
    inner = err.args[0] if isinstance(err, BaseException) and err.args else err
    name = getattr(inner, "name", None)
    if callable(name):
        return str(name())
    return str(inner) if default is None else default
