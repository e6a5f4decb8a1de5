"""Text from input reaches a terminal escaped: no control, bidi or invisible
character survives in a table, a tree, an explanation or an error line, and what
was there stays visible as its escape (docs/security.md, Text shown to a person)."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

import yaml
from clirun import run
from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import actor, skill

from skillop.cli.main import main
from skillop.cli.safetext import shown, shown_lines

#: Characters a forged object would use: terminal controls and sequences, bidi
#: embeddings, overrides and isolates, marks, zero-width and invisible ones.
HOSTILE = ["\x1b", "\x1b[2K", "\x1b[1A", "\x1b]0;t\x07", "\x9b", "\x85", "\x7f", "\r", "\n",
           "\t", "\x00", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067",
           "\u2068", "\u2069", "\u200e", "\u200f", "\u061c", "\u200b", "\u200c", "\u200d",
           "\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029", "\u00a0", "\u3000", "\u034f",
           "\ufe0f", "\u3164", "\U000e0041", "\U000e0101", "\ud800", "\ue000", "\U0010fffe"]
texts = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=6), max_size=20).map("".join)
_ESCAPE = re.compile(r"\\u([0-9a-f]{4})|\\U([0-9a-f]{8})")


def hidden(text: str) -> list[str]:
    """What a terminal would not show as itself (a line break aside)."""
    blank = set("\u034f\u115f\u1160\u2800\u3164\uffa0") | {chr(c) for c in range(0x180B, 0x1810)}
    return [ch for ch in text if ch != "\n" and (not ch.isprintable() or ch in blank
            or 0xFE00 <= ord(ch) <= 0xFE0F or 0xE0100 <= ord(ch) <= 0xE01EF)]


def unescaped(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_nothing_hidden_survives_and_what_was_there_stays_visible(text: str) -> None:
    one, lines = shown(text), shown_lines(text)
    assert hidden(one) == [] and "\n" not in one
    assert hidden(lines) == [] and lines.count("\n") == text.count("\n")
    if "\\" not in text:  # nothing lost or merged: the escapes read back to the input
        assert unescaped(one) == text and unescaped(lines) == text
    assert shown(one) == one  # escaped once: printed again, it is the same


def _main(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _manifests(text: str) -> list[dict[str, Any]]:
    tools = [{"name": "t", "description": text}]
    return [skill("s", anonymousTools=tools, includes=[{"skill": "s2"}]),
            skill("s2", anonymousTools=[{"name": "u", "description": "d"}]),
            actor("a", skills=["s"], skillAccessPolicy={"deny": ["*/s2"]})]


@settings(max_examples=40, deadline=None)
@given(texts)
def test_tables_trees_and_explanations_of_any_description(tmp_path_factory: Any,
                                                          text: str) -> None:
    folder = tmp_path_factory.mktemp("m")
    (folder / "m.yaml").write_text(yaml.safe_dump_all(_manifests(text), allow_unicode=True))
    for args in (["tools", "team-a/a"], ["flatten", "team-a/s"], ["tree", "team-a/a"],
                 ["explain", "team-a/a", "t"], ["validate"]):
        code, out, err = _main(*args, "-f", str(folder))
        assert code in (0, 1), (args, err)
        assert hidden(out) == [] and hidden(err) == [], (args, out, err)


def test_the_console_script_escapes_a_forged_description_and_name(tmp_path: Any) -> None:
    forged = "fine\x1b[1A\x1b[2K\u202eevil\u2066"
    docs = [*_manifests(forged), actor("b", skills=["missing\x1b[2J"])]
    (tmp_path / "m.yaml").write_text(yaml.safe_dump_all(docs, allow_unicode=True))
    listed = run("tools", "team-a/a", "-f", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert hidden(listed.stdout) == []
    assert "fine\\u001b[1A\\u001b[2K\\u202eevil\\u2066" in listed.stdout
    checked = run("validate", "-f", str(tmp_path))
    assert checked.returncode == 1 and hidden(checked.stderr) == []
    assert "missing" in checked.stderr
    for name in ("team-a/gh\u2066ost", "team-a/ghost\u202e", "gh\x1b[2Jost"):
        asked = run("tools", name, "-f", str(tmp_path))
        assert asked.returncode in (1, 2) and "ost" in asked.stderr, asked.stderr
        assert hidden(asked.stderr) == [], asked.stderr
