"""A manifest file whose content is JSON is read as JSON is read (kubectl's decoder).

``json.dumps`` writes non-ASCII text as ``\\uXXXX`` escapes, characters outside the
Basic Multilingual Plane (emoji) as surrogate pairs; YAML's parser refuses those
escapes, kubectl and the API server accept the file.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.cli.load import load_text
from skillop.model import yamlread
from skillop.model.manifest import Resource
from skillop.model.specs import ToolSpec

#: Text as JSON can carry it: any code point but a lone surrogate (which Go's
#: decoder turns into U+FFFD, tested apart).
_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


def _tool(description: str) -> dict[str, Any]:
    return {"apiVersion": "skillop.dev/v1alpha1", "kind": "Tool",
            "metadata": {"name": "t", "namespace": "team-a"},
            "spec": {"description": description,
                     "inputSchema": {"type": "object", "properties": {
                         "q": {"type": "string", "description": description}}}}}


def _spec(text: str) -> ToolSpec:
    loaded = load_text(text, origin="t.json")
    assert loaded.problems == [], [p.line() for p in loaded.problems]
    (tool,) = loaded.objects
    assert isinstance(tool, Resource) and isinstance(tool.spec, ToolSpec)
    return tool.spec


def test_an_emoji_written_as_a_surrogate_pair_is_read() -> None:
    text = json.dumps(_tool("ship it \U0001f680"))
    assert "\\ud83d\\ude80" in text
    assert _spec(text).description == "ship it \U0001f680"


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.booleans())
def test_any_text_json_dumps_writes_reads_back_as_itself(text: str, indent: bool) -> None:
    written = json.dumps(_tool(text or "d"), ensure_ascii=True, indent=2 if indent else None)
    assert _spec(written).description == (text or "d")


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _TEXT,
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=20))
def test_json_values_are_read_as_json_loads_reads_them(value: Any) -> None:
    doc = {"value": value}
    assert yamlread.load_all(json.dumps(doc, ensure_ascii=True)) == [doc]
    assert yamlread.load_all(json.dumps(doc, ensure_ascii=False)) == [doc]


def test_a_stream_of_json_objects_is_every_object_in_order() -> None:
    first, second = _tool("a"), {**_tool("b"), "metadata": {"name": "u", "namespace": "team-a"}}
    loaded = load_text(json.dumps(first) + "\n" + json.dumps(second, indent=2) + "\n",
                       origin="t.json")
    assert loaded.problems == []
    assert [o.meta.name for o in loaded.objects] == ["t", "u"]  # type: ignore[union-attr]


def test_a_lone_surrogate_is_the_replacement_character_as_go_reads_it() -> None:
    assert _spec(json.dumps(_tool("x\ud800y"))).description == "x\ufffdy"


def test_what_kubectl_refuses_in_json_is_one_line_naming_the_line() -> None:
    cases = {
        '{"kind": "Tool",\n "a": 1, "a": 2}': "found duplicate key 'a'",
        '{"kind": "Tool",\n "a": 1': "Expecting ',' delimiter",
        '{"kind": "Tool"}\n{"a": NaN}': "NaN is not a JSON value",
        '{"kind": "Tool"}\n{"a": ' + "9" * 5000 + "}": "out of range",
    }
    for text, reason in cases.items():
        loaded = load_text(text, origin="t.json")
        (problem,) = loaded.problems
        assert problem.message.startswith("malformed JSON at line "), problem.message
        assert reason in problem.message
    message = load_text('{"kind": "Tool",\n "a": 1', origin="t").problems[0].message
    assert "at line 2" in message


def test_a_flow_mapping_that_is_no_json_is_still_read_as_yaml() -> None:
    # kubectl's decoder falls back to YAML for a JSON-looking file that is no JSON.
    assert yamlread.load_all("{a: 1, b: [c, d]}") == [{"a": 1, "b": ["c", "d"]}]
    assert yamlread.load_all("a: 1\n") == [{"a": 1}]
