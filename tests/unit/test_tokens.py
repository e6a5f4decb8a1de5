"""Token counts of tool definitions: per tool, per set, and the maxToolTokens budget."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import (
    actor,
    anon,
    by_name,
    cluster_policy,
    problems_of,
    resolve_actor,
    resolver,
    skill,
    skill_policy,
)

from skillop.model import problems as P
from skillop.model.names import ObjectRef
from skillop.resolve.explain import explain
from skillop.resolve.tokens import ENCODING, count_tokens

LONG = "Reads every line of the given file and returns them with their numbers. " * 20


def _docs(**policy: object) -> list[dict[str, object]]:
    tools = [anon("tiny", description="x"),
             anon("wordy", description=LONG),
             anon("schema_heavy", description="y", inputSchema={
                 "type": "object", "properties": {
                     f"field_{i}": {"type": "string", "description": f"the {i}th field"}
                     for i in range(30)}})]
    return [skill("s", anonymousTools=tools),
            actor("a", skills=["s"], skillAccessPolicy=policy)]


def test_counts_are_the_encodings_own() -> None:
    # Known cl100k_base counts (the encoding's published examples).
    assert ENCODING == "cl100k_base"
    assert count_tokens("tiktoken is great!") == 6
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the package's own resource loading
def test_a_tool_costs_its_name_description_and_schema() -> None:
    import bpe_openai  # the package's tiktoken-compatible API, as an independent oracle

    encoding = bpe_openai.get_encoding(ENCODING)
    resolution = resolve_actor(_docs(), "team-a/a")
    doc = resolution.document
    for tool in doc["tools"]:
        schema = json.dumps(tool["inputSchema"], sort_keys=True, separators=(",", ":"))
        expected = sum(len(encoding.encode_ordinary(text)) for text in (
            tool["bindingName"], tool["description"], schema))
        assert tool["tokens"] == expected, tool["name"]
    assert doc["tokens"] == {"encoding": ENCODING,
                             "total": sum(t["tokens"] for t in doc["tools"])}
    assert resolution.tokens == doc["tokens"]["total"]
    tools = by_name(resolution)
    assert tools["wordy"]["tokens"] > 200 > tools["tiny"]["tokens"]


def test_a_qualified_binding_name_is_counted_as_the_model_sees_it() -> None:
    docs = [skill("one", anonymousTools=[anon("read", description="first")]),
            skill("two", anonymousTools=[anon("read", description="first")]),
            actor("a", skills=["one", "two"])]
    tools = resolve_actor(docs, "team-a/a").document["tools"]
    assert all(t["bindingName"].startswith("team-a_") for t in tools)
    # A binding name made unique costs more than the plain name; each counts its own.
    assert all(t["tokens"] == count_tokens(t["bindingName"]) + count_tokens("first") + 5
               > count_tokens("read") + count_tokens("first") + 5 for t in tools)
    assert count_tokens('{"type":"object"}') == 5


def test_over_max_tool_tokens_is_its_own_problem_naming_the_largest() -> None:
    total = resolve_actor(_docs(), "team-a/a").tokens
    assert resolve_actor(_docs(maxToolTokens=total), "team-a/a").ok
    over = resolve_actor(_docs(maxToolTokens=total - 1), "team-a/a")
    [problem] = over.problems
    assert (problem.field, problem.reason) == ("spec.skillAccessPolicy.maxToolTokens",
                                               P.TOO_MANY_TOOL_TOKENS)
    assert f"{total} tokens" in problem.message and f"budget of {total - 1}" in problem.message
    tools = by_name(over)
    named = problem.message.split("the largest: ")[1]
    # Costliest first.
    assert named == ", ".join(f"{n} ({tools[n]['tokens']})"
                              for n in ("schema_heavy", "wordy", "tiny"))
    assert tools["schema_heavy"]["tokens"] > tools["wordy"]["tokens"] > tools["tiny"]["tokens"]


def test_max_tools_and_max_tool_tokens_are_both_reported() -> None:
    over = resolve_actor(_docs(maxToolTokens=1, maxTools=1), "team-a/a")
    assert {p.reason for p in over.problems} == {P.TOO_MANY_TOOLS, P.TOO_MANY_TOOL_TOKENS}
    assert problems_of(over, P.TOO_MANY_TOOL_TOKENS)


def test_explain_names_the_biggest_contributors_when_over_budget() -> None:
    ok = explain(resolver(_docs()), ObjectRef("team-a", "a"), "tiny")
    assert ok is not None
    assert any(line.startswith("tokens: ") and ENCODING in line for line in ok.lines)
    assert not any("over the token budget" in line for line in ok.lines)
    over = explain(resolver(_docs(maxToolTokens=10)), ObjectRef("team-a", "a"), "tiny")
    assert over is not None
    text = over.text()
    assert "over the token budget of 10 (maxToolTokens)" in text
    assert text.index("  - schema_heavy: ") < text.index("  - wordy: ") < text.index("  - tiny: ")


@given(st.text(max_size=300))
def test_any_text_counts(text: str) -> None:
    # Descriptions are input: special-token spellings, lone surrogates, anything.
    # The special token's spelling is counted as text (several tokens, not the one
    # special token). Not compared with the bare spelling's count: a leading space
    # merges with "<" (" <" is one token), so " <|endoftext|>" counts 6 against 7.
    assert count_tokens(text + "<|endoftext|>") > 1
    assert count_tokens(text) >= (1 if text else 0)


def test_a_policy_ceiling_on_tokens_wins_over_the_actors_looser_budget() -> None:
    total = resolve_actor(_docs(), "team-a/a").tokens
    docs = [*_docs(maxToolTokens=total * 10), cluster_policy("lean", maxToolTokens=total - 1),
            skill_policy("looser", maxToolTokens=total)]
    resolution = resolve_actor(docs, "team-a/a")
    [problem] = resolution.problems
    assert (problem.field, problem.reason) == ("spec.skills", P.TOO_MANY_TOOL_TOKENS)
    assert problem.message.startswith(
        f"the tools cost {total} tokens ({ENCODING}), over the budget of {total - 1} set by"
        " ClusterSkillPolicy lean (maxToolTokens); the largest: schema_heavy (")
    why = explain(resolver(docs), ObjectRef("team-a", "a"), "tiny")
    assert why is not None and (f"over the token budget of {total - 1} set by"
                                " ClusterSkillPolicy lean (maxToolTokens)") in why.text()
    # The policy's ceiling is not a floor: an Actor's tighter budget is its own.
    own = resolve_actor([*_docs(maxToolTokens=10), cluster_policy("lean", maxToolTokens=total)],
                        "team-a/a")
    assert [p.field for p in own.problems] == ["spec.skillAccessPolicy.maxToolTokens"]
    assert resolve_actor([*_docs(), cluster_policy("lean", maxToolTokens=total)], "team-a/a").ok
