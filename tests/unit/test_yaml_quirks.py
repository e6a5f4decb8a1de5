"""YAML is read as kubectl reads it, into values JSON can carry (docs/security.md).

Each case here was once a traceback, a silently different value or a hang.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest

from skillop.cli.load import load_text
from skillop.model.manifest import Resource
from skillop.model.specs import ToolSpec
from skillop.sources.agent_skill import AgentSkillError, parse_skill_md

HEAD = "apiVersion: skillop.dev/v1alpha1\nkind: Tool\nmetadata: {name: t, namespace: team-a}\n"


def _tool(spec: str) -> ToolSpec:
    loaded = load_text(HEAD + spec, origin="t.yaml")
    assert loaded.problems == [], [p.line() for p in loaded.problems]
    (tool,) = loaded.objects
    assert isinstance(tool, Resource) and isinstance(tool.spec, ToolSpec)
    return tool.spec


def _lines(spec: str) -> list[str]:
    loaded = load_text(HEAD + spec, origin="t.yaml")
    assert loaded.objects == []
    return [p.line() for p in loaded.problems]


def _schema_default(value: str) -> object:
    spec = _tool("spec:\n  description: d\n  inputSchema:\n    type: object\n"
                 f"    properties: {{d: {{type: string, default: {value}}}}}\n")
    return spec.input_schema["properties"]["d"]["default"]


def test_unquoted_checkpoint_no_is_refused_with_a_hint_to_quote_it() -> None:
    # The API server refuses a boolean for the string enum; so does the CLI.
    (line,) = _lines("spec: {description: d, capabilities: {checkpoint: no}}\n")
    assert line.startswith("t.yaml: Tool team-a/t: spec.capabilities.checkpoint: InvalidSpec: ")
    assert "not the boolean false" in line and 'quote the text, e.g. "no"' in line
    spec = _tool("spec: {description: d, capabilities: {checkpoint: 'no', writes: yes}}\n")
    assert spec.capabilities.to_dict() == {"writes": True, "checkpoint": "no"}


@pytest.mark.parametrize(("written", "value"), [
    ("2024-01-01", "2024-01-01"),                 # a date stays text, as kubectl sends it
    ("2024-01-01T10:00:00Z", "2024-01-01T10:00:00Z"),
    ("!!timestamp 2024-01-01", "2024-01-01"),
    ("12:30", "12:30"),                           # not PyYAML's base-60 number 750
    ("1e3", 1000),                                # a number in go-yaml (PyYAML: text)
    ("30.0", 30),                                 # Go prints the float 30.0 as 30
    ("0.5", 0.5),
    ("1e400", "1e400"),                           # out of a float's range: go-yaml's text
    ("y", True),                                  # YAML 1.1 booleans, as go-yaml reads them
    ("n", False),
    ("18446744073709551615", 2**64 - 1),          # go-yaml: int64, then uint64
    ("-9223372036854775809", -(2**63)),          # past both: a float, whole, as Go prints it
    ("1" + "0" * 30, 1e30),
    ("9" * 4301, "9" * 4301),                     # past any float: text (Python: ValueError)
    ("0x1" + "0" * 16, "0x1" + "0" * 16),         # past uint64, not decimal: text
])
def test_scalars_are_read_as_kubectl_reads_them(written: str, value: object) -> None:
    got = _schema_default(written)
    assert got == value and type(got) is type(value)


def test_timestamps_reach_the_json_output_as_text() -> None:
    spec = _tool("spec:\n  description: d\n  inputSchema: {since: 2024-01-01, 'n': 2.0}\n")
    assert json.dumps(spec.input_schema) == '{"since": "2024-01-01", "n": 2}'


@pytest.mark.parametrize(("value", "field", "words"), [
    ("!!binary aGVsbG8=", "spec.inputSchema.default", "binary data"),
    ("!!set {a, b}", "spec.inputSchema.default", "a set"),
    ("!!omap [a: 1]", "spec.inputSchema.default[0]", "list of pairs"),
    (".nan", "spec.inputSchema.default", "NaN"),
    (".inf", "spec.inputSchema.default", "infinite"),
    ("-.Inf", "spec.inputSchema.default", "infinite"),
    ("{1: a}", "spec.inputSchema.default", "the key 1, which is not a string"),
    ("{on: a}", "spec.inputSchema.default", "the key true (YAML reads an unquoted"),
    ("{x: 1, y: 2}", "spec.inputSchema.default", "the key true (YAML reads an unquoted"),
    ("{~: a}", "spec.inputSchema.default", "the key null"),
    ("&a [x, *a]", "spec.inputSchema.default[1]", "contains itself"),
    ("&a {b: {c: *a}}", "spec.inputSchema.default.b.c", "contains itself"),
])
def test_what_json_cannot_carry_is_invalid_spec_naming_the_field(
        value: str, field: str, words: str) -> None:
    (line,) = _lines(f"spec:\n  description: d\n  inputSchema: {{default: {value}}}\n")
    assert line.startswith(f"t.yaml: Tool team-a/t: {field}: InvalidSpec: "), line
    assert words in line


def test_too_deep_nesting_is_invalid_spec() -> None:
    deep = "[" * 200 + "]" * 200
    (line,) = _lines(f"spec: {{description: d, inputSchema: {{default: {deep}}}}}\n")
    assert "InvalidSpec" in line and "nested more than 64 levels deep" in line
    assert len(line) < 600


@pytest.mark.parametrize(("spec", "field", "given"), [
    ("capabilities: {writes: 'yes'}", "spec.capabilities.writes", "the string 'yes'"),
    ("capabilities: {timeoutSeconds: '30'}", "spec.capabilities.timeoutSeconds",
     "the string '30'"),
    ("capabilities: {timeoutSeconds: 30.5}", "spec.capabilities.timeoutSeconds",
     "the number 30.5"),
    ("capabilities: {tags: [a, 1]}", "spec.capabilities.tags[1]", "the number 1"),
    ("capabilities: {tags: a}", "spec.capabilities.tags", "the string 'a'"),
    ("title: 5", "spec.title", "the number 5"),
    ("name: on", "spec.name", "the boolean true"),
    ("input_schema: {}", "spec.input_schema", None),  # the CRD knows only inputSchema
])
def test_types_are_as_strict_as_the_crd_schema(spec: str, field: str, given: str | None) -> None:
    (line,) = _lines(f"spec: {{description: d, {spec}}}\n")
    assert line.startswith(f"t.yaml: Tool team-a/t: {field}: InvalidSpec: "), line
    if given is not None:
        assert given in line


def test_whole_floats_are_integers_as_on_the_api_server() -> None:
    spec = _tool("spec: {description: d, capabilities: {timeoutSeconds: 30.0}}\n")
    assert spec.capabilities.to_dict() == {"timeoutSeconds": 30}


BOMB = """apiVersion: skillop.dev/v1alpha1
kind: Tool
metadata: {name: lol, namespace: team-a}
spec:
  description: d
  inputSchema:
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]
    j: &j [*i,*i,*i,*i,*i,*i,*i,*i,*i,*i]
    k: &k [*j,*j,*j,*j,*j,*j,*j,*j,*j,*j]
    l: &l [*k,*k,*k,*k,*k,*k,*k,*k,*k,*k]
"""


def test_an_alias_bomb_is_refused_at_once_in_little_memory() -> None:
    assert len(BOMB) < 900  # 10^12 strings when expanded
    tracemalloc.start()
    start = time.perf_counter()
    try:
        loaded = load_text(BOMB, origin="bomb.yaml")
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert loaded.objects == []
    (line,) = [p.line() for p in loaded.problems]
    assert line.startswith("bomb.yaml: <file>: InvalidSpec: YAML refused: document contains"
                           " excessive aliasing"), line
    assert elapsed < 1.0 and peak < 20 * 2**20


def test_aliases_within_the_bound_are_read() -> None:
    # A schema shared by three properties: the ordinary use of anchors.
    spec = _tool("spec:\n  description: d\n  inputSchema:\n    properties:\n"
                 "      a: &s {type: string, maxLength: 10}\n      b: *s\n      c: *s\n")
    assert spec.input_schema["properties"]["c"] == {"type": "string", "maxLength": 10}


def test_skill_md_frontmatter_is_read_the_same_way() -> None:
    bomb = "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 12))
    text = "---\nname: x\ndescription: d\na0: &a0 [lol, lol]\n" + bomb + "---\nbody\n"
    start = time.perf_counter()
    with pytest.raises(AgentSkillError, match="excessive aliasing"):
        parse_skill_md(text)
    assert time.perf_counter() - start < 1.0
    doc = parse_skill_md("---\nname: notes\ndescription: 2024-01-01\n---\nbody\n")
    assert doc.description == "2024-01-01"
