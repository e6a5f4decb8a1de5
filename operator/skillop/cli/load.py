"""Reading manifests from files, directories and stdin.

Multi-document YAML (and JSON, a subset); ``List`` objects are expanded; files
are read in sorted order so output never depends on the file system. Anything
that cannot be read becomes a Problem naming the file, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skillop.model import problems as P
from skillop.model.manifest import DEFAULT_NAMESPACE, Parsed, parse_object
from skillop.model.problems import Problem, Subject

#: libyaml's parser when PyYAML was built with it (much faster), else the pure one.
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader, refusing duplicate keys.

    YAML would silently keep the last value, so a key given twice (or two
    manifests pasted together without ``---``) would lose half the input.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"found duplicate key {key_node.value!r}", key_node.start_mark)
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


SUFFIXES = {".yaml", ".yml", ".json"}


@dataclass
class Loaded:
    objects: list[Parsed] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Refs (kind, namespace, name) of skillop objects that failed to parse.
    invalid: set[tuple[str, str, str]] = field(default_factory=set)


def load_paths(paths: Iterable[str], *, namespace: str = DEFAULT_NAMESPACE,
               stdin: Any = None) -> Loaded:
    loaded = Loaded()
    for path in paths:
        if path == "-":
            text = (stdin or sys.stdin).read()
            load_text(text, origin="<stdin>", namespace=namespace, into=loaded)
            continue
        for file in _files(Path(path), loaded):
            try:
                text = file.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as err:
                loaded.problems.append(_file_problem(str(file), f"cannot read: {err}"))
                continue
            load_text(text, origin=str(file), namespace=namespace, into=loaded)
    return loaded


def _files(path: Path, loaded: Loaded) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    elif path.exists():
        yield path
    else:
        loaded.problems.append(_file_problem(str(path), "no such file or directory"))


def _file_problem(origin: str, message: str) -> Problem:
    return Problem(Subject("<file>", "", ""), "", P.INVALID_SPEC, message, origin)


def load_text(text: str, *, origin: str, namespace: str = DEFAULT_NAMESPACE,
              into: Loaded | None = None) -> Loaded:
    loaded = into if into is not None else Loaded()
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        loaded.problems.append(_file_problem(origin, f"malformed YAML at {where}: {reason}"))
        return loaded
    for doc in _expand(docs):
        if doc is None:
            continue
        result = parse_object(doc, origin=origin, default_namespace=namespace)
        if result.obj is not None:
            loaded.objects.append(result.obj)
        if result.problems:
            loaded.problems.extend(result.problems)
            subject = result.problems[0].subject
            loaded.invalid.add((subject.kind, subject.namespace, subject.name))
    return loaded


def _expand(docs: list[Any]) -> Iterator[Any]:
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"),
                                                                              list):
            yield from doc["items"]
        else:
            yield doc
