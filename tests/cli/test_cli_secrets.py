"""``skillop validate`` on credentials in Skills: refused, or warned about on stderr."""

from __future__ import annotations

from clirun import problem_lines, run

PASSWORD = "hunter2-Secr3t"


def skill(server: str, **spec: str) -> str:
    extra = "".join(f"\n  {k}: {v}" for k, v in spec.items())
    return f"""\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {{name: gw, namespace: team-a}}
spec:{extra}
  mcpServers:
    - {server}
"""


def test_userinfo_fails_validate_with_one_line_that_keeps_the_password() -> None:
    text = skill(f"{{name: gw, url: 'http://bot:{PASSWORD}@gw.tools.svc/mcp'}}")
    done = run("validate", "-f", "-", stdin=text)
    assert done.returncode == 1
    [line] = problem_lines(done.stderr)
    assert line["field"] == "spec.mcpServers[0].url" and line["reason"] == "InvalidSpec"
    assert "headersFrom" in line["message"]
    assert PASSWORD not in done.stderr + done.stdout


def test_credential_query_parameters_warn_without_failing_validate() -> None:
    text = skill(f"{{name: gw, url: 'http://gw.tools.svc/mcp?page=1&access_token={PASSWORD}'}}")
    done = run("validate", "-f", "-", stdin=text)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("valid:")
    [warning] = done.stderr.splitlines()
    assert warning.startswith("warning: Skill team-a/gw: spec.mcpServers[0].url")
    assert "access_token" in warning and "page" not in warning
    assert PASSWORD not in done.stderr


def test_literal_credential_env_values_warn_without_failing_validate() -> None:
    env = (f"[{{name: MODE, value: fast}}, {{name: API_KEY, value: {PASSWORD}}},"
           " {name: GH_TOKEN, valueFrom: {secretKeyRef: {name: gh, key: token}}}]")
    text = skill(f"{{name: local, command: [srv], env: {env}, tools: [{{name: run}}]}}")
    done = run("validate", "-f", "-", stdin=text)
    assert done.returncode == 0, done.stderr
    [warning] = done.stderr.splitlines()
    assert "spec.mcpServers[0].env[1]" in warning and "API_KEY" in warning
    assert PASSWORD not in done.stderr


def test_refresh_interval_below_the_floor_fails_validate() -> None:
    done = run("validate", "-f", "-",
               stdin=skill("{name: gw, url: 'http://gw.tools.svc/mcp'}", refreshInterval="1ms"))
    assert done.returncode == 1
    [line] = problem_lines(done.stderr)
    assert line["field"] == "spec.refreshInterval" and "10s" in line["message"]


def test_env_with_both_value_and_value_from_fails_validate() -> None:
    env = "[{name: A, value: '1', valueFrom: {secretKeyRef: {name: s, key: k}}}]"
    done = run("validate", "-f", "-",
               stdin=skill(f"{{name: local, command: [srv], env: {env}, tools: [{{name: r}}]}}"))
    assert done.returncode == 1
    [line] = problem_lines(done.stderr)
    assert line["field"] == "spec.mcpServers[0].env[0]"


SHARED = """\
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {name: helper, namespace: team-b}
spec:
  sharing: {from: All}
  mcpServers:
    - name: helper
      url: http://mcp.team-b.svc:8080/mcp
      headersFrom: {secretRef: {name: docker-auth}}
      tools: [{name: build, description: builds}]
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {name: agent, namespace: team-a}
spec:
  skills: [team-b/helper]
"""


def test_a_shared_skill_sending_the_tenants_unbound_secret_fails_validate_and_tools() -> None:
    for args in (("validate",), ("tools", "-n", "team-a", "agent")):
        done = run(*args, "-f", "-", stdin=SHARED)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        [line] = problem_lines(done.stderr)
        assert line["reason"] == "CredentialNotBound" and line["field"] == "spec.credentials"
        assert "Actor team-a/agent" in done.stderr
        for part in ("'helper'", "team-b/helper", "docker-auth", "http://mcp.team-b.svc:8080"):
            assert part in line["message"], part
    bound = SHARED + "  credentials: [{secretRef: {name: docker-auth}, hosts: ['*.team-b.svc']}]\n"
    done = run("tools", "-n", "team-a", "agent", "-f", "-", "-o", "json", stdin=bound)
    assert done.returncode == 0, done.stderr
    assert "build" in done.stdout
