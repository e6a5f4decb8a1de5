"""Caller rules and rate limits compiled into the ToolSet (docs/api.md, "Caller
rules and rate limits"): origins, covered tools by skill, path and name, and
the document's hash."""

from __future__ import annotations

import json
from typing import Any

from skillkit import (
    actor,
    anon,
    cluster_policy,
    ref,
    resolve_actor,
    resolver,
    skill,
    skill_policy,
)

from skillop.model.toolset import ToolSetDocument

# top ─┬─ left ──┬─ shared
#      └─ right ─┘
GRAPH = [
    skill("top", includes=[{"skill": "left"}, {"skill": "right"}], anonymousTools=[anon("t")]),
    skill("left", includes=[{"skill": "shared"}], anonymousTools=[anon("l")]),
    skill("right", includes=[{"skill": "shared"}], anonymousTools=[anon("delete_r")]),
    skill("shared", anonymousTools=[anon("s")]),
]


def document(*docs: Any, **spec: Any) -> ToolSetDocument:
    resolution = resolve_actor([*GRAPH, *docs, actor("bot", skills=["top"], **spec)],
                               "team-a/bot")
    assert resolution.ok, resolution.problems
    return ToolSetDocument.parse(resolution.render()[0])


def rules(doc: ToolSetDocument) -> list[tuple[str, int, str, tuple[str, ...]]]:
    return [(r.origin, r.rule, r.effect, r.tools) for r in doc.caller_rules or ()]


def test_a_rule_covers_the_tools_of_a_skill_and_of_everything_it_includes() -> None:
    doc = document(skillAccessPolicy={"callerRules": [
        {"callers": {"groups": ["contractors"]}, "effect": "Deny", "skills": ["team-a/left"]}]})
    assert rules(doc) == [("Actor team-a/bot", 1, "Deny", ("l", "s"))]
    assert doc.caller_rules is not None
    assert doc.caller_rules[0].callers.groups == ["contractors"]


def test_a_diamond_covers_a_shared_tool_whichever_path_reached_it_first() -> None:
    # shared is reached through left first; a rule on right still covers it.
    doc = document(skillAccessPolicy={"callerRules": [
        {"effect": "RequireApproval", "skills": ["team-a/right"]}]})
    assert rules(doc) == [("Actor team-a/bot", 1, "RequireApproval", ("delete_r", "s"))]


def test_skills_and_tools_given_must_both_match() -> None:
    doc = document(skillAccessPolicy={"callerRules": [
        {"effect": "Deny", "skills": ["team-a/top"], "tools": ["delete_*"]},
        {"effect": "Deny", "tools": ["team-a/shared.*"]}]})
    assert rules(doc) == [("Actor team-a/bot", 1, "Deny", ("delete_r",)),
                          ("Actor team-a/bot", 2, "Deny", ("s",))]


def test_a_rule_covering_nothing_is_left_out_and_its_neighbours_keep_their_number() -> None:
    doc = document(skillAccessPolicy={"callerRules": [
        {"effect": "Deny", "tools": ["nothing-*"]},
        {"effect": "Allow", "tools": ["t"], "callers": {"subjects": ["alice"]}}]})
    assert rules(doc) == [("Actor team-a/bot", 2, "Allow", ("t",))]


def test_policies_come_first_each_named_and_the_actors_own_last() -> None:
    doc = document(
        skill_policy("p", callerRules=[{"effect": "Allow", "tools": ["t"],
                                        "callers": {"groups": ["sre"]}}],
                     rateLimits=[{"calls": 5, "perSeconds": 60, "per": "Caller"}]),
        cluster_policy("tenants", callerRules=[{"effect": "Deny", "tools": ["s"]}]),
        skillAccessPolicy={"callerRules": [{"effect": "Allow", "tools": ["t"]}]},
        rateLimits=[{"calls": 2, "perSeconds": 1, "tools": ["l"]}])
    assert rules(doc) == [("ClusterSkillPolicy tenants", 1, "Deny", ("s",)),
                          ("SkillPolicy team-a/p", 1, "Allow", ("t",)),
                          ("Actor team-a/bot", 1, "Allow", ("t",))]
    limits = [(x.origin, x.limit, x.calls, x.per_seconds, x.per, x.tools)
              for x in doc.rate_limits or ()]
    assert limits == [("SkillPolicy team-a/p", 1, 5, 60, "Caller", ("delete_r", "l", "s", "t")),
                      ("Actor team-a/bot", 1, 2, 1, "CallerAndTool", ("l",))]


def test_rules_are_part_of_the_document_and_its_hash() -> None:
    plain = document()
    ruled = document(skillAccessPolicy={"callerRules": [{"effect": "Deny", "tools": ["t"]}]})
    assert "callerRules" not in json.loads(plain.canonical())
    assert plain.hash != ruled.hash
    assert json.loads(ruled.canonical())["callerRules"] == [
        {"origin": "Actor team-a/bot", "rule": 1, "effect": "Deny", "callers": {},
         "tools": ["t"]}]


def test_two_actors_of_one_resolver_differing_only_in_caller_rules_keep_their_own() -> None:
    # One Resolver shares an effective policy between Actors whose own policy is
    # equal: the caller rules must be part of what "equal" compares.
    run = resolver([*GRAPH,
                    actor("a", skills=["top"], skillAccessPolicy={"callerRules": [
                        {"effect": "Deny", "tools": ["t"]}]}),
                    actor("b", skills=["top"], skillAccessPolicy={"callerRules": [
                        {"effect": "Deny", "tools": ["l"]}]})])
    found = []
    for name in ("team-a/a", "team-a/b"):
        resolution = run.resolve_actor(ref(name))
        assert resolution is not None
        found.append(rules(ToolSetDocument.parse(resolution.render()[0])))
    assert found == [[("Actor team-a/a", 1, "Deny", ("t",))],
                     [("Actor team-a/b", 1, "Deny", ("l",))]]
