#!/usr/bin/env bash
# The integration suite as `make test` runs it (integration/README.md, "A native crash").
#
# librdkafka 2.16 can abort the whole Python process from inside an admin operation while a
# broker is killed or restarted (confluentinc/librdkafka#4605, rd_kafka_enq_once_del_source_return).
# The agent in production runs under its supervisor, which restarts it (tests/test_agent_supervisor.py);
# the suite runs agents in-process, where the abort takes pytest down with it. So: a run that dies
# of a signal (exit status > 128; pytest's own failures are 1-5) is reported as such and the suite
# runs once more from the start. A failing test is never retried: it fails the build.
set -u
pytest="$1"; shift
"$pytest" "$@"
rc=$?
if [ "$rc" -gt 128 ]; then
  echo "integration: pytest died of signal $((rc - 128)) (a native crash, not a test failure); running the suite once more" >&2
  "$pytest" "$@"
  rc=$?
fi
exit "$rc"
