"""The exposition through prometheus_client: the same samples as the hand-written one, OpenMetrics and gzip."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from rackplan.agent.metrics import declared
from rackplan.agent.metrics.declared import DECLARED
from rackplan.agent.metrics.exposition import Exposition
from rackplan.agent.metrics.process_stats import PROCESS_METRICS
from rackplan.agent.metrics.registry import Metrics
from tests.agent.metrics.scenario import comparable, populate

HERE = Path(__file__).parent
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT = "text/plain; version=0.0.4; charset=utf-8"
#: what Prometheus 2.x and 3.x send when scraping (OpenMetrics first)
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
CLUSTERS = ((None, "exposition_before.txt"), ('eu "1"', "exposition_before_cluster.txt"))

Samples = set[tuple[str, frozenset[tuple[str, str]], float]]


def text_samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items()), float(s.value)) for f in parse_text(text) for s in f.samples
    }


def openmetrics_samples(text: str) -> Samples:
    """Samples of an OpenMetrics exposition by prometheus_client's strict parser (``# EOF``, suffixes, ...)."""
    families = parse_openmetrics(text)  # type: ignore[no-untyped-call]
    return {(s.name, frozenset(s.labels.items()), float(s.value)) for f in families for s in f.samples}


def family_types(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))


def test_every_sample_of_the_hand_written_exposition_is_exposed_unchanged() -> None:
    """Same names, labels (escaping included) and values as the agent's own writer had (its output kept in
    exposition_before*.txt), with and without the cluster label; prometheus_client's parser reads both.
    Metrics declared later add samples: only the old ones must all be there."""
    for cluster, before in CLUSTERS:
        old = text_samples((HERE / before).read_text(encoding="utf-8"))
        text = comparable(populate(Metrics(cluster=cluster)).render())
        new = text_samples(text)
        assert len(old) == 123 and old <= new, sorted(old - new)
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        assert len(lines) == len(new), "no sample twice"


def test_family_names_and_types_are_those_dashboards_and_rules_use() -> None:
    """Every family the agent exposed before (its own, build info, the process's) keeps its name and type."""
    old = family_types((HERE / "exposition_before.txt").read_text(encoding="utf-8"))
    old |= {declared.BUILD_INFO.name: "gauge"} | {n: t for n, (t, _) in PROCESS_METRICS.items()}
    new = family_types(Metrics().render())
    assert len(old) == 57 and {n: new.get(n) for n in old} == old
    assert set(new) - set(old) <= {m.name for m in DECLARED}, "only newly declared metrics are new"


def test_openmetrics_when_asked_with_the_same_samples() -> None:
    m = populate(Metrics(cluster="eu-1"))
    text = m.exposition()
    om = m.exposition(PROMETHEUS_ACCEPT)
    assert text.content_type == TEXT and om.content_type.startswith(OPENMETRICS)
    assert m.exposition("application/openmetrics-text").content_type == OPENMETRICS
    assert m.exposition("text/plain").content_type == TEXT
    assert m.exposition("application/json").content_type == TEXT
    body = om.body.decode()
    assert body.endswith("\n# EOF\n") and not text.body.decode().endswith("# EOF\n")
    assert "# TYPE rackplan_polls counter\n" in body and "\nrackplan_polls_total{" in body
    # the same samples in both formats, read by two parsers (process metrics move between the two calls)
    assert openmetrics_samples(comparable(body)) == text_samples(comparable(text.body.decode()))


def test_gzip_when_accepted_and_only_then() -> None:
    m = populate(Metrics())
    plain = m.exposition(None, None)
    for accept_encoding in ("gzip", "br, gzip;q=0.8", "GZIP"):
        packed = m.exposition(None, accept_encoding)
        assert packed.content_encoding == "gzip" and packed.content_type == TEXT
        assert comparable(gzip.decompress(packed.body).decode()) == comparable(plain.body.decode())
        assert len(packed.body) < len(plain.body) / 2  # mostly repeated HELP texts: 4x smaller here
    assert plain.content_encoding is None and m.exposition(None, "br, identity").content_encoding is None
    om = m.exposition("application/openmetrics-text", "gzip")
    assert om.content_encoding == "gzip" and gzip.decompress(om.body).endswith(b"# EOF\n")
    assert isinstance(om, Exposition)


def test_gzip_refused_with_q_0_is_not_sent() -> None:
    # RFC 9110 (12.5.3): "gzip;q=0" says gzip is not acceptable; prometheus_client's gzip_accepted reads only
    # the coding's name, so such a client got a body it had refused and could not read.
    m = populate(Metrics())
    for refused in ("gzip;q=0", "gzip; q=0.0", "identity, GZIP ; Q=0", "gzip;q=0.000"):
        assert m.exposition(None, refused).content_encoding is None, refused
    for accepted in ("gzip;q=0.001", "gzip;q=1", "gzip ;q=0.5, br"):
        assert m.exposition(None, accepted).content_encoding == "gzip", accepted


@settings(max_examples=300, deadline=None)  # no timed assertion: the machine is shared
@given(st.text(min_size=1, max_size=30), st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_any_group_name_and_value_round_trip_through_both_formats(group: str, value: float) -> None:
    """Label values are escaped as each format wants: both parsers read back exactly what was set."""
    m = Metrics(process=False, cluster="c")
    m.set(declared.CROSS_RACK_RATIO, value, {"kind": "consumer", "group": group})
    want = (
        "rackplan_cross_rack_ratio",
        frozenset({"kind": "consumer", "group": group, "cluster": "c"}.items()),
    )
    for samples in (text_samples(m.render()), openmetrics_samples(m.render("application/openmetrics-text"))):
        found = [s for s in samples if s[:2] == want]
        assert found == [(*want, value)]
