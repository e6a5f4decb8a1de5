"""Counts are said in the right number: "1 tool from 1 skill", "2 policies"."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from skillkit import actor, anon, resolve_actor, skill

from skillop.cli.render import tools_table
from skillop.model.wording import count

SOURCE = Path(__file__).resolve().parents[2] / "operator" / "skillop"


@given(st.integers(min_value=0, max_value=10_000))
def test_one_is_singular_every_other_count_plural(n: int) -> None:
    assert count(n, "tool") == (f"{n} tool" if n == 1 else f"{n} tools")
    assert count(n, "policy", "policies").endswith("policy" if n == 1 else "policies")


def test_a_one_skill_set_says_one_skill() -> None:
    resolution = resolve_actor([skill("s", anonymousTools=[anon("t")]), actor("a", skills=["s"])],
                               "team-a/a")
    assert tools_table(resolution).splitlines()[-1].startswith("1 tool from 1 skill, ")


def test_no_count_in_the_source_is_pluralised_by_hand() -> None:
    """An f-string "{len(x)} things" is "1 things" for one: ``count`` says it."""
    by_hand = re.compile(r"\{len\([^}]*\)\} [a-z]+s\b")
    found = [f"{path.relative_to(SOURCE)}:{n}: {line.strip()}"
             for path in sorted(SOURCE.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if by_hand.search(line)]
    assert found == []
