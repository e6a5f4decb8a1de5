"""`skillop gateway` and https upstreams signed by a private CA: the server's
`tls` reference travels in the ToolSet, the pod mounts the bundle, the gateway
trusts it (and the operator-wide `--ca-file`); without it, one clean error."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from bad_servers import CertificateAuthority, make_ca
from gatewaykit import GatewayProcess, Volume, call_once, echo_tool, text_of, toolset_files
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

from skillop.model.toolset import TOOLS_KEY

ACTOR = "team-a/dev"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def https(ca: CertificateAuthority) -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo")], tls=ca.server_context()) as srv:
        assert srv.url.startswith("https://")
        yield srv


class Pod:
    """The gateway's mounts: the ToolSet, Secrets and ConfigMaps, kubelet-style."""

    def __init__(self, root: Path, url: str, tls: dict[str, Any] | None) -> None:
        server: dict[str, Any] = {"name": "up", "url": url, "tools": [echo_tool("echo", "up")]}
        if tls is not None:
            server["tls"] = tls
        self.files = toolset_files([skill("srv", mcpServers=[server]),
                                    actor("dev", skills=["srv"])], ACTOR)
        self.tools = root / "tools"
        Volume(self.tools).write(self.files)
        self.secrets = root / "secrets"
        self.configmaps = root / "configmaps"
        self.secrets.mkdir()
        self.configmaps.mkdir()

    def gateway(self, *extra: str) -> GatewayProcess:
        return GatewayProcess(self.tools, self.secrets, "--configmaps-dir",
                              str(self.configmaps), *extra)


def _call(gw: GatewayProcess) -> types.CallToolResult:
    return call_once(gw.url, "echo", {"n": 1})


def test_the_servers_ca_from_a_configmap_is_carried_in_the_toolset_and_trusted(
        tmp_path: Path, https: ServerHandle, ca: CertificateAuthority) -> None:
    pod = Pod(tmp_path, https.url, {"caConfigMapRef": {"name": "upstream-ca"}})
    (entry,) = json.loads(pod.files[TOOLS_KEY])["mcpServers"]
    # A reference, as headersFrom: the bundle itself is never in the ConfigMap.
    assert entry["tls"] == {"caConfigMapRef": {"name": "upstream-ca", "key": "ca.crt"}}
    assert "CERTIFICATE" not in pod.files[TOOLS_KEY]
    Volume(pod.configmaps / "upstream-ca").write({"ca.crt": ca.ca_pem})
    with pod.gateway() as gw:
        result = _call(gw)
    assert not result.is_error, text_of(result)
    assert https.calls == [("echo", {"n": 1})]


def test_the_servers_ca_from_a_secret_and_the_operator_wide_ca_file(
        tmp_path: Path, https: ServerHandle, ca: CertificateAuthority) -> None:
    pod = Pod(tmp_path / "secret", https.url,
              {"caSecretRef": {"name": "upstream-tls", "key": "root.pem"}})
    Volume(pod.secrets / "upstream-tls").write({"root.pem": ca.ca_pem})
    with pod.gateway() as gw:
        from_secret = _call(gw)
    wide = Pod(tmp_path / "wide", https.url, None)
    bundle = tmp_path / "company-ca.pem"
    bundle.write_text(ca.ca_pem)
    with wide.gateway("--ca-file", str(bundle)) as gw:
        from_file = _call(gw)
    assert not from_secret.is_error and not from_file.is_error
    assert https.calls == [("echo", {"n": 1})] * 2


def test_without_the_ca_the_call_is_one_clean_error_and_the_gateway_stays_up(
        tmp_path: Path, https: ServerHandle, ca: CertificateAuthority) -> None:
    untrusted = Pod(tmp_path / "none", https.url, None)
    with untrusted.gateway() as gw:
        refused = _call(gw)
        assert gw.alive
    unmounted = Pod(tmp_path / "unmounted", https.url, {"caConfigMapRef": {"name": "gone"}})
    with unmounted.gateway() as gw:
        missing = _call(gw)
        # kubelet mounts it late: the gateway sees the mount change (it polls every
        # 0.1 s here) and reconnects with it (a call racing the reconnection may fail).
        Volume(unmounted.configmaps / "gone").write({"ca.crt": ca.ca_pem})
        deadline = time.monotonic() + 10
        later = _call(gw)
        while later.is_error and time.monotonic() < deadline:
            time.sleep(0.2)
            later = _call(gw)
    assert refused.is_error and "certificate is not trusted" in text_of(refused)
    assert "tls.caConfigMapRef or caSecretRef, or --ca-file" in text_of(refused)
    assert missing.is_error and (
        f"tls: key ca.crt of ConfigMap gone (at {unmounted.configmaps}/gone/ca.crt)"
        " is not mounted") in text_of(missing)
    assert not later.is_error, text_of(later)
    assert https.calls == [("echo", {"n": 1})]
