"""A name that is not found is reported with the closest names of its kind (typos)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from skillkit import actor, resolve_actor, resolve_skill, skill

from skillop.model import problems as P
from skillop.model.names import did_you_mean


def test_a_mistyped_skill_reference_names_the_closest_skills() -> None:
    docs = [skill("testing"), skill("linting"), actor("dev", skills=["testng"])]
    (problem,) = [p for p in resolve_actor(docs, "team-a/dev").problems
                  if p.reason == P.REF_NOT_FOUND]
    assert problem.message == "skill team-a/testng not found; did you mean 'testing'?"


def test_nothing_close_is_no_suggestion() -> None:
    docs = [skill("testing"), actor("dev", skills=["zzz"])]
    (problem,) = resolve_actor(docs, "team-a/dev").problems
    assert problem.message == "skill team-a/zzz not found"


def test_only_names_of_the_same_namespace_are_suggested() -> None:
    docs = [skill("testing", "team-b"), actor("dev", skills=["testng"])]
    (problem,) = resolve_actor(docs, "team-a/dev").problems
    assert "did you mean" not in problem.message


def test_a_mistyped_builtin_group_names_the_closest_group() -> None:
    (problem,) = resolve_skill([skill("fs", builtins=["file_operation"])],
                               "team-a/fs").problems
    assert problem.reason == P.UNKNOWN_BUILTIN
    assert problem.message.startswith(
        "unknown built-in group 'file_operation'; did you mean 'file_operations'?; known: ")


def test_several_close_names_are_listed_best_first() -> None:
    assert did_you_mean("reviewr", ["reviewers", "reviewer", "developer"]) == (
        "; did you mean 'reviewer' or 'reviewers'?")


@given(st.text(max_size=20), st.lists(st.text(max_size=20), max_size=20))
def test_a_suggestion_is_one_line_of_given_names_never_the_name_itself(
        name: str, candidates: list[str]) -> None:
    said = did_you_mean(name, candidates)
    if said:
        assert said.startswith("; did you mean ") and said.endswith("?")
        assert repr(name) not in said.removeprefix("; did you mean ").split(" or ")
        assert any(repr(c) in said for c in candidates)
