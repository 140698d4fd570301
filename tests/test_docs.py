"""The documentation stands on its own: every link resolves inside the repository, and the contract
copied into docs/ is the binding one (../shared/CONTRACT.md) word for word."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: [text](target) and [text]: target, outside code spans and fences
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.M)


#: folders that hold no documentation of ours (built artifacts, environments, caches)
_SKIP_DIRS = frozenset({"lib", "target", "build", "dist", "node_modules", "__pycache__"})


def markdown_files() -> list[Path]:
    """Every ``*.md`` of the repository (works without git, e.g. in an unpacked source archive)."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        out += [Path(folder) / f for f in files if f.endswith(".md")]
    return sorted(out)


def links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in _LINK.findall(text)]


def test_docs_copy_of_the_contract_is_the_binding_one(shared_dir: Path) -> None:
    copy = (ROOT / "docs" / "CONTRACT.md").read_text(encoding="utf-8")
    assert copy == (shared_dir / "CONTRACT.md").read_text(encoding="utf-8"), (
        "docs/CONTRACT.md drifted from ../shared/CONTRACT.md: copy it again (cp ../shared/CONTRACT.md docs/)"
    )


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves_inside_the_repository(doc: Path) -> None:
    broken = []
    for target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same page
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(ROOT):
            broken.append(f"{target} (outside the repository)")
        elif not path.exists():
            broken.append(f"{target} (no such file)")
    assert broken == [], f"{doc.relative_to(ROOT)}: {broken}"


def test_the_link_finder_finds_links() -> None:
    text = (
        "see [a](docs/x.md) and [b](../y.md#z) `[not](a-link.md)`\n[ref]: other.md\n```\n[no](no.md)\n```\n"
    )
    assert links(text) == ["docs/x.md", "../y.md#z", "other.md"]


def test_the_readme_links_the_contract_in_docs() -> None:
    assert "(docs/CONTRACT.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
