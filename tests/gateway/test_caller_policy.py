"""Decisions per caller (``gateway.caller_policy``): Deny, Allow reservations per
object, RequireApproval, each refusal naming its rule's origin; the listing's
view per set of matched rules, bounded."""

from __future__ import annotations

from pathlib import Path

from callerkit import served_with, who
from skillkit import cluster_policy, skill_policy

from skillop.gateway import caller_policy
from skillop.gateway.caller_policy import (
    ALLOWED,
    MAX_KEPT_VIEWS,
    CallerRules,
    CompiledRule,
    Denied,
    NeedsApproval,
    decide,
)
from skillop.model.caller import ANONYMOUS
from skillop.model.caller_rules import CallerMatch

SRE, CONTRACTOR, ALICE = who("sam", "sre"), who("carl", "contractors"), who("alice")


def test_deny_names_the_rule_its_origin_and_whom_it_is_for(tmp_path: Path) -> None:
    rules = served_with(tmp_path, skill_policy("p", callerRules=[
        {"effect": "Deny", "tools": ["plan"]},
        {"callers": {"groups": ["contractors"]}, "effect": "Deny", "skills": ["team-a/ops"]}]),
    ).caller_rules
    assert decide(rules, CONTRACTOR, "wipe") == Denied(
        "denied by SkillPolicy team-a/p: rule 2 (groups: [contractors])")
    assert decide(rules, SRE, "wipe") is ALLOWED
    assert decide(rules, ANONYMOUS, "plan") == Denied(
        "denied by SkillPolicy team-a/p: rule 1 (every caller)")


def test_allow_reserves_covered_tools_to_its_callers_others_untouched(tmp_path: Path) -> None:
    rules = served_with(tmp_path, skillAccessPolicy={"callerRules": [
        {"callers": {"groups": ["sre"]}, "effect": "Allow", "tools": ["wipe", "deploy"]},
        {"callers": {"subjects": ["alice"]}, "effect": "Allow", "tools": ["deploy"]}]},
    ).caller_rules
    assert decide(rules, SRE, "wipe") is ALLOWED
    assert decide(rules, ALICE, "deploy") is ALLOWED
    assert decide(rules, ALICE, "wipe") == Denied(
        "not allowed by Actor team-a/bot: wipe is reserved to the callers of its Allow rule 1")
    assert decide(rules, ANONYMOUS, "deploy") == Denied(
        "not allowed by Actor team-a/bot: deploy is reserved to the callers of its Allow"
        " rules 1, 2")
    assert decide(rules, ANONYMOUS, "notes") is ALLOWED


def test_a_tenants_allow_cannot_widen_a_policys(tmp_path: Path) -> None:
    rules = served_with(
        tmp_path,
        cluster_policy("tenants", callerRules=[
            {"callers": {"groups": ["sre"]}, "effect": "Allow", "tools": ["wipe"]}]),
        skillAccessPolicy={"callerRules": [
            {"callers": {"groups": ["contractors"]}, "effect": "Allow", "tools": ["wipe"]}]},
    ).caller_rules
    assert decide(rules, CONTRACTOR, "wipe") == Denied(
        "not allowed by ClusterSkillPolicy tenants: wipe is reserved to the callers of its"
        " Allow rule 1")
    # The policy lets sre in, but the Actor's own Allow reserves it further.
    assert decide(rules, SRE, "wipe") == Denied(
        "not allowed by Actor team-a/bot: wipe is reserved to the callers of its Allow rule 1")
    assert decide(rules, who("both", "sre", "contractors"), "wipe") is ALLOWED


def test_deny_wins_over_allow_and_approval_comes_last(tmp_path: Path) -> None:
    rules = served_with(tmp_path, skillAccessPolicy={"callerRules": [
        {"callers": {"groups": ["sre"]}, "effect": "RequireApproval", "skills": ["team-a/ops"]},
        {"callers": {"groups": ["sre"]}, "effect": "Allow", "tools": ["wipe"]},
        {"callers": {"subjects": ["sam"]}, "effect": "Deny", "tools": ["wipe"]}]},
    ).caller_rules
    assert decide(rules, SRE, "wipe") == Denied(
        "denied by Actor team-a/bot: rule 3 (subjects: [sam])")
    assert decide(rules, who("sue", "sre"), "wipe") == NeedsApproval(
        "approval required by Actor team-a/bot: rule 1 (groups: [sre])")
    assert decide(rules, who("sue", "sre"), "deploy") == NeedsApproval(
        "approval required by Actor team-a/bot: rule 1 (groups: [sre])")
    assert decide(rules, CONTRACTOR, "deploy") is ALLOWED


def test_a_caller_sees_what_they_may_call_including_what_needs_approval(
        tmp_path: Path) -> None:
    rules = served_with(tmp_path, skillAccessPolicy={"callerRules": [
        {"callers": {"groups": ["contractors"]}, "effect": "Deny", "skills": ["team-a/ops"]},
        {"effect": "RequireApproval", "tools": ["plan"]}]}).caller_rules
    names = ("notes", "plan", "wipe", "deploy")
    assert rules.hidden(rules.matched(CONTRACTOR), names) == {"wipe", "deploy"}
    assert rules.hidden(rules.matched(SRE), names) == frozenset()


def test_views_are_kept_per_set_of_matched_rules_and_bounded() -> None:
    rules = CallerRules(tuple(
        CompiledRule("Actor a/b", i + 1, "Deny", CallerMatch(subjects=[f"user-{i}"]),
                     frozenset({f"tool-{i}"})) for i in range(MAX_KEPT_VIEWS + 10)))
    names = tuple(f"tool-{i}" for i in range(MAX_KEPT_VIEWS + 10))
    for i in range(MAX_KEPT_VIEWS + 10):
        assert rules.hidden(rules.matched(who(f"user-{i}")), names) == {f"tool-{i}"}
    assert len(rules._views) == MAX_KEPT_VIEWS
    # Users 0-9 matched the same rules as nobody else: their views were dropped first.
    assert frozenset({0}) not in rules._views and frozenset({MAX_KEPT_VIEWS + 9}) in rules._views


def test_the_matched_rules_of_recent_callers_are_kept_bounded() -> None:
    rules = CallerRules((CompiledRule("Actor a/b", 1, "Deny", CallerMatch(groups=["g"]),
                                      frozenset({"t"})),))
    for i in range(caller_policy.MAX_KEPT_CALLERS + 5):
        assert rules.decide(rules.matched(who(f"u{i}", "g" if i % 2 else "h")), "t") == (
            Denied("denied by Actor a/b: rule 1 (groups: [g])") if i % 2 else ALLOWED)
    assert len(rules._callers) == caller_policy.MAX_KEPT_CALLERS
    # Equal subject and groups, other claims: another caller, matched afresh.
    claimed = CallerRules((CompiledRule("Actor a/b", 1, "Deny", CallerMatch.model_validate(
        {"claims": [{"claim": "dept", "values": ["eng"]}]}), frozenset({"t"})),))
    assert decide(claimed, who("x", dept="hr"), "t") is ALLOWED
    assert isinstance(decide(claimed, who("x", dept="eng"), "t"), Denied)


def test_no_rules_allow_everything() -> None:
    assert decide(caller_policy.NO_RULES, ANONYMOUS, "anything") is ALLOWED
