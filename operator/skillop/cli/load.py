"""Reading manifests from files, directories and stdin.

Multi-document YAML (and JSON, a subset), read as kubectl reads it
(``model.yamlread``); ``List`` objects are expanded; files are read in sorted
order so output never depends on the file system. Files and stdin take the same
path from bytes on. Anything that cannot be read becomes a Problem naming the
file, never a traceback. A file named twice is read once; an object defined
twice is a warning, and the later definition is used (docs/decisions.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skillop.cli.safetext import shown
from skillop.model import problems as P
from skillop.model import yamlread
from skillop.model.manifest import (
    DEFAULT_NAMESPACE,
    ConfigMapData,
    NamespaceInfo,
    Parsed,
    parse_object,
)
from skillop.model.problems import Problem, Subject

SUFFIXES = {".yaml", ".yml", ".json"}


@dataclass
class Loaded:
    objects: list[Parsed] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Refs (kind, namespace, name) of skillop objects that failed to parse.
    invalid: set[tuple[str, str, str]] = field(default_factory=set)
    #: Every document as read (Lists expanded), with its file, when asked for
    #: (``keep_documents``): what ``skillop inject`` prints back.
    documents: list[tuple[str, Any]] | None = None
    #: An object defined more than once, one line for each later definition.
    warnings: list[str] = field(default_factory=list)
    #: Where each object, by (kind, namespace, name), was last defined.
    defined: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: The files read, by real path: each is read once however often it is named.
    files: set[str] = field(default_factory=set)


def load_paths(paths: Iterable[str], *, namespace: str = DEFAULT_NAMESPACE,
               stdin: Any = None, into: Loaded | None = None) -> Loaded:
    loaded = into if into is not None else Loaded()
    for path in paths:
        if path == "-":
            _load_bytes(lambda: _read_stream(stdin or sys.stdin), "<stdin>", namespace, loaded)
            continue
        for file in _files(Path(path), loaded):
            if _first_time(file, loaded):
                _load_bytes(file.read_bytes, str(file), namespace, loaded)
    return loaded


def print_warnings(loaded: Loaded) -> None:
    """The input's warnings, on stderr: they never change the exit code."""
    for warning in loaded.warnings:
        print(shown(f"warning: {warning}"), file=sys.stderr)


def _first_time(file: Path, loaded: Loaded) -> bool:
    """Whether ``file`` is not read yet: one file named twice (``-f dir -f
    dir/x.yaml``, or through a link) holds no second definition of anything."""
    real = os.path.realpath(file)
    if real in loaded.files:
        return False
    loaded.files.add(real)
    return True


def _read_stream(stream: Any) -> bytes:
    """A stream's bytes: undecoded, so stdin gets the same UTF-8 check as files."""
    raw = getattr(stream, "buffer", stream).read()
    return raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)


def _load_bytes(read: Callable[[], bytes], origin: str, namespace: str, loaded: Loaded) -> None:
    try:
        text = read().decode("utf-8")
    except (OSError, UnicodeError) as err:
        loaded.problems.append(_file_problem(origin, f"cannot read: {_reason(err)}"))
        return
    load_text(text, origin=origin, namespace=namespace, into=loaded)


def _reason(err: Exception) -> str:
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start})"
    return str(err)


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
        docs = yamlread.load_all(text)
    except yaml.YAMLError as err:
        loaded.problems.append(_file_problem(origin, _yaml_message(err)))
        return loaded
    for doc in _expand(docs):
        if doc is None:
            continue
        if loaded.documents is not None:
            loaded.documents.append((origin, doc))
        result = parse_object(doc, origin=origin, default_namespace=namespace)
        if result.obj is not None:
            loaded.objects.append(result.obj)
            _note_definition(result.obj, origin, loaded)
        if result.problems:
            loaded.problems.extend(result.problems)
            subject = result.problems[0].subject
            loaded.invalid.add((subject.kind, subject.namespace, subject.name))
    return loaded


def _note_definition(obj: Parsed, origin: str, loaded: Loaded) -> None:
    """Warn when ``obj`` was defined before. The catalog keeps the later one, which is
    what ``kubectl apply`` of the same files in the same order leaves behind; the
    operator never sees two, so this is not a problem of the input."""
    key = _identity(obj)
    before = loaded.defined.get(key)
    loaded.defined[key] = origin
    if before is None:
        return
    where = (f"twice in {origin}: the later one" if before == origin
             else f"in {before} and again in {origin}: the one in {origin}")
    loaded.warnings.append(f"{Subject(*key)} is defined {where} is used, as kubectl apply in the"
                           " order read would leave it")


def _identity(obj: Parsed) -> tuple[str, str, str]:
    if isinstance(obj, NamespaceInfo):
        return ("Namespace", "", obj.name)
    if isinstance(obj, ConfigMapData):
        return ("ConfigMap", obj.meta.namespace, obj.meta.name)
    return (obj.kind, obj.meta.namespace, obj.meta.name)


def _yaml_message(err: yaml.YAMLError) -> str:
    if isinstance(err, yamlread.ExcessiveAliasing):
        return f"YAML refused: {err}"
    if isinstance(err, yamlread.MalformedJson):
        return f"malformed JSON at line {err.line}: {err.problem[:200]}"
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    reason = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"malformed YAML{where}: {reason[:200]}"


def _expand(docs: list[Any]) -> Iterator[Any]:
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"),
                                                                              list):
            yield from doc["items"]
        else:
            yield doc
