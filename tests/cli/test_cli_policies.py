"""The CLI reads SkillPolicies and ClusterSkillPolicies (and Namespaces, for their
labels) from -f like any manifest: tools, explain and validate apply them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from clirun import EXAMPLES, problem_lines, run

POLICY = """\
apiVersion: skillop.dev/v1alpha1
kind: ClusterSkillPolicy
metadata: {name: no-devops}
spec:
  namespaceSelector: {matchLabels: {skillop.dev/tenant: "true"}}
  deny: ["*/devops-*"]
  requireApproval: [destructive]
"""


@pytest.fixture
def governed(tmp_path: Path) -> Path:
    """examples/ with one more ClusterSkillPolicy selecting team-a (labelled in
    examples/00-namespaces.yaml)."""
    root = tmp_path / "manifests"
    shutil.copytree(EXAMPLES, root)
    (root / "zz-policy.yaml").write_text(POLICY)
    return root


def test_tools_gives_the_tightened_toolset(governed: Path) -> None:
    plain = json.loads(run("tools", "team-a/developer", "-f", str(EXAMPLES), "-o", "json").stdout)
    result = run("tools", "team-a/developer", "-f", str(governed), "-o", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    tools = {t["name"]: t for t in doc["tools"]}
    assert not any(t["skill"] in ("team-a/docker-tools", "team-a/deploy", "team-a/devops-toolkit")
                   for t in tools.values())
    assert tools["delete_file"]["capabilities"]["requiresApproval"] is True
    assert set(tools) < {t["name"] for t in plain["tools"]}
    assert doc["mcpServers"] == []


def test_the_table_names_the_policy_and_what_it_pruned(governed: Path) -> None:
    out = run("tools", "team-a/developer", "-f", str(governed)).stdout.splitlines()
    assert ("policies applied: ClusterSkillPolicy no-devops,"
            " ClusterSkillPolicy tenants") in out
    assert ("pruned Skill team-a/devops-toolkit: denied by ClusterSkillPolicy no-devops:"
            " deny '*/devops-*'") in out


def test_explain_names_the_policy_and_the_rule(governed: Path) -> None:
    result = run("explain", "team-a/developer", "push_image", "-f", str(governed))
    assert result.returncode == 0, result.stderr
    assert "ClusterSkillPolicy no-devops: deny '*/devops-*'" in result.stdout
    marked = run("explain", "team-a/developer", "delete_file", "-f", str(governed)).stdout
    assert "ClusterSkillPolicy no-devops requireApproval [destructive]" in marked


@pytest.mark.parametrize(("rule", "field"), [
    ('deny: ["devops-toolkit"]', "spec.deny[0]"),
    ("denyCapabilities: [dangerous]", "spec.denyCapabilities[0]"),
    ('mcpServers: {allow: ["http://*.svc"]}', "spec.mcpServers.allow[0]"),
])
def test_validate_rejects_a_policy_that_cannot_work(governed: Path, rule: str,
                                                    field: str) -> None:
    (governed / "zz-policy.yaml").write_text(
        "apiVersion: skillop.dev/v1alpha1\nkind: ClusterSkillPolicy\n"
        f"metadata: {{name: broken}}\nspec:\n  {rule}\n")
    result = run("validate", "-f", str(governed))
    assert result.returncode == 1
    lines = problem_lines(result.stderr)
    own = [line for line in lines if line["subject"] == "ClusterSkillPolicy broken"]
    assert [(line["field"], line["reason"]) for line in own] == [(field, "InvalidSpec")]
    # The Actors it may govern are not resolved with the policy missing.
    assert {line["reason"] for line in lines if line["subject"].startswith("Actor")} == {
        "DependencyFailed"}
    tools = run("tools", "team-a/developer", "-f", str(governed), "-o", "json")
    assert (tools.returncode, tools.stdout) == (1, "")


def test_validate_counts_policies(governed: Path) -> None:
    result = run("validate", "-f", str(governed))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "valid: 3 tools, 8 skills, 2 actors, 2 policies\n"


SERVER = """\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: mine, namespace: team-a}
spec:
  mcpServers:
  - name: db
    url: http://DB.Platform.svc.cluster.local.:80/mcp
    tools:
    - {name: drop_table, description: drops, annotations: {readOnlyHint: true}}
    - {name: danger, description: writes, annotations: {readOnlyHint: true}}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: dev, namespace: team-a}
spec: {skills: [mine]}
---
apiVersion: skillop.dev/v1alpha1
kind: ClusterSkillPolicy
metadata: {name: platform}
spec:
  denyCapabilities: [destructive]
  requireApproval: [writes]
  mcpServers:
    allowFor:
    - {skills: ["team-a/*"], hosts: ["*.svc.cluster.local"]}
    tools:
    - hosts: [db.platform.svc.cluster.local]
      names: [drop_*]
      capabilities: {destructive: true}
    - hosts: [db.platform.svc.cluster.local]
      names: [danger]
      capabilities: {writes: true}
"""


@pytest.fixture
def redeclared(tmp_path: Path) -> Path:
    """A tenant's Skill re-declaring the platform's server, in another spelling,
    with its tools called read-only, under a policy fixing what they are."""
    path = tmp_path / "redeclared.yaml"
    path.write_text(SERVER)
    return path


def test_tools_applies_the_fixed_capabilities_and_warns_naming_the_skill(
        redeclared: Path) -> None:
    result = run("tools", "team-a/dev", "-f", str(redeclared), "-o", "json")
    assert result.returncode == 0, result.stderr
    tools = {t["name"]: t for t in json.loads(result.stdout)["tools"]}
    assert list(tools) == ["danger"]
    assert tools["danger"]["capabilities"]["requiresApproval"] is True
    assert ("warning: Actor team-a/dev: Skill team-a/mine declares MCP server db on host"
            " db.platform.svc.cluster.local, whose tools' capabilities ClusterSkillPolicy"
            " platform fixes (mcpServers.tools): what the skill says of them is overruled"
            ) in result.stderr.splitlines()
    table = run("tools", "team-a/dev", "-f", str(redeclared)).stdout
    assert ("pruned Tool drop_table (team-a/mine): has denied capability destructive"
            " (ClusterSkillPolicy platform: denyCapabilities)") in table


def test_explain_names_the_rule_that_fixed_a_capability(redeclared: Path) -> None:
    result = run("explain", "team-a/dev", "danger", "-f", str(redeclared))
    assert result.returncode == 0, result.stderr
    assert ("  writes=true  <- override at ClusterSkillPolicy platform mcpServers.tools[1]"
            in result.stdout.splitlines())


def test_scoped_hosts_drop_a_tenants_server_elsewhere(redeclared: Path) -> None:
    redeclared.write_text(SERVER.replace("DB.Platform.svc.cluster.local.:80",
                                         "db.example.com"))
    result = run("tools", "team-a/dev", "-f", str(redeclared))
    assert result.returncode == 0, result.stderr
    assert ("pruned Tool danger (team-a/mine): MCP server db of skill team-a/mine has host"
            " db.example.com, matched by no allowed host (ClusterSkillPolicy platform:"
            " mcpServers.allowFor)") in result.stdout


def test_validate_refuses_fixed_capabilities_that_would_loosen(redeclared: Path) -> None:
    redeclared.write_text(SERVER.replace("capabilities: {writes: true}",
                                         "capabilities: {writes: false}"))
    result = run("validate", "-f", str(redeclared))
    assert result.returncode == 1
    [line] = [line for line in problem_lines(result.stderr)
              if line["subject"] == "ClusterSkillPolicy platform"]
    assert (line["field"], line["reason"]) == ("spec.mcpServers.tools[1].capabilities",
                                               "InvalidSpec")
    assert "only add risk" in line["message"] and "writes=false" in line["message"]
