"""Bad input never yields a traceback: a clear line per problem and exit 1."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from clirun import problem_lines, run

SKILL = "apiVersion: skillop.dev/v1alpha1\nkind: Skill\n"
ACTOR = "apiVersion: skillop.dev/v1alpha1\nkind: Actor\n"

CASES: dict[str, bytes | str] = {
    "malformed": "apiVersion: [unclosed\n",
    "tabs": "a:\n\t- b\n",
    "duplicate-keys": SKILL + "metadata: {name: s}\nmetadata: {name: t}\n",
    "wrong-types": SKILL + "metadata: {name: s}\nspec: {tools: 5, builtins: {a: b}}\n",
    "spec-not-mapping": SKILL + "metadata: {name: s}\nspec: [1, 2]\n",
    "unknown-kind": "apiVersion: skillop.dev/v1alpha1\nkind: Gadget\nmetadata: {name: g}\n",
    "unknown-version": "apiVersion: skillop.dev/v9\nkind: Skill\nmetadata: {name: g}\n",
    "missing-metadata": SKILL + "spec: {}\n",
    "missing-description": "apiVersion: skillop.dev/v1alpha1\nkind: Tool\nmetadata: {name: t}\n",
    "missing-name": SKILL + "metadata: {namespace: team-a}\n",
    "huge-name": SKILL + f"metadata: {{name: {'a' * 10_000}}}\n",
    "huge-ref": ACTOR + f"metadata: {{name: a}}\nspec: {{skills: [{'b' * 10_000}]}}\n",
    "huge-namespace": SKILL + f"metadata: {{name: s, namespace: {'n' * 10_000}}}\n",
    "number-name": SKILL + "metadata: {name: 12345, namespace: 7}\n",
    "list-document": "- a\n- b\n",
    "scalar-document": "hello\n",
    "list-kind-bad-items": "apiVersion: v1\nkind: List\nitems: nope\n",
    "binary": bytes(range(256)) * 4,
    "nul-bytes": "apiVersion: v1\x00\n",
    "python-tag": "!!python/object/apply:os.system [echo pwned]\n",
    "bad-agent-skill": SKILL + "metadata: {name: s}\nspec: {agentSkills: [{inline: 'no front'}]}\n",
    "deep-nesting": SKILL + "metadata: {name: s}\nspec: {description: " + "[" * 5000
                    + "]" * 5000 + "}\n",
}


def _write(tmp_path: Path, name: str, content: bytes | str) -> Path:
    path = tmp_path / f"{name}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case in a file of its own, all in one directory (one CLI run covers all)."""
    root = tmp_path_factory.mktemp("bad")
    for name, content in CASES.items():
        _write(root, name, content)
    return root


def test_every_bad_file_gets_problem_lines_naming_it(bad_dir: Path) -> None:
    result = run("validate", "-f", str(bad_dir))
    assert "Traceback" not in result.stderr, result.stderr
    assert (result.returncode, result.stdout) == (1, "")
    lines = problem_lines(result.stderr)
    assert {Path(m["file"]).stem for m in lines} == set(CASES)
    assert max(len(m.string) for m in lines) < 600


@pytest.mark.parametrize("args", [("tools", "a", "-o", "json"), ("flatten", "s", "-o", "yaml"),
                                  ("tree", "s"), ("explain", "a", "t")])
def test_every_command_survives_bad_input(bad_dir: Path, args: tuple[str, ...]) -> None:
    result = run(*args, "-f", str(bad_dir))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1
    if args[0] in ("tools", "flatten"):
        assert result.stdout == ""


@pytest.mark.parametrize("name", ["binary", "huge-name"])
def test_one_bad_file_alone(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, CASES[name])
    result = run("validate", "-f", str(path))
    assert result.returncode == 1
    [line] = problem_lines(result.stderr)
    assert line["file"] == str(path)


@pytest.mark.parametrize("content", ["", "---\n# nothing here\n"])
def test_empty_files_are_valid(tmp_path: Path, content: str) -> None:
    result = run("validate", "-f", str(_write(tmp_path, "empty", content)))
    assert (result.returncode, result.stdout) == (0, "valid: 0 tools, 0 skills, 0 actors\n")


def test_a_missing_file(tmp_path: Path) -> None:
    result = run("validate", "-f", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert "no such file or directory" in result.stderr


def test_an_unreadable_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "secret", SKILL + "metadata: {name: s}\n")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user who can read anything")
        result = run("validate", "-f", str(path))
        assert result.returncode == 1
        assert "cannot read" in result.stderr
    finally:
        path.chmod(0o644)


def test_good_objects_beside_bad_ones_are_still_checked(tmp_path: Path) -> None:
    path = _write(tmp_path, "mixed", "\n---\n".join([
        "- not a manifest",
        SKILL + "metadata: {name: ok}\nspec: {includes: [{skill: missing}]}",
        SKILL + "metadata: {name: typo}\nspec: {buitins: [file_operations]}",
    ]))
    result = run("validate", "-f", str(path))
    reasons = sorted(m["reason"] for m in problem_lines(result.stderr))
    assert reasons == ["InvalidSpec", "InvalidSpec", "RefNotFound"]


def _chain(n: int) -> str:
    docs = [SKILL + f"metadata: {{name: s{i}}}\nspec: {{includes: [{{skill: s{i + 1}}}]}}\n"
            for i in range(n - 1)]
    docs.append(SKILL + f"metadata: {{name: s{n - 1}}}\n"
                "spec: {anonymousTools: [{name: deep, description: at the bottom}]}\n")
    docs.append(ACTOR + "metadata: {name: a}\nspec: {skills: [s0]}\n")
    return "---\n".join(docs)


def test_ten_thousand_skill_chain(tmp_path: Path) -> None:
    path = _write(tmp_path, "chain", _chain(10_000))
    for args in (("validate",), ("tools", "a")):
        start = time.perf_counter()
        result = run(*args, "-f", str(path))
        elapsed = time.perf_counter() - start
        print(f"{' '.join(args)} on a 10,000-skill chain: {elapsed:.2f} s")
        assert result.returncode == 0, result.stderr[-2000:]
        assert "RecursionError" not in result.stderr
        assert elapsed < 30
    assert result.stdout.splitlines()[-1] == "1 tools from 10000 skills"


def test_a_long_cycle_gives_short_lines(tmp_path: Path) -> None:
    text = _chain(3000).replace("spec: {anonymousTools:", "spec: {includes: [{skill: s0}],"
                                  " anonymousTools:")
    result = run("validate", "-f", str(_write(tmp_path, "ring", text)))
    assert result.returncode == 1
    lines = problem_lines(result.stderr)
    cycles = [m for m in lines if m["reason"] == "CycleDetected"]
    assert len(cycles) == 3000
    assert max(len(m.string) for m in cycles) < 1000
