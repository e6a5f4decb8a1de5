"""The ``skillop`` command, run as a subprocess on real files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import EXAMPLES, PROBLEM_LINE, PYTHON_ARGS, command_for, problem_lines, run

from skillop.cli.load import load_paths
from skillop.model.names import ObjectRef
from skillop.model.toolset import TOOLS_KEY
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import configmap_data

EX = str(EXAMPLES)
BAD = """\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: a, namespace: team-a}
spec:
  includes:
    - skill: hub:team-a/x
  tools:
    - ref: missing-tool
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: c, namespace: team-a}
spec:
  includs: []
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: act, namespace: team-a}
spec:
  skills: [a, nope]
"""


def _expected_document(actor: str) -> str:
    """The ``tools.json`` the operator writes into the Actor's ConfigMap."""
    resolver = Resolver(Catalog.of(load_paths([EX]).objects))
    resolution = resolver.resolve_actor(ObjectRef(*actor.split("/")))
    assert resolution is not None
    return configmap_data(resolution.text, resolution.tools)[TOOLS_KEY]


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return path


# -- validate -------------------------------------------------------------------------


def test_validate_examples() -> None:
    result = run("validate", "-f", EX)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "valid: 3 tools, 8 skills, 2 actors, 1 policy\n"


def test_validate_reports_one_line_per_problem(bad: Path) -> None:
    result = run("validate", "-f", str(bad))
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == len(set(lines))
    parsed = [(m["file"], m["subject"], m["field"], m["reason"])
              for m in problem_lines(result.stderr)]
    assert parsed == [
        (str(bad), "Actor team-a/act", "spec.skills[1]", "RefNotFound"),
        (str(bad), "Skill team-a/a", "spec.includes[0].skill", "InvalidRef"),
        (str(bad), "Skill team-a/a", "spec.tools[0].ref", "RefNotFound"),
        (str(bad), "Skill team-a/c", "spec.includs", "InvalidSpec"),
    ]
    assert "'hub'" in lines[1]
    assert lines[3].endswith("spec.includs: InvalidSpec: unknown field")


def test_validate_cycle_and_forbidden_override(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: a, namespace: team-a}
spec: {includes: [{skill: b}], builtins: [file_operations]}
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: b, namespace: team-a}
spec: {includes: [{skill: a}]}
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: top, namespace: team-a}
spec:
  includes:
    - skill: fs
      overrides: {write_file: {capabilities: {readOnly: true}}}
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: fs, namespace: team-a}
spec: {builtins: [file_operations]}
""")
    result = run("validate", "-f", str(tmp_path))
    assert result.returncode == 1
    messages = {(m["subject"], m["reason"]): m["message"] for m in problem_lines(result.stderr)}
    assert messages[("Skill team-a/a", "CycleDetected")] == (
        "include cycle: team-a/a -> team-a/b -> team-a/a")
    assert messages[("Skill team-a/b", "CycleDetected")] == (
        "include cycle: team-a/b -> team-a/a -> team-a/b")
    assert "readOnly" in messages[("Skill team-a/top", "ForbiddenOverride")]


def test_tools_reports_a_cycle_on_every_skill_on_it_as_validate_does(tmp_path: Path) -> None:
    # The Actor reaches the cycle a -> b -> a through another skill, top.
    (tmp_path / "m.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: top}
spec: {includes: [{skill: a}]}
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: a}
spec: {includes: [{skill: b}]}
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: b}
spec: {includes: [{skill: a}]}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: act}
spec: {skills: [top]}
""")
    validate, tools = (run(*args, "-f", str(tmp_path)) for args in (("validate",),
                                                                     ("tools", "act")))
    assert (validate.returncode, tools.returncode) == (1, 1)
    lines = [(m["subject"], m["message"]) for m in problem_lines(tools.stderr)]
    assert lines == [
        ("Skill default/a", "include cycle: default/a -> default/b -> default/a"),
        ("Skill default/b", "include cycle: default/b -> default/a -> default/b")]
    assert tools.stderr == validate.stderr


def test_validate_refuses_erased_risk_and_globs_that_never_match(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: sneaky, namespace: team-a}
spec:
  tools:
    - ref: platform/kubectl-apply
      overrides: {capabilities: {writes: false}}
  includes:
    - skill: docker-tools
      overrides: {build_image: {capabilities: {openWorld: false}}}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: typo, namespace: team-a}
spec:
  skills: [full-stack-dev]
  skillAccessPolicy: {deny: [devops-toolkit]}
""")
    result = run("validate", "-f", EX, "-f", str(tmp_path))
    assert (result.returncode, result.stdout) == (1, "")
    found = [(m["subject"], m["field"], m["reason"]) for m in problem_lines(result.stderr)]
    assert found == [
        ("Actor team-a/typo", "spec.skillAccessPolicy.deny[0]", "InvalidSpec"),
        ("Skill team-a/sneaky", "spec.includes[0].overrides.build_image.capabilities.openWorld",
         "ForbiddenOverride"),
        ("Skill team-a/sneaky", "spec.tools[0].overrides.capabilities.writes",
         "ForbiddenOverride"),
    ]


# -- tools ------------------------------------------------------------------------------


def test_tools_json_is_exactly_the_toolset_document() -> None:
    """The ConfigMap's tools.json bytes (what the operator writes for the same input)."""
    result = run("tools", "team-a/developer", "-f", EX, "-o", "json")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == _expected_document("team-a/developer")
    doc = json.loads(result.stdout)
    assert sorted(doc) == ["actor", "agentSkills", "apiVersion", "hash", "kind", "mcpServers",
                           "tokens", "tools"]
    assert (doc["kind"], doc["actor"]) == ("ToolSet", "team-a/developer")
    names = [t["name"] for t in doc["tools"]]
    assert names == sorted(names)
    assert {t["source"] for t in doc["tools"]} == {"builtin", "tool", "mcp", "anonymous",
                                                   "agent_skill"}
    for tool in doc["tools"]:
        assert {"name", "bindingName", "qualifiedName", "source", "skill", "description",
                "inputSchema", "capabilities", "path"} <= set(tool)
        assert ("mcpServer" in tool) == (tool["source"] == "mcp")
    assert doc["mcpServers"] == [{"name": "docker", "skill": "team-a/docker-tools",
                                  "transport": "streamable-http",
                                  "url": "http://docker-mcp.tools.svc:8080/mcp"}]
    assert doc["agentSkills"] == [{"name": "release-notes", "skill": "team-a/deploy",
                                   "key": "agent-skill.release-notes.md"}]


def test_tools_output_is_the_same_bytes_every_run() -> None:
    outputs = {run("tools", "team-a/reviewer", "-f", EX, "-o", "json",
                   env={"PYTHONHASHSEED": seed}).stdout for seed in ("0", "12345")}
    assert len(outputs) == 1


def test_tools_yaml() -> None:
    result = run("tools", "team-a/developer", "-f", EX, "-o", "yaml")
    assert result.returncode == 0
    doc = yaml.safe_load(result.stdout)
    assert doc == json.loads(_expected_document("team-a/developer"))
    assert list(doc) == ["apiVersion", "kind", "actor", "hash", "tools", "mcpServers",
                         "agentSkills", "tokens"]  # the contract's order


def test_tools_table_fits_100_columns(tmp_path: Path) -> None:
    long = "x" * 120
    (tmp_path / "long.yaml").write_text(f"""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {{name: {'s' * 60}, namespace: {'n' * 60}}}
spec:
  anonymousTools:
    - {{name: {long}, description: {'words ' * 50}}}
    - {{name: short, description: "two\\nlines", capabilities: {{readOnly: true}}}}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {{name: a, namespace: {'n' * 60}}}
spec: {{skills: [{'s' * 60}]}}
""")
    for args in (("team-a/developer", "-f", EX), (f"{'n' * 60}/a", "-f", str(tmp_path))):
        result = run("tools", *args)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].split() == ["NAME", "SOURCE", "SKILL", "CAPABILITIES", "TOKENS",
                                    "DESCRIPTION"]
        assert max(len(line) for line in lines) <= 100
    assert "short" in result.stdout and "ro" in result.stdout
    doc = json.loads(run("tools", *args, "-o", "json").stdout)
    assert [line.split()[4] for line in result.stdout.splitlines()[1:-1]] == [
        str(t["tokens"]) for t in doc["tools"]]
    assert result.stdout.splitlines()[-1] == (
        f"2 tools from 1 skill, {doc['tokens']['total']} tokens (cl100k_base)")


def test_tools_default_output_is_the_table() -> None:
    result = run("tools", "team-a/developer", "-f", EX)
    assert result.stdout.splitlines()[-1].startswith("24 tools from 8 skills, ")


def test_tools_table_lists_what_the_actors_own_policy_removed() -> None:
    # The reviewer's own skillAccessPolicy prunes devops-toolkit and drops every
    # writing tool; no SkillPolicy names them, and the table still shows each one.
    out = run("tools", "team-a/reviewer", "-f", EX).stdout.splitlines()
    assert ("pruned Skill team-a/devops-toolkit: denied by skillAccessPolicy.deny"
            " '*/devops-*'") in out
    assert "pruned Skill team-a/deploy: reached only through pruned skills" in out
    assert "pruned Tool write_file (team-a/file-ops): has denied capability writes" in out
    resolution = Resolver(Catalog.of(load_paths([EX]).objects)).resolve_actor(
        ObjectRef("team-a", "reviewer"))
    assert resolution is not None
    assert len([line for line in out if line.startswith("pruned ")]) == len(
        resolution.pruned) == 11


def test_tools_prints_nothing_on_stdout_when_the_input_has_problems(bad: Path) -> None:
    for output in ("json", "table"):
        result = run("tools", "team-a/act", "-f", str(bad), "-o", output)
        assert result.returncode == 1
        assert result.stdout == ""
        assert {m["reason"] for m in problem_lines(result.stderr)} >= {"RefNotFound"}


def test_tools_budget_exceeded(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: s}
spec: {builtins: [file_operations]}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: a}
spec: {skills: [s], skillAccessPolicy: {maxTools: 2}}
""")
    result = run("tools", "a", "-f", str(tmp_path), "-o", "json")
    assert result.returncode == 1
    assert result.stdout == ""
    [line] = problem_lines(result.stderr)
    assert (line["subject"], line["field"], line["reason"]) == (
        "Actor default/a", "spec.skillAccessPolicy.maxTools", "TooManyTools")


def test_unknown_actor() -> None:
    result = run("tools", "team-a/ghost", "-f", EX)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "team-a/ghost not found" in result.stderr


# -- flatten, tree, explain ----------------------------------------------------------------


def test_flatten_a_skill() -> None:
    result = run("flatten", "team-a/devops-toolkit", "-f", EX, "-o", "json")
    assert result.returncode == 0
    doc = json.loads(result.stdout)
    assert doc["skill"] == "team-a/devops-toolkit"
    assert "actor" not in doc
    names = {t["name"] for t in doc["tools"]}
    assert names == {"build_image", "push_image", "list_images", "kubectl_apply",
                     "release-notes"}
    push = next(t for t in doc["tools"] if t["name"] == "push_image")
    assert push["capabilities"]["requiresApproval"] is True


def test_tree_shows_the_hierarchy_and_each_tools_source() -> None:
    result = run("tree", "team-a/developer", "-f", EX)
    assert result.returncode == 0
    out = result.stdout
    assert out.splitlines()[0] == "Actor team-a/developer"
    for needle in ("team-a/full-stack-dev", "├── team-a/file-ops", "[builtin] read_file",
                   "[mcp] build_image", "[tool] run_pytest", "[agent_skill] release-notes",
                   "[anonymous] lint (as team-a/testing.lint)", "platform/read-only-git"):
        assert needle in out
    assert "system_prune" not in out


def test_tree_of_a_policy_restricted_actor_marks_pruned_and_dropped() -> None:
    out = run("tree", "team-a/reviewer", "-f", EX).stdout
    assert "team-a/devops-toolkit [pruned: denied by skillAccessPolicy.deny '*/devops-*']" in out
    assert "[builtin] write_file [dropped: has denied capability writes]" in out


def test_tree_of_a_skill() -> None:
    result = run("tree", "team-a/devops-toolkit", "-f", EX)
    assert result.returncode == 0
    assert "team-a/docker-tools" in result.stdout


@pytest.mark.parametrize(("tool", "has", "needles"), [
    ("read_file", True, ["has tool read_file", "path: team-a/full-stack-dev -> team-a/file-ops"]),
    ("write_file", False, ["dropped by the Actor's own skillAccessPolicy: has denied"
                           " capability writes"]),
    ("push_image", False, ["team-a/devops-toolkit", "pruned", "deny"]),
    ("lint", False, ["team-a/code-analysis.lint", "team-a/testing.lint"]),
    ("run_pytest", True, ["  readOnly=true  <- declared by Tool team-a/run-pytest",
                          "  timeoutSeconds=900  <- declared by Tool team-a/run-pytest"]),
])
def test_explain(tool: str, has: bool, needles: list[str]) -> None:
    result = run("explain", "team-a/reviewer", tool, "-f", EX)
    assert result.returncode == 0
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"Actor team-a/reviewer {'has' if has else 'does not have'} tool")
    for needle in needles:
        assert needle in result.stdout


def test_explain_says_where_an_mcp_tools_capabilities_came_from() -> None:
    result = run("explain", "team-a/developer", "push_image", "-f", EX)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("capabilities (and where each came from):")
    assert lines[start + 1:start + 7] == [
        "  readOnly=false  <- annotation readOnlyHint=false",
        "  writes=true  <- annotation readOnlyHint=false, so not read-only",
        "  destructive=false  <- annotation destructiveHint=false",
        "  idempotent=false  <- MCP default: no idempotentHint",
        "  openWorld=true  <- annotation openWorldHint=true",
        "  requiresApproval=true  <- override at Skill team-a/devops-toolkit"
        " spec.includes[0].overrides.push_image",
    ]


def test_explain_unknown_actor() -> None:
    result = run("explain", "team-a/ghost", "read_file", "-f", EX)
    assert result.returncode == 1
    assert "not found" in result.stderr


# -- inputs: stdin, directories, multi-doc, namespaces -----------------------------------


def test_stdin_multi_document() -> None:
    text = "\n---\n".join(p.read_text() for p in sorted(EXAMPLES.glob("*.yaml")))
    result = run("tools", "team-a/developer", "-f", "-", "-o", "json", stdin=text)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tools"] == json.loads(
        _expected_document("team-a/developer"))["tools"]


def test_several_files_and_a_directory(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "skills.yml").write_text((EXAMPLES / "30-skills.yaml").read_text())
    args = ["-f", str(tmp_path), "-f", str(EXAMPLES / "20-tools.yaml"),
            "-f", str(EXAMPLES / "00-namespaces.yaml"), "-f", str(EXAMPLES / "40-actors.yaml"),
            "-f", str(EXAMPLES / "10-policies.yaml")]
    result = run("tools", "team-a/developer", *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tools"] == json.loads(
        _expected_document("team-a/developer"))["tools"]


def _tool(name: str, description: str) -> str:
    return (f"apiVersion: skillop.dev/v1alpha1\nkind: Tool\nmetadata: {{name: {name}}}\n"
            f"spec: {{description: {description}}}\n")


def test_an_object_defined_twice_is_a_warning_naming_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_tool("t", "first") + "---\n" + _tool("u", "one")
                                     + "---\n" + _tool("u", "two"))
    (tmp_path / "b.yaml").write_text(_tool("t", "second"))
    (tmp_path / "s.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: s}
spec: {tools: [{ref: t}, {ref: u}]}
""")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    result = run("flatten", "s", "-f", str(tmp_path), "-o", "json")
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"warning: Tool default/u is defined twice in {a}: the later one is used,"
        " as kubectl apply in the order read would leave it",
        f"warning: Tool default/t is defined in {a} and again in {b}: the one in {b}"
        " is used, as kubectl apply in the order read would leave it"]
    descriptions = {t["name"]: t["description"] for t in json.loads(result.stdout)["tools"]}
    assert descriptions == {"t": "second", "u": "two"}
    validate = run("validate", "-f", str(b), "-f", str(a))
    assert (validate.returncode, validate.stderr.count("warning: Tool default/t")) == (0, 1)
    assert f"the one in {a} is used" in validate.stderr


def test_a_file_named_twice_is_read_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(_tool("t", "first"))
    b.write_text(_tool("t", "second"))
    # a.yaml again, twice: no warning of its own, nor a third definition of t.
    result = run("validate", "-f", str(tmp_path), "-f", str(a), "-f", f"{tmp_path}/./a.yaml")
    assert result.returncode == 0
    assert result.stderr == (f"warning: Tool default/t is defined in {a} and again in {b}:"
                             f" the one in {b} is used, as kubectl apply in the order read"
                             " would leave it\n")
    assert result.stdout == "valid: 1 tool, 0 skills, 0 actors\n"


def test_namespace_flag_and_default_namespace(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: s}
spec: {builtins: [shell_operations]}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: a}
spec: {skills: [s]}
""")
    default = run("tools", "a", "-f", str(tmp_path), "-o", "json")
    assert default.returncode == 0
    assert json.loads(default.stdout)["actor"] == "default/a"
    # docs/api.md: manifests without metadata.namespace are in default; -n is the
    # namespace of the ACTOR argument only.
    qualified = run("tools", "default/a", "-n", "dev", "-f", str(tmp_path), "-o", "json")
    assert json.loads(qualified.stdout)["actor"] == "default/a"
    other = run("tools", "a", "-n", "dev", "-f", str(tmp_path), "-o", "json")
    assert (other.returncode, other.stdout) == (1, "")
    assert other.stderr == ("Actor dev/a not found in the given manifests (Actor default/a is:"
                            " manifests without metadata.namespace are in default, whatever"
                            " -n says)\n")
    assert run("tools", "developer", "-n", "team-a", "-f", EX).returncode == 0


# -- usage errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    (),
    ("frobnicate",),
    ("tools",),
    ("tools", "team-a/developer"),
    ("tools", "team-a/developer", "-f", EX, "-o", "xml"),
    ("tools", "hub:team-a/developer", "-f", EX),
])
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "error" in result.stderr
    assert "Traceback" not in result.stderr


def test_help() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("validate", "tools", "flatten", "tree", "explain", "operator"):
        assert command in result.stdout


def test_kubectl_plugin_name() -> None:
    command = command_for("kubectl-skillop")
    result = run("validate", "-f", EX, command=command)
    assert result.returncode == 0


# -- start-up ------------------------------------------------------------------------------


def test_offline_cli_imports_neither_kopf_nor_kubernetes() -> None:
    result = run("tools", "team-a/developer", "-f", EX,
                 command=[sys.executable, "-X", "importtime", *PYTHON_ARGS])
    assert result.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "skillop" in imported
    assert not imported & {"kopf", "kubernetes", "aiohttp", "mcp", "httpx"}


def test_over_max_tool_tokens_exits_1_naming_the_budget_and_the_largest(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: s, namespace: team-a}
spec:
  anonymousTools:
    - {name: small, description: "x"}
    - {name: large, description: "Returns every open ticket with its history and its comments"}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: a, namespace: team-a}
spec: {skills: [s], skillAccessPolicy: {maxToolTokens: 10}}
""")
    result = run("tools", "team-a/a", "-f", str(tmp_path), "-o", "table")
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    match = PROBLEM_LINE.match(line)
    assert match is not None, line
    assert (match["field"], match["reason"]) == ("spec.skillAccessPolicy.maxToolTokens",
                                                 "TooManyToolTokens")
    assert "over the budget of 10" in line and "the largest: large (" in line
    assert line.index("large (") < line.index("small (")


def test_python_dash_m_skillop_is_the_same_command() -> None:
    via_module = run("tools", "team-a/developer", "-f", EX, "-o", "json",
                     command=[sys.executable, "-m", "skillop"])
    assert (via_module.returncode, via_module.stderr) == (0, "")
    assert via_module.stdout == _expected_document("team-a/developer")
    assert run("bogus", command=[sys.executable, "-m", "skillop"]).returncode == 2
