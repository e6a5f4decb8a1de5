"""Whatever the input, the CLI and the admission review answer briefly and never crash.

Hypothesis throws arbitrary YAML text, arbitrary bytes on stdin and arbitrary
manifest-shaped objects (real field names, any values) at ``skillop`` (in
process through ``main()``, plus a few real subprocesses) and at
``admission.review``. Every answer must be: exit code 0 or 1, no traceback,
output bounded, JSON output strictly JSON, and quick.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from clirun import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillop.cli.main import main
from skillop.operator import admission
from skillop.resolve.catalog import Catalog

SETTINGS = settings(max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: Seconds one in-process run may take, and characters it may print.
MAX_SECONDS = 5.0
MAX_OUTPUT = 200_000

#: Pieces of YAML syntax, so random text is often nearly valid YAML.
FRAGMENTS = [
    "apiVersion: skillop.dev/v1alpha1\n", "kind: Skill\n", "kind: Actor\n", "kind: Tool\n",
    "kind: List\n", "items:\n", "metadata: {name: a}\n", "metadata:\n  name: s\n", "spec:\n",
    "  ", "- ", ": ", ", ", "{", "}", "[", "]", "\n", "---\n", "&a ", "*a", "&b ", "*b",
    "<<: ", "? ", "!!binary ", "!!set ", "!!omap ", "!!timestamp ", "!!python/tuple ", "!x ",
    ".nan", ".inf", "-.Inf", "2024-01-01", "12:30", "1e400", "30.0", "0x1f", "9" * 4400,
    "y", "no", "~",
    "'q'", '"\\n"', "|\n  text\n", ">-\n", "#c\n", "\t", "\x00", "\u2028", "é",
    "description: d\n", "  description: d\n", "  skills: [s]\n", "  includes: [{skill: a}]\n",
    "  anonymousTools: [{name: t, description: d}]\n", "  builtins: [file_operations]\n",
    "  capabilities: {writes: yes, checkpoint: no, timeoutSeconds: '30'}\n",
    "  inputSchema: ", "  skillAccessPolicy: {maxTools: 1}\n",
]
yaml_texts = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=40).map(
    "".join)

FIELDS = ["name", "description", "title", "inputSchema", "outputSchema", "capabilities",
          "runtime", "tools", "ref", "overrides", "includes", "skill", "mcpServers", "url",
          "command", "transport", "agentSkills", "inline", "configMapRef", "builtins",
          "anonymousTools", "sharing", "from", "selector", "skills", "skillAccessPolicy",
          "allow", "deny", "denyCapabilities", "maxTools", "configMapName", "readOnly",
          "writes", "checkpoint", "timeoutSeconds", "tags", "type", "properties"]
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
           | st.text(max_size=20) | st.sampled_from(["s", "a", "t", "file_operations", "no"]))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=5),
    max_leaves=30)
manifests = st.fixed_dictionaries({
    "apiVersion": st.sampled_from(["skillop.dev/v1alpha1", "v1", "skillop.dev/v2"]) | scalars,
    "kind": st.sampled_from(["Tool", "Skill", "Actor", "ConfigMap", "Namespace"]) | scalars,
    "metadata": st.fixed_dictionaries({"name": st.sampled_from(["a", "s", "t"]) | scalars})
    | values,
    "spec": values,
})
commands = st.sampled_from([["validate"], ["tools", "a", "-o", "json"], ["tools", "a"],
                            ["flatten", "s", "-o", "yaml"], ["tree", "a"],
                            ["explain", "a", "t"]])


def _cli(args: list[str], *, stdin: bytes | None = None) -> tuple[int, str, str, float]:
    """``skillop ARGS`` in this process: exit code, stdout, stderr, seconds."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exit_:
                code = int(exit_.code or 0)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - start


def _no_constants(name: str) -> float:
    raise AssertionError(f"{name} in JSON output")


def _check(args: list[str], code: int, out: str, err: str, seconds: float) -> None:
    assert code in (0, 1), (code, err[-2000:])
    assert "Traceback" not in out + err, err[-4000:]
    assert len(out) + len(err) < MAX_OUTPUT
    assert seconds < MAX_SECONDS
    if code == 1 and args[0] in ("tools", "flatten"):
        assert out == ""
    if code == 0 and "json" in args:
        json.loads(out, parse_constant=_no_constants)


def _cli_on(text: str | bytes, args: list[str]) -> tuple[int, str, str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.yaml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return _cli([*args, "-f", str(path)])


@SETTINGS
@given(text=yaml_texts, args=commands)
def test_any_yaml_text(text: str, args: list[str]) -> None:
    _check(args, *_cli_on(text, args))


@SETTINGS
@given(docs=st.lists(manifests, min_size=1, max_size=3), args=commands)
def test_any_manifest_shaped_objects(docs: list[dict[str, Any]], args: list[str]) -> None:
    text = yaml.safe_dump_all(docs, allow_unicode=True)
    _check(args, *_cli_on(text, args))


@settings(max_examples=30, deadline=None, database=None)
@given(data=st.binary(max_size=200) | yaml_texts.map(lambda t: t.encode("utf-8", "replace")))
def test_any_bytes_on_stdin(data: bytes) -> None:
    code, out, err, seconds = _cli(["validate", "-f", "-"], stdin=data)
    _check(["validate"], code, out, err, seconds)


@SETTINGS
@given(body=manifests | values, old=st.none() | manifests | values)
def test_admission_review_of_anything(body: Any, old: Any) -> None:
    start = time.perf_counter()
    lines = admission.review(body, Catalog(), old=old)
    assert time.perf_counter() - start < MAX_SECONDS
    assert isinstance(lines, list) and all(isinstance(x, str) for x in lines)
    assert len(lines) <= admission.MAX_LINES + 1
    assert sum(map(len, lines)) <= admission.MAX_TOTAL + 64
    assert all("\n" not in x for x in lines)


@settings(max_examples=3, deadline=None, database=None)
@given(docs=st.lists(manifests, min_size=1, max_size=2), text=yaml_texts)
def test_the_real_command_on_anything(docs: list[dict[str, Any]], text: str) -> None:
    """A few runs of the installed console script, input on stdin."""
    stdin = yaml.safe_dump_all(docs, allow_unicode=True) + "---\n" + text
    result = run("tools", "a", "-o", "json", "-f", "-", stdin=stdin, timeout=60)
    _check(["tools", "-o", "json"], result.returncode, result.stdout, result.stderr, 0.0)


def test_floats_json_cannot_carry_never_reach_json_output() -> None:
    doc = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill", "metadata": {"name": "s"},
           "spec": {"anonymousTools": [{"name": "t", "description": "d",
                                        "inputSchema": {"default": math.nan}}]}}
    code, out, err, _ = _cli_on(yaml.safe_dump(doc), ["flatten", "s", "-o", "json"])
    assert (code, out) == (1, "")
    assert "spec.anonymousTools[0].inputSchema.default: InvalidSpec: is NaN" in err
