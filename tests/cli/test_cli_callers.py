"""``skillop explain --claims`` and ``skillop tools --claims``: the set as one caller
sees it, through the console script (docs/api.md, Caller rules and rate limits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run

MANIFESTS = """\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: ops, namespace: team-a}
spec:
  anonymousTools:
  - {name: wipe, description: wipe the disk}
  - {name: deploy, description: deploy the app}
  - {name: status, description: show the status}
---
apiVersion: skillop.dev/v1alpha1
kind: SkillPolicy
metadata: {name: p, namespace: team-a}
spec:
  callerRules:
  - {effect: Deny, tools: [status], callers: {subjects: [nobody]}}
  - {effect: Deny, tools: [wipe], callers: {groups: [contractors]}}
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: bot, namespace: team-a}
spec:
  skills: [ops]
  callers: {issuer: "https://idp.example.com", audiences: [gw], groupsClaim: roles}
  skillAccessPolicy:
    callerRules:
    - {effect: RequireApproval, tools: [deploy], callers: {claims: [{claim: dept, values: [eng]}]}}
"""


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFESTS)
    return path


def explain(manifests: Path, tool: str, claims: str) -> list[str]:
    result = run("explain", "team-a/bot", tool, "-f", str(manifests), "--claims", claims)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_explain_answers_for_the_caller_by_the_actors_claim_names(manifests: Path) -> None:
    contractor = json.dumps({"sub": "carl", "roles": ["contractors"]})
    assert explain(manifests, "wipe", contractor)[-1] == (
        "for caller carl: denied by SkillPolicy team-a/p: rule 2 (groups: [contractors])")
    # groups is not the Actor's groupsClaim: carl is in no group then.
    other = json.dumps({"sub": "carl", "groups": ["contractors"]})
    assert explain(manifests, "wipe", other)[-1] == "for caller carl: allowed"
    assert explain(manifests, "deploy", '{"sub": "e", "dept": "eng"}')[-1] == (
        "for caller e: needs approval (approval required by Actor team-a/bot: rule 1"
        " (dept: [eng]))")
    assert explain(manifests, "wipe", "{}")[-1] == "for an anonymous caller: allowed"


def test_claims_from_a_file(manifests: Path, tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text('{"sub": "carl", "roles": "contractors"}')
    assert explain(manifests, "wipe", f"@{tmp_path / 'c.json'}")[-1].startswith(
        "for caller carl: denied by SkillPolicy team-a/p")


def test_tools_lists_what_the_caller_sees(manifests: Path) -> None:
    result = run("tools", "team-a/bot", "-f", str(manifests), "-o", "json",
                 "--claims", '{"sub": "carl", "roles": ["contractors"]}')
    assert result.returncode == 0, result.stderr
    assert [t["name"] for t in json.loads(result.stdout)["tools"]] == ["deploy", "status"]
    table = run("tools", "team-a/bot", "-f", str(manifests), "--claims", '{"sub": "nobody"}')
    assert table.returncode == 0, table.stderr
    names = [line.split()[0] for line in table.stdout.splitlines()[1:] if line.strip()]
    assert "status" not in names and "wipe" in names
    everyone = run("tools", "team-a/bot", "-f", str(manifests), "-o", "json")
    assert len(json.loads(everyone.stdout)["tools"]) == 3


@pytest.mark.parametrize(("claims", "why"), [
    ("[1]", "is not a JSON object of claims"),
    ("{", "is not JSON"),
    ("@/nonexistent/claims.json", "/nonexistent/claims.json: cannot be read"),
])
def test_bad_claims_are_one_usage_line(manifests: Path, claims: str, why: str) -> None:
    result = run("explain", "team-a/bot", "wipe", "-f", str(manifests), "--claims", claims)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("skillop explain: error: argument --claims: ") and why in last
