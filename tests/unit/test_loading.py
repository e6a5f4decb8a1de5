"""Reading manifests: bad input is a Problem naming the file, never an exception;
deep include chains work without recursion."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from skillkit import P

from skillop.cli.load import load_paths, load_text
from skillop.model.names import ObjectRef
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver

SKILL = "apiVersion: skillop.dev/v1alpha1\nkind: Skill\n"


@pytest.mark.parametrize(("text", "message"), [
    ("a: [\n", "malformed YAML at line 2"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    (SKILL + "metadata: {name: x}\n" + SKILL, "duplicate key 'apiVersion'"),
    ("!!python/object:os.system [ls]\n", "malformed YAML"),
    ("- 1\n- 2\n", "a manifest must be a mapping"),
    ("just words\n", "a manifest must be a mapping"),
    ("42\n", "a manifest must be a mapping"),
    (SKILL + "spec: {}\n", "metadata must be a mapping"),
    (SKILL + "metadata: {name: x}\n", "spec: InvalidSpec: spec is required"),
    (SKILL + "metadata: {name: x}\nspec: 5\n", "spec must be a mapping"),
    ("apiVersion: skillop.dev/v1alpha1\nkind: Gadget\nmetadata: {name: x}\n", "unknown kind"),
    ("kind: Skill\nmetadata: {name: x}\n", "apiVersion and kind are required"),
    ("apiVersion: v1\nkind: List\nitems: 5\n", "List"),
    ("&a [*a]\n", "a manifest must be a mapping"),
])
def test_bad_documents_become_problems(text: str, message: str) -> None:
    loaded = load_text(text, origin="bad.yaml")
    assert loaded.objects == []
    assert len(loaded.problems) == 1
    line = loaded.problems[0].line()
    assert line.startswith("bad.yaml: ")
    assert message in line
    assert "\n" not in line


@pytest.mark.parametrize("text", ["", "\n", "---\n---\n", "# only a comment\n", "null\n"])
def test_empty_input_is_nothing(text: str) -> None:
    loaded = load_text(text, origin="empty.yaml")
    assert (loaded.objects, loaded.problems) == ([], [])


def test_billion_laughs_does_not_blow_up() -> None:
    text = "a: &a [x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=False))
    start = time.perf_counter()
    loaded = load_text(text, origin="lol.yaml")
    assert time.perf_counter() - start < 5
    assert [p.reason for p in loaded.problems] == [P.INVALID_SPEC]


def test_json_and_lists_are_read() -> None:
    text = ('{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion":'
            ' "skillop.dev/v1alpha1", "kind": "Skill", "metadata": {"name": "s"}, "spec": {}}]}')
    loaded = load_text(text, origin="list.json")
    assert loaded.problems == []
    assert [o.ref for o in loaded.objects] == [ObjectRef("default", "s")]  # type: ignore


def test_files_directories_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.yaml").write_text(SKILL + "metadata: {name: b}\nspec: {}\n")
    (tmp_path / "sub" / "a.yml").write_text(SKILL + "metadata: {name: a}\nspec: {}\n")
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "junk.yaml").write_bytes(b"\xff\xfe\x00binary")
    stdin = io.StringIO(SKILL + "metadata: {name: c}\nspec: {}\n")
    loaded = load_paths([str(tmp_path), "-", str(tmp_path / "missing.yaml")],
                        namespace="team-a", stdin=stdin)
    assert sorted(o.ref.name for o in loaded.objects) == ["a", "b", "c"]  # type: ignore
    assert all(o.ref.namespace == "team-a" for o in loaded.objects)  # type: ignore
    lines = sorted(p.line() for p in loaded.problems)
    assert len(lines) == 2
    assert "junk.yaml" in lines[0] and "cannot read" in lines[0]
    assert "missing.yaml" in lines[1] and "no such file" in lines[1]


def test_invalid_objects_are_remembered() -> None:
    loaded = load_text(SKILL + "metadata: {name: s, namespace: team-a}\nspec: {tols: []}\n",
                       origin="x.yaml")
    assert loaded.invalid == {("Skill", "team-a", "s")}


def _chain(n: int, *, tools_every: int) -> str:
    docs = []
    for i in range(n):
        spec = []
        if i + 1 < n:
            spec.append(f"includes: [{{skill: s{i + 1}}}]")
        if i % tools_every == 0 or i == n - 1:
            spec.append(f"anonymousTools: [{{name: t{i}, description: d}}]")
        docs.append(f"{SKILL}metadata: {{name: s{i}, namespace: team-a}}\n"
                    f"spec: {{{', '.join(spec)}}}\n")
    docs.append("apiVersion: skillop.dev/v1alpha1\nkind: Actor\n"
                "metadata: {name: a, namespace: team-a}\nspec: {skills: [s0]}\n")
    return "---\n".join(docs)


def test_ten_thousand_skill_include_chain() -> None:
    loaded = load_text(_chain(10_000, tools_every=1000), origin="chain.yaml")
    assert loaded.problems == []
    start = time.perf_counter()
    resolver = Resolver(Catalog.of(loaded.objects))
    assert resolver.all_problems() == []
    resolution = resolver.resolve_actor(ObjectRef("team-a", "a"))
    elapsed = time.perf_counter() - start
    assert resolution is not None and resolution.ok
    assert len(resolution.skills) == 10_000
    assert [t.name for t in resolution.tools] == sorted(
        ["t9999", *(f"t{i}" for i in range(0, 10_000, 1000))])
    assert len(resolution.tool("t9999").path) == 10_000  # type: ignore[union-attr]
    assert elapsed < 20, elapsed
