"""Private CAs: an https MCP server whose certificate a generated CA signed.

Trusted with that CA (per call, ``--ca-file`` in the CLI), refused without it
with one line that says TLSError and how to fix it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bad_servers import CertificateAuthority, make_ca
from mcp_servers import ServerHandle, make_tools

from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import DiscoveryError, DiscoveryLimits
from skillop.sources.mcp_session import list_tools
from skillop.sources.mcp_transport import trust_context

pytestmark = pytest.mark.timeout(60)

SKILLOP = str(Path(sys.executable).with_name("skillop"))
LOCAL = EgressGuard(["127.0.0.1"])
LIMITS = DiscoveryLimits(connect_timeout=2.0, total_timeout=5.0)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def https_server(ca: CertificateAuthority) -> Iterator[ServerHandle]:
    with ServerHandle(tools=make_tools(2), tls=ca.server_context()) as server:
        assert server.url.startswith("https://")
        yield server


def test_trusted_with_the_ca(https_server: ServerHandle, ca: CertificateAuthority) -> None:
    result = asyncio.run(list_tools(https_server.url, guard=LOCAL, limits=LIMITS,
                                    ca_bundles=[ca.ca_pem]))
    assert [t.name for t in result.tools] == ["tool_0000", "tool_0001"]


def test_refused_without_it(https_server: ServerHandle) -> None:
    with pytest.raises(DiscoveryError) as caught:
        asyncio.run(list_tools(https_server.url, guard=LOCAL, limits=LIMITS))
    assert caught.value.reason == "TLSError"
    assert "not trusted" in str(caught.value)
    assert https_server.count("initialize") == 0


def test_another_ca_does_not_help(https_server: ServerHandle, tmp_path: Path) -> None:
    other = make_ca(tmp_path)
    with pytest.raises(DiscoveryError) as caught:
        asyncio.run(list_tools(https_server.url, guard=LOCAL, limits=LIMITS,
                               ca_bundles=[other.ca_pem]))
    assert caught.value.reason == "TLSError"


@pytest.mark.parametrize("bundle", ["", "not a certificate", "-----BEGIN CERTIFICATE-----\nx\n"])
def test_a_bundle_that_is_not_pem_is_a_tls_error_before_connecting(
        https_server: ServerHandle, bundle: str) -> None:
    with pytest.raises(DiscoveryError) as caught:
        asyncio.run(list_tools(https_server.url, guard=LOCAL, limits=LIMITS,
                               ca_bundles=[bundle]))
    assert caught.value.reason == "TLSError" and "PEM" in str(caught.value)
    assert https_server.requests == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKILLOP, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_cli_ca_file(https_server: ServerHandle, ca: CertificateAuthority,
                     tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text(ca.ca_pem)
    refused = _cli("discover", https_server.url, "--allow", "127.0.0.1")
    trusted = _cli("discover", https_server.url, "--allow", "127.0.0.1", "--ca-file",
                   str(bundle), "-o", "json")
    missing = _cli("discover", https_server.url, "--allow", "127.0.0.1", "--ca-file",
                   str(tmp_path / "nope.pem"))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "(TLSError)" in refused.stderr and "--ca-file" in refused.stderr
    assert trusted.returncode == 0, trusted.stderr
    assert '"tool_0001"' in trusted.stdout
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "nope.pem" in missing.stderr


def test_cli_discover_uses_the_ca_file_and_a_skills_ca_configmap(
        https_server: ServerHandle, ca: CertificateAuthority, tmp_path: Path) -> None:
    pem = "\n".join("    " + line for line in ca.ca_pem.splitlines())
    manifests = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: internal-ca, namespace: team-a}}
data:
  ca.crt: |
{pem}
---
apiVersion: skillop.dev/v1alpha1
kind: Skill
metadata: {{name: internal, namespace: team-a}}
spec:
  mcpServers:
    - name: srv
      url: {https_server.url}
      tls: {{caConfigMapRef: {{name: internal-ca}}}}
      tools: [{{name: declared_only}}]
---
apiVersion: skillop.dev/v1alpha1
kind: Actor
metadata: {{name: agent, namespace: team-a}}
spec: {{skills: [internal]}}
"""
    (tmp_path / "all.yaml").write_text(manifests)
    args = ("tools", "team-a/agent", "-f", str(tmp_path), "--discover", "--allow", "127.0.0.1",
            "-o", "table")
    with_ca = _cli(*args)
    assert with_ca.returncode == 0, with_ca.stderr
    assert "tool_0000" in with_ca.stdout and "declared_only" not in with_ca.stdout
    # Without the ConfigMap, the server cannot be trusted: declared tools, one warning.
    (tmp_path / "all.yaml").write_text(manifests.split("\n---\n", 1)[1])
    without = _cli(*args)
    assert without.returncode == 0
    assert "declared_only" in without.stdout
    assert "(TLSError)" in without.stderr


def test_trust_contexts_are_built_once_and_shared(ca: CertificateAuthority) -> None:
    # Building one loads the system store: tens of ms of CPU per connection otherwise.
    plain = trust_context("http://a.svc/mcp", ())
    assert trust_context("https://b.svc/mcp", ()) is plain
    with_ca = trust_context("https://b.svc/mcp", [ca.ca_pem])
    assert with_ca is trust_context("https://c.svc/mcp", [ca.ca_pem]) and with_ca is not plain
