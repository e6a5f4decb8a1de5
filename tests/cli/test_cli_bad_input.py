"""Bad input never yields a traceback: a clear line per problem and exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from clirun import SKILLOP, problem_lines, run
from skillkit import noise

SKILL = "apiVersion: skillop.dev/v1alpha1\nkind: Skill\n"
ACTOR = "apiVersion: skillop.dev/v1alpha1\nkind: Actor\n"
TOOL = "apiVersion: skillop.dev/v1alpha1\nkind: Tool\n"
#: An 800-byte manifest whose aliases expand to 10^12 strings ("billion laughs").
ALIAS_BOMB = TOOL + "metadata: {name: lol}\nspec:\n  description: d\n  inputSchema:\n" + (
    '    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"    a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 12)))

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
    "missing-name": SKILL + "metadata: {namespace: team-a}\nspec: {}\n",
    "huge-name": SKILL + f"metadata: {{name: {'a' * 10_000}}}\nspec: {{}}\n",
    "huge-ref": ACTOR + f"metadata: {{name: a}}\nspec: {{skills: [{'b' * 10_000}]}}\n",
    "huge-namespace": SKILL + f"metadata: {{name: s, namespace: {'n' * 10_000}}}\nspec: {{}}\n",
    "number-name": SKILL + "metadata: {name: 12345, namespace: 7}\nspec: {}\n",
    "list-document": "- a\n- b\n",
    "scalar-document": "hello\n",
    "list-kind-bad-items": "apiVersion: v1\nkind: List\nitems: nope\n",
    "binary": bytes(range(256)) * 4,
    "nul-bytes": "apiVersion: v1\x00\n",
    "python-tag": "!!python/object/apply:os.system [echo pwned]\n",
    "bad-agent-skill": SKILL + "metadata: {name: s}\nspec: {agentSkills: [{inline: 'no front'}]}\n",
    "deep-nesting": SKILL + "metadata: {name: s}\nspec: {description: " + "[" * 5000
                    + "]" * 5000 + "}\n",
    "deep-schema": TOOL + "metadata: {name: t}\nspec: {description: d, inputSchema: {a: "
                   + "[" * 200 + "]" * 200 + "}}\n",
    "alias-bomb": ALIAS_BOMB,
    "nan": TOOL + "metadata: {name: t}\nspec: {description: d, inputSchema: {default: .nan}}\n",
    "binary-tag": TOOL + "metadata: {name: t}\nspec: {description: !!binary aGVsbG8=}\n",
    "set-tag": TOOL + "metadata: {name: t}\nspec: {description: d, runtime: !!set {a}}\n",
    "recursive-anchor": TOOL + "metadata: {name: t}\nspec: {description: d,"
                        " inputSchema: &s {items: *s}}\n",
    "number-key": TOOL + "metadata: {name: t}\nspec: {description: d, inputSchema: {1: a}}\n",
    "custom-tag": TOOL + "metadata: {name: t}\nspec: {description: !vault secret}\n",
    "string-bool": TOOL + "metadata: {name: t}\nspec: {description: d,"
                   " capabilities: {writes: 'yes'}}\n",
    "string-int": TOOL + "metadata: {name: t}\nspec: {description: d,"
                  " capabilities: {timeoutSeconds: '30'}}\n",
    "bool-int": ACTOR + "metadata: {name: a}\nspec: {skillAccessPolicy: {maxTools: true}}\n",
    "bool-enum": TOOL + "metadata: {name: t}\nspec: {description: d,"
                 " capabilities: {checkpoint: no}}\n",
    "newline-name": SKILL + 'metadata: {name: "notes\\n"}\n',
    "newline-ref": ACTOR + 'metadata: {name: a}\nspec: {skills: ["notes\\n"]}\n',
    "newline-tool-name": TOOL + 'metadata: {name: t}\nspec: {name: "t\\n", description: d}\n',
    "newline-skill-md": SKILL + "metadata: {name: md}\nspec: {agentSkills: [{inline: "
                        '"---\\nname: \\"notes\\\\n\\"\\ndescription: d\\n---\\nbody"}]}\n',
    "huge-key": TOOL + "metadata: {name: t}\nspec:\n  description: d\n  ? " + "k" * 1_000_000
                + "\n  : 1\n",
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
    assert result.stdout.splitlines()[-1] == "1 tool from 10000 skills, 9 tokens (cl100k_base)"


def test_a_long_cycle_gives_short_lines(tmp_path: Path) -> None:
    text = _chain(3000).replace("spec: {anonymousTools:", "spec: {includes: [{skill: s0}],"
                                  " anonymousTools:")
    result = run("validate", "-f", str(_write(tmp_path, "ring", text)))
    assert result.returncode == 1
    lines = problem_lines(result.stderr)
    cycles = [m for m in lines if m["reason"] == "CycleDetected"]
    assert len(cycles) == 3000
    assert max(len(m.string) for m in cycles) < 1000


def _limit_memory() -> None:
    """In the child: at most 1 GiB of address space (an expanding bomb dies early)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


def test_an_alias_bomb_is_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    path = _write(tmp_path, "bomb", ALIAS_BOMB)
    assert path.stat().st_size < 900
    for args in (("validate",), ("tools", "a", "-o", "json")):
        start = time.perf_counter()
        result = subprocess.run([*SKILLOP, *args, "-f", str(path)], capture_output=True,
                                text=True, timeout=60, preexec_fn=_limit_memory, check=False)
        elapsed = time.perf_counter() - start
        assert (result.returncode, result.stdout) == (1, ""), result.stderr[-500:]
        # ``tools a``: the actor is not found, and the file's problem says why.
        [line] = problem_lines(result.stderr.replace("Actor default/a not found in the given"
                                                     " manifests\n", ""))
        assert line["file"] == str(path) and "excessive aliasing" in line["message"]
        assert elapsed < 10, elapsed


def test_stdin_is_read_with_the_checks_files_get(tmp_path: Path) -> None:
    path = _write(tmp_path, "latin1", SKILL + "metadata: {name: s}\nspec: {description: caf\xe9}\n")
    path.write_bytes(path.read_text().encode("latin-1"))
    from_file = subprocess.run([*SKILLOP, "validate", "-f", str(path)], capture_output=True,
                               timeout=60, check=False)
    from_stdin = subprocess.run([*SKILLOP, "validate", "-f", "-"], input=path.read_bytes(),
                                capture_output=True, timeout=60, check=False)
    assert from_stdin.returncode == from_file.returncode == 1
    assert b"Traceback" not in from_stdin.stderr
    assert from_stdin.stderr.decode() == from_file.stderr.decode().replace(str(path), "<stdin>")
    assert "not UTF-8" in from_stdin.stderr.decode()


def test_stdin_reads_the_same_yaml_as_files() -> None:
    result = run("validate", "-f", "-", stdin=CASES["nan"])  # type: ignore[arg-type]
    [line] = problem_lines(result.stderr)
    assert (line["file"], line["field"], line["reason"]) == (
        "<stdin>", "spec.inputSchema.default", "InvalidSpec")


def _big_actor(tmp_path: Path, tools: int, *, random: bool = True) -> Path:
    """Actor ``a`` of skills of 700 tools each; ``random``: descriptions gzip cannot shrink."""
    skills = []
    for n in range((tools + 699) // 700):
        anon = ", ".join(
            f"{{name: t{i:04d}, description: {noise(str(i), 4000) if random else 'x' * 4000}}}"
            for i in range(n * 700, min(tools, (n + 1) * 700)))
        skills.append(SKILL + f"metadata: {{name: s{n}}}\nspec: {{anonymousTools: [{anon}]}}\n")
    names = ", ".join(f"s{n}" for n in range(len(skills)))
    text = "---\n".join([*skills, ACTOR + f"metadata: {{name: a}}\nspec: {{skills: [{names}]}}\n"])
    return _write(tmp_path, f"big{tools}{random}", text)


def test_an_actor_too_large_for_its_configmaps_fails_as_in_the_operator(tmp_path: Path) -> None:
    path = _big_actor(tmp_path, 1400)  # about 5.8 MB of tools.json, 4.3 MB compressed
    for args in (("validate",), ("tools", "a", "-o", "json")):
        result = run(*args, "-f", str(path))
        assert (result.returncode, result.stdout) == (1, ""), result.stderr[-500:]
        [line] = problem_lines(result.stderr)
        assert (line["subject"], line["field"], line["reason"]) == (
            "Actor default/a", "spec.skills", "TooLarge")
        assert "4 ConfigMaps of 900 KiB" in line["message"]
        assert "the largest: t" in line["message"]
    # The same skill flattened alone has no ConfigMap, so no limit.
    assert run("flatten", "s0", "-f", str(path), "-o", "json").returncode == 0


def test_an_actor_over_one_configmap_is_valid_and_printed_uncompressed(tmp_path: Path) -> None:
    path = _big_actor(tmp_path, 240, random=False)  # about 1 MiB of tools.json: packed
    assert run("validate", "-f", str(path)).returncode == 0
    printed = run("tools", "a", "-f", str(path), "-o", "json")
    assert printed.returncode == 0 and len(printed.stdout) > 900 * 1024
    document = json.loads(printed.stdout)
    assert len(document["tools"]) == 240 and printed.stdout.endswith("}\n")


def test_a_number_too_long_for_python_is_read_as_kubectl_reads_it(tmp_path: Path) -> None:
    # Python's int() refuses decimals of over 4,300 digits (a bare ValueError, once a
    # traceback); go-yaml keeps a number past any float as its text.
    digits = "9" * 5000
    skill_md = f"---\\nname: big\\ndescription: d\\nlicense: {digits}\\n---\\nb"
    path = _write(tmp_path, "big", TOOL + "metadata: {name: t}\nspec: {description: d,"
                  f" inputSchema: {{type: object, maximum: {digits}}}}}\n---\n" + SKILL
                  + "metadata: {name: s}\nspec:\n  tools: [{ref: t}]\n  agentSkills:\n"
                  f'  - inline: "{skill_md}"\n')
    result = run("validate", "-f", str(path))
    assert (result.returncode, result.stderr) == (0, "")
    flattened = run("flatten", "s", "-f", str(path), "-o", "json")
    big, tool = json.loads(flattened.stdout)["tools"]
    assert (big["name"], tool["inputSchema"]["maximum"]) == ("big", digits)


@pytest.mark.parametrize("args", [
    ("tools", "a", "-f", "{dir}", "--discover", "--timeout", "0"),
    ("tools", "a", "-f", "{dir}", "--discover", "--timeout", "nan"),
    ("tools", "a", "-f", "{dir}", "--discover", "--timeout", "-1"),
    ("tools", "a", "-f", "{dir}", "--discover", "--allow", ""),
    ("tools", "a", "-f", "{dir}", "--discover", "--allow", "ftp://x.svc"),
    ("validate", "-f", ""),
    ("discover", "http://mcp.tools.svc/mcp", "--timeout", "0"),
    ("discover", "http://mcp.tools.svc/mcp", "--allow", " "),
    ("inject", "-f", ""),
    ("gateway", "--allow", ""),
    ("gateway", "--poll", "0"),
])
def test_a_bad_flag_value_is_a_usage_error_naming_it(tmp_path: Path,
                                                       args: tuple[str, ...]) -> None:
    _write(tmp_path, "ok", SKILL + "metadata: {name: s}\nspec: {builtins: [git_operations]}\n")
    result = run(*(arg.format(dir=tmp_path) for arg in args))
    assert "Traceback" not in result.stderr, result.stderr
    assert (result.returncode, result.stdout) == (2, "")
    assert f"argument {args[-2]}" in result.stderr.splitlines()[-1]
