"""docs/java.md's ``<dependency>`` block names clients/java/pom.xml's coordinates (``make clients-install``)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "clients" / "java" / "pom.xml"
DOC = ROOT / "docs" / "java.md"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def coordinates(element: ET.Element, ns: dict[str, str]) -> tuple[str, str, str]:
    def text(tag: str) -> str:
        found = element.find(f"m:{tag}" if ns else tag, ns)
        assert found is not None and found.text, tag
        return found.text.strip()

    return text("groupId"), text("artifactId"), text("version")


def test_the_documented_dependency_is_the_poms_artifact() -> None:
    pom = coordinates(ET.parse(POM).getroot(), NS)
    blocks = re.findall(r"```xml\n(<dependency>.*?</dependency>)\n```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "one <dependency> block in docs/java.md"
    assert coordinates(ET.fromstring(blocks[0]), {}) == pom
    assert f'implementation("{":".join(pom)}")' in DOC.read_text(), "the Gradle line too"
