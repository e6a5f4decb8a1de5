"""The caller rules' models and the one matcher (``model.caller_rules``): what
parses, what is refused in one line, and what a CallerMatch matches."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from test_properties import SETTINGS

from skillop.model.caller import ANONYMOUS, Caller, caller_from_claims
from skillop.model.caller_rules import CallerMatch, CallerRule, RateLimit, glob_pattern, matches
from skillop.model.policies import SkillPolicySpec
from skillop.model.specs import ActorSpec

words = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)


def match(**fields: Any) -> CallerMatch:
    return CallerMatch.model_validate(fields)


def test_every_field_given_must_match_and_a_field_matches_if_any_value_does() -> None:
    m = match(subjects=["alice*", "svc-*"], groups=["sre", "ops"],
              claims=[{"claim": "dept", "values": ["eng"]}])
    ok = caller_from_claims({"sub": "svc-build", "groups": ["ops"], "dept": ["hr", "eng"]})
    assert matches(m, ok)
    assert not matches(m, caller_from_claims({"sub": "svc-build", "groups": ["ops"]}))
    assert not matches(m, caller_from_claims({"sub": "bob", "groups": ["ops"], "dept": "eng"}))
    assert not matches(m, caller_from_claims({"sub": "alice", "groups": [], "dept": "eng"}))


def test_claims_compare_strings_and_the_json_text_of_scalars() -> None:
    m = match(claims=[{"claim": "verified", "values": ["true"]},
                      {"claim": "level", "values": ["3"]}])
    assert matches(m, caller_from_claims({"sub": "a", "verified": True, "level": 3}))
    assert not matches(m, caller_from_claims({"sub": "a", "verified": "yes", "level": 3}))
    assert not matches(m, caller_from_claims({"sub": "a", "verified": True, "level": {"x": 3}}))


@SETTINGS
@given(st.builds(Caller, words, st.lists(words, max_size=3).map(tuple)))
def test_the_empty_match_is_everyone_and_anonymous_matches_nothing_else(caller: Caller) -> None:
    assert matches(CallerMatch(), caller) and matches(CallerMatch(), ANONYMOUS)
    for fields in ({"subjects": ["*"]}, {"groups": [caller.groups[0] if caller.groups else "g"]},
                   {"claims": [{"claim": "sub", "values": [caller.subject or "x"]}]}):
        assert not matches(match(**fields), ANONYMOUS)
    assert matches(match(subjects=["*"]), caller)


@SETTINGS
@given(words, st.lists(words, min_size=1, max_size=4))
def test_subjects_are_fnmatch_globs_case_sensitive(subject: str, globs: list[str]) -> None:
    expected = any(fnmatch.fnmatchcase(subject, g) for g in globs)
    assert matches(match(subjects=globs), Caller(subject)) is expected


@SETTINGS
@given(st.lists(words, max_size=4), st.lists(words, min_size=1, max_size=4))
def test_groups_match_when_any_is_shared(groups: list[str], wanted: list[str]) -> None:
    caller = caller_from_claims({"sub": "a", "groups": groups})
    assert matches(match(groups=wanted), caller) is bool(set(groups) & set(wanted))


@SETTINGS
@given(st.dictionaries(st.sampled_from(["callers", "effect", "skills", "tools", "extra"]),
                       st.one_of(st.none(), words, st.lists(words, max_size=2),
                                 st.dictionaries(words, words, max_size=1)), max_size=5))
def test_any_rule_input_parses_or_is_refused_by_a_validation_error(raw: dict[str, Any]) -> None:
    try:
        rule = CallerRule.model_validate(raw)
    except ValidationError:
        return
    assert rule.skills is not None or rule.tools is not None


@pytest.mark.parametrize(("raw", "message"), [
    ({"effect": "Deny"}, "a caller rule needs skills or tools"),
    ({"effect": "Permit", "tools": ["x"]}, "Input should be 'Allow', 'Deny' or"),
    ({"effect": "Deny", "skills": ["shell"]}, "a skill glob without '/' or '*'"),
    ({"effect": "Deny", "tools": []}, "at least 1 item"),
    ({"effect": "Deny", "tools": ["x"], "callers": {"groups": []}}, "at least 1 item"),
    ({"effect": "Deny", "tools": ["x"], "callers": {"team": ["a"]}}, "Extra inputs"),
])
def test_malformed_rules_are_refused_naming_the_reason(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CallerRule.model_validate(raw)


def test_rate_limit_bounds_and_default_scope() -> None:
    assert RateLimit.model_validate({"calls": 1, "perSeconds": 1}).per == "CallerAndTool"
    for raw in ({"calls": 0, "perSeconds": 1}, {"calls": 1, "perSeconds": 86401},
                {"calls": 1, "perSeconds": 1, "per": "Session"}):
        with pytest.raises(ValidationError):
            RateLimit.model_validate(raw)


def test_the_fields_live_where_the_contract_puts_them() -> None:
    rule = {"effect": "Deny", "tools": ["x"]}
    limit = {"calls": 1, "perSeconds": 1}
    actor = ActorSpec.model_validate({"skillAccessPolicy": {"callerRules": [rule]},
                                      "rateLimits": [limit]})
    policy = SkillPolicySpec.model_validate({"callerRules": [rule], "rateLimits": [limit]})
    assert actor.skill_access_policy.caller_rules[0].effect == policy.caller_rules[0].effect
    assert actor.rate_limits[0] == policy.rate_limits[0]
    with pytest.raises(ValidationError, match="at most 64 items"):
        SkillPolicySpec.model_validate({"callerRules": [rule] * 65})


def test_describe_names_whom_a_rule_is_for() -> None:
    assert CallerMatch().describe() == "every caller"
    assert match(groups=["contractors"], claims=[{"claim": "dept", "values": ["eng", "hr"]}],
                 ).describe() == "groups: [contractors]; dept: [eng, hr]"


@SETTINGS
@given(st.lists(st.text(st.sampled_from("ab*?[]!-/."), min_size=1, max_size=6), min_size=1,
                max_size=3), st.text(st.sampled_from("ab-/."), max_size=6))
def test_one_pattern_for_many_globs_matches_as_fnmatch_does(globs: list[str], name: str) -> None:
    expected = any(fnmatch.fnmatchcase(name, g) for g in globs)
    assert bool(glob_pattern(tuple(globs)).match(name)) is expected
