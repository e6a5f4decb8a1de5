"""The CLI reads YAML manifests exactly as kubectl and the API server do.

Each manifest goes, as the same YAML file, to the real ``kubectl apply`` and to
``skillop validate``: both accept it or both refuse it, and what the server
stored is what the CLI read (so the CLI's ToolSet is the operator's). The two
deliberate differences (docs/decisions.md, CLI) are shown on the server too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from realkit import SKILLOP, RealCluster

from skillop.model import yamlread
from skillop.model.jsonvalue import json_value

pytestmark = pytest.mark.realapi

NS = "realapi-reading"
META = f"metadata: {{name: NAME, namespace: {NS}}}\n"
TOOL = "apiVersion: skillop.dev/v1alpha1\nkind: Tool\n" + META
ACTOR = "apiVersion: skillop.dev/v1alpha1\nkind: Actor\n" + META
BOMB = "".join(f"    a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))

ACCEPTED = {
    "timestamp": TOOL + "spec: {description: d, inputSchema: {default: 2024-01-01}}\n",
    "whole-float": TOOL + "spec: {description: d, capabilities: {timeoutSeconds: 30.0}}\n",
    "exponent": TOOL + "spec: {description: d, capabilities: {timeoutSeconds: 1e3}}\n",
    "y-is-true": TOOL + "spec: {description: d, capabilities: {readOnly: y}}\n",
    "base-60-is-text": TOOL + "spec: {description: 12:30}\n",
    "quoted-no": TOOL + "spec: {description: d, capabilities: {checkpoint: 'no'}}\n",
    "anchors": TOOL + "spec:\n  description: d\n  inputSchema:\n    properties:\n"
                      "      a: &s {type: string}\n      b: *s\n",
}
REFUSED = {
    "unquoted-no": TOOL + "spec: {description: d, capabilities: {checkpoint: no}}\n",
    "string-bool": TOOL + "spec: {description: d, capabilities: {writes: 'yes'}}\n",
    "string-int": TOOL + "spec: {description: d, capabilities: {timeoutSeconds: '30'}}\n",
    "fraction-int": TOOL + "spec: {description: d, capabilities: {timeoutSeconds: 30.5}}\n",
    "bool-int": ACTOR + "spec: {skillAccessPolicy: {maxTools: true}}\n",
    "snake-case": TOOL + "spec: {description: d, input_schema: {}}\n",
    "newline-name": TOOL + 'spec: {description: d, name: "t\\n"}\n',
    "nan": TOOL + "spec: {description: d, inputSchema: {default: .nan}}\n",
    "recursive-anchor": TOOL + "spec: {description: d, inputSchema: &s {items: *s}}\n",
    "alias-bomb": TOOL + "spec:\n  description: d\n  inputSchema:\n"
                  '    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
                  + BOMB,
}


@pytest.fixture(scope="module")
def ns(real: RealCluster) -> Any:
    real.namespace(NS)
    yield real
    real.delete_namespaces(NS)


def _file(tmp_path: Path, case: str, text: str) -> Path:
    path = tmp_path / f"{case}.yaml"
    path.write_text(text.replace("NAME", case))
    return path


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKILLOP, "validate", "-f", str(path), "-n", NS], capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted_by_both_and_read_the_same(ns: RealCluster, tmp_path: Path, case: str) -> None:
    path = _file(tmp_path, case, ACCEPTED[case])
    applied = ns.kubectl("apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    assert _validate(path).returncode == 0, _validate(path).stderr
    stored = json.loads(ns.kubectl("get", "-f", str(path), "-o", "json").stdout)
    (read,) = yamlread.load_all(path.read_text())
    assert json_value(read["spec"]) == stored["spec"]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_by_both(ns: RealCluster, tmp_path: Path, case: str) -> None:
    path = _file(tmp_path, case, REFUSED[case])
    applied = ns.kubectl("apply", "-f", str(path))
    assert applied.returncode == 1, applied.stdout
    result = _validate(path)
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_kubectl_turns_a_boolean_key_into_text_so_the_cli_refuses_it(
        ns: RealCluster, tmp_path: Path) -> None:
    # `y:` is a boolean in YAML 1.1; kubectl sends the key "true" without a word.
    path = _file(tmp_path, "bool-key", TOOL + "spec:\n  description: d\n  inputSchema:\n"
                 "    properties: {x: {type: number}, y: {type: number}}\n")
    assert ns.kubectl("apply", "-f", str(path)).returncode == 0
    stored = json.loads(ns.kubectl("get", "-f", str(path), "-o", "json").stdout)
    assert sorted(stored["spec"]["inputSchema"]["properties"]) == ["true", "x"]
    result = _validate(path)
    assert result.returncode == 1
    assert "spec.inputSchema.properties: InvalidSpec: has the key true" in result.stderr
