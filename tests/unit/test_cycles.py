"""Include cycles (Semantics 8): an error on every skill on the cycle, with its path."""

from __future__ import annotations

import time

import pytest
from skillkit import P, actor, all_problems, anon, resolve_actor, resolve_skill, skill


def cycle_lines(docs: list[dict[str, object]]) -> dict[str, tuple[str, str]]:
    return {p.subject.name: (p.field, p.message)
            for p in all_problems(docs) if p.reason == P.CYCLE_DETECTED}


def test_self_include() -> None:
    assert cycle_lines([skill("a", includes=[{"skill": "a"}])]) == {
        "a": ("spec.includes[0].skill", "include cycle: team-a/a -> team-a/a")}


def test_two_cycle() -> None:
    docs = [skill("a", includes=[{"skill": "b"}]), skill("b", includes=[{"skill": "a"}])]
    assert cycle_lines(docs) == {
        "a": ("spec.includes[0].skill", "include cycle: team-a/a -> team-a/b -> team-a/a"),
        "b": ("spec.includes[0].skill", "include cycle: team-a/b -> team-a/a -> team-a/b"),
    }


def test_three_cycle_names_the_include_that_closes_it() -> None:
    docs = [skill("a", includes=[{"skill": "x"}, {"skill": "b"}]),
            skill("b", includes=[{"skill": "c"}]),
            skill("c", includes=[{"skill": "a"}]),
            skill("x", anonymousTools=[anon("fine")])]
    assert cycle_lines(docs) == {
        "a": ("spec.includes[1].skill",
              "include cycle: team-a/a -> team-a/b -> team-a/c -> team-a/a"),
        "b": ("spec.includes[0].skill",
              "include cycle: team-a/b -> team-a/c -> team-a/a -> team-a/b"),
        "c": ("spec.includes[0].skill",
              "include cycle: team-a/c -> team-a/a -> team-a/b -> team-a/c"),
    }


def test_skills_off_the_cycle_are_not_in_error_themselves() -> None:
    docs = [skill("a", includes=[{"skill": "b"}]), skill("b", includes=[{"skill": "a"}]),
            skill("above", includes=[{"skill": "a"}]), skill("below"),
            skill("other", includes=[{"skill": "below"}])]
    assert set(cycle_lines(docs)) == {"a", "b"}
    assert resolve_skill(docs, "team-a/other").ok
    assert not resolve_skill(docs, "team-a/above").ok


def test_cross_namespace_cycle() -> None:
    everyone = {"from": "All"}
    docs = [skill("a", includes=[{"skill": "platform/b"}], sharing=everyone),
            skill("b", "platform", includes=[{"skill": "team-a/a"}], sharing=everyone)]
    assert cycle_lines(docs)["a"][1] == "include cycle: team-a/a -> platform/b -> team-a/a"


@pytest.mark.parametrize("root", ["a", "b", "entry"])
def test_an_actor_reaching_a_cycle_is_not_ok(root: str) -> None:
    docs = [skill("a", includes=[{"skill": "b"}], anonymousTools=[anon("ta")]),
            skill("b", includes=[{"skill": "a"}], anonymousTools=[anon("tb")]),
            skill("entry", includes=[{"skill": "a"}]),
            actor("act", skills=[root])]
    resolution = resolve_actor(docs, "team-a/act")
    assert not resolution.ok
    # Every skill on the cycle, as validate says, whichever one the Actor reaches first.
    assert {p.subject.name for p in resolution.problems
            if p.reason == P.CYCLE_DETECTED} == {"a", "b"}


def test_a_skill_including_a_cycle_reports_every_skill_on_it() -> None:
    docs = [skill("a", includes=[{"skill": "b"}]), skill("b", includes=[{"skill": "c"}]),
            skill("c", includes=[{"skill": "a"}]), skill("entry", includes=[{"skill": "a"}])]
    resolution = resolve_skill(docs, "team-a/entry")
    assert {p.subject.name: p.message for p in resolution.problems} == {
        name: message for name, (_, message) in cycle_lines(docs).items()}


def test_a_skill_on_the_cycle_the_actors_policy_prunes_is_not_reported() -> None:
    docs = [skill("a", includes=[{"skill": "b"}]), skill("b", includes=[{"skill": "a"}]),
            actor("act", skills=["a"], skillAccessPolicy={"deny": ["*/b"]})]
    resolution = resolve_actor(docs, "team-a/act")
    assert [p.subject.name for p in resolution.problems] == ["a"]


def test_a_10000_skill_cycle_is_reported_quickly_and_briefly() -> None:
    n = 10_000
    docs = [skill(f"s{i}", includes=[{"skill": f"s{(i + 1) % n}"}]) for i in range(n)]
    # CPU time, not wall time: a quadratic walk costs minutes of CPU, while a busy
    # machine (other test workers) only stretches the wall clock.
    start = time.process_time()
    lines = cycle_lines(docs)
    elapsed = time.process_time() - start
    assert len(lines) == n
    field, message = lines["s5"]
    assert field == "spec.includes[0].skill"
    assert message.startswith("include cycle: team-a/s5 -> team-a/s6 -> ")
    assert message.endswith(" -> team-a/s3 -> team-a/s4 -> team-a/s5")
    assert "more)" in message
    assert len(message) < 1000
    assert elapsed < 10, elapsed


def test_two_cycles_sharing_a_skill() -> None:
    docs = [skill("hub", includes=[{"skill": "x"}, {"skill": "y"}]),
            skill("x", includes=[{"skill": "hub"}]),
            skill("y", includes=[{"skill": "hub"}])]
    lines = cycle_lines(docs)
    assert set(lines) == {"hub", "x", "y"}
    assert lines["y"][1] == "include cycle: team-a/y -> team-a/hub -> team-a/y"
