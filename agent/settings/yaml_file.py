"""The settings file: strict, bounded YAML (duplicate keys, alias bombs and oversized files refused).

Read once at start; :class:`~.errors.SettingsError` names the file and the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rackplan.assignor.bounded import TooLargeError, read_bounded

from .errors import SettingsError

#: a settings file may expand (through YAML aliases) to at most this many values
MAX_YAML_NODES = 200_000


#: a settings file may hold at most this many bytes: 2.4 times a file of MAX_YAML_NODES values (1.7 MB in
#: block style), so the node limit refuses first; PyYAML parses about 0.25 MB per CPU second (docs/settings.md)
MAX_SETTINGS_BYTES = 4 << 20


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses duplicate keys (the second would silently win); merge keys still work.

    Each duplicate is recorded (its key and where) and the document built on, so every one is named."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[Any, Any]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: explicit keys override, by design
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class says so
                break
            if duplicate:
                self.duplicates.append((key, key_node.start_mark))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Values the document holds once every alias is expanded, counted without expanding (memoised
    per node), so a 400-byte "billion laughs" is refused in microseconds instead of built."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise ValueError("a YAML alias refers to a node that contains it")
        busy.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(n) for n in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        busy.discard(key)
        sizes[key] = min(total, limit + 1)
        return sizes[key]

    return size(root)


def _where(path: str | Path, mark: Any) -> str:
    return f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)


def load_yaml(text: str, path: str | Path) -> Any:
    """A YAML document, strictly: :class:`SettingsError` naming the file and line for bad YAML,
    duplicate keys, recursive aliases, or more than :data:`MAX_YAML_NODES` values once expanded."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise SettingsError(
                f"{path}: expands to more than {MAX_YAML_NODES} values (YAML aliases?); refused"
            )
        document = loader.construct_document(node)
        if loader.duplicates:
            raise SettingsError(
                "\n".join(
                    f"{_where(path, mark)}: invalid YAML: while constructing a mapping duplicate key {key!r}"
                    for key, mark in loader.duplicates
                )
            )
        return document
    except yaml.MarkedYAMLError as e:
        what = " ".join(p for p in (e.context, e.problem) if p)
        raise SettingsError(f"{_where(path, e.problem_mark)}: invalid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise SettingsError(f"{path}: invalid YAML: {e}") from None
    except RecursionError:
        raise SettingsError(f"{path}: YAML nested too deeply") from None
    except ValueError as e:
        if isinstance(e, SettingsError):
            raise
        raise SettingsError(f"{path}: {e}") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, what: str = "the settings file") -> Any:
    """A YAML file's value (None when empty); :class:`SettingsError` (one line, the file named, and
    the line where the YAML breaks) when it cannot be read, is not UTF-8 or YAML, or holds more than
    :data:`MAX_SETTINGS_BYTES` (reading stops there: ``--config /dev/zero`` ends)."""
    try:
        with open(path, "rb") as f:
            text = read_bounded(f, MAX_SETTINGS_BYTES).decode("utf-8")
    except TooLargeError as e:
        raise SettingsError(f"{path}: {what} is {e}") from None
    except UnicodeDecodeError as e:
        raise SettingsError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise SettingsError(f"{path}: cannot read: {e.strerror or type(e).__name__}") from None
    return load_yaml(text, path)


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A settings file's top-level mapping (an empty file is an empty mapping); :class:`SettingsError`
    as :func:`read_yaml` says, or when it holds no mapping."""
    loaded = read_yaml(path)
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path}: the settings file must hold a mapping, got {type(loaded).__name__}")
    return loaded
