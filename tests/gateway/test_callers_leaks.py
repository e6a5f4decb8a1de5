"""A caller's token never leaves the request it came in: not in the audit trail,
the gateway's log, its metrics, its traces, nor any answer (a refusal's text, a
401's challenge). A gateway process with metrics and traces on is sent a valid,
an expired, a wrong-audience and a garbled token; every output is collected and
searched for each token in every encoding it could be written in."""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gatewaykit import GatewayProcess, Volume, echo_tool, handshake, toolset_files
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

from oidc import OidcProvider

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the tracing extra")
from otlpkit import Receiver

pytestmark = pytest.mark.timeout(120)


def _outputs(tmp_path: Path, idp: OidcProvider, receiver: Receiver) -> dict[str, Any]:
    tokens = {"valid": idp.token("erin@example.com", groups=["sre"]),
              "wrong-audience": idp.token("erin@example.com", audience="elsewhere"),
              "expired": idp.token("erin@example.com", expires_in=1)}
    time.sleep(1.5)
    valid = tokens["valid"]
    tokens["garbled"] = valid[: len(valid) // 2] + "!" + valid[len(valid) // 2:]
    tokens["tampered"] = valid[:-6] + ("AAAAAA" if not valid.endswith("AAAAAA") else "BBBBBB")
    with ServerHandle(tools=[make_tool("echo")]) as upstream:
        volume = Volume(tmp_path / "tools")
        volume.write(toolset_files([
            skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                      "tools": [echo_tool("echo", "up")]}]),
            actor("dev", skills=["srv"], callers={
                "issuer": idp.issuer, "audiences": ["skillop-gateway"],
                "clockSkewSeconds": 0})], "team-a/dev"))
        (tmp_path / "secrets").mkdir()
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
               "OTEL_TRACES_SAMPLER": "always_on"}
        with GatewayProcess(volume.root, tmp_path / "secrets", "--metrics-listen",
                            "127.0.0.1:0", env=env) as gw:
            answers = anyio.run(_send, gw.url, tokens)
            gw.wait_audit(1)
            deadline = time.monotonic() + 15
            while not any(s["name"].startswith("tools/call") for s in receiver.spans):
                assert time.monotonic() < deadline, "no span arrived"
                time.sleep(0.05)
            metrics_url = next(line.rsplit(" ", 1)[1].strip() for line in gw.stderr
                               if "metrics served on" in line)
            with urllib.request.urlopen(metrics_url) as page:
                metrics = page.read().decode()
            return {"tokens": tokens, "answers": answers, "audit": "".join(gw.stdout),
                    "log": "".join(gw.stderr), "metrics": metrics,
                    "spans": json.dumps(receiver.spans)}


async def _send(url: str, tokens: dict[str, str]) -> str:
    """Every token sent on a call (and a valid session for the valid one); what the
    gateway answered, status, headers and bodies."""
    seen: list[str] = []
    async with httpx2.AsyncClient(timeout=30) as http:
        bearer = {"authorization": f"Bearer {tokens['valid']}"}
        session = await handshake(http, url, bearer)
        for name, token in tokens.items():
            answer = await http.post(url, headers={**session, "authorization": f"Bearer {token}"},
                                     json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                           "params": {"name": "echo", "arguments": {}}})
            seen.append(f"{name} {answer.status_code} {dict(answer.headers)} {answer.text}")
    return "\n".join(seen)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    receiver = Receiver()
    try:
        with OidcProvider() as idp:
            yield _outputs(tmp_path_factory.mktemp("leaks"), idp, receiver)
    finally:
        receiver.close()


def test_the_outputs_name_the_caller_and_count_refusals(outputs: dict[str, Any]) -> None:
    audit = [json.loads(line) for line in outputs["audit"].splitlines() if line.strip()]
    assert [(a["bindingName"], a.get("caller"), a["outcome"]) for a in audit] == [
        ("echo", "erin@example.com", "ok")]
    assert '"enduser.id": "erin@example.com"' in outputs["spans"]
    for reason, count in (("invalid", 4),):
        assert f'skillop_gateway_caller_refusals_total{{reason="{reason}"}} {count}.0' in (
            outputs["metrics"])
    assert "erin" not in outputs["metrics"]
    assert outputs["answers"].count(" 401 ") == 4


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


#: How a token (or a part of one) could be written down by mistake.
ENCODINGS = {
    "as-is": lambda t: t,
    "json": lambda t: json.dumps(t)[1:-1],
    "url": lambda t: urllib.parse.quote(t, safe=""),
    "base64": lambda t: base64.b64encode(t.encode()).decode().rstrip("="),
    "base64url": lambda t: _b64(t.encode()),
    "repr": lambda t: repr(t)[1:-1],
}


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["valid", "wrong-audience", "expired", "garbled", "tampered"]),
       part=st.sampled_from(["whole", "header+payload", "signature", "payload"]),
       encoding=st.sampled_from(sorted(ENCODINGS)),
       output=st.sampled_from(["answers", "audit", "log", "metrics", "spans"]))
def test_no_token_is_in_any_output_in_any_encoding(outputs: dict[str, Any], kind: str,
                                                   part: str, encoding: str,
                                                   output: str) -> None:
    token = outputs["tokens"][kind]
    pieces = token.replace("!", ".").split(".")
    text = {"whole": token, "header+payload": ".".join(pieces[:2]),
            "signature": pieces[-1], "payload": pieces[1]}[part]
    written = ENCODINGS[encoding](text)
    # 24 characters in a row: more than any fixed word of ours shares with a JWT.
    seen = outputs[output]
    assert not any(written[i:i + 24] in seen for i in range(0, max(1, len(written) - 23), 8))
