"""A 5,000-tool set on a real API server: the operator writes it (packed, into the
Actor's ConfigMap and a part), the injection webhook mounts every part, and the
gateway reads it back from the ConfigMaps laid out as the kubelet lays out the
projected volume; a part edited or deleted by hand is repaired.

The set is the recorded servers' tools and renamed copies, each description with
160 characters of its own (bench/largesets.py, ``distinct``): tools written apart
share less than copies, so the set needs a part.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realkit import OperatorProcess, RealCluster, webhook_operator

from benchload import bench_module
from clusterkit import wait_for
from skillop.gateway.served import load_served_set
from skillop.model.toolset import INDEX_KEY, PACKED_KEY, chunk_key

pytestmark = [pytest.mark.realapi, pytest.mark.timeout(900)]

NS = "realapi-large"
SIZE = 5000
CM = "big-tools"
PART = "big-tools-part-1"


@pytest.fixture(scope="module")
def written(real: RealCluster, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[RealCluster, OperatorProcess]]:
    docs = bench_module("largesets").manifests(SIZE, namespace=NS, distinct=True)
    real.namespace(NS)
    env = {"SKILLOP_INJECTION": "true", "SKILLOP_MCP_DISCOVERY": "false",
           "SKILLOP_SECRETS_READABLE": "true", "SKILLOP_INJECT_IMAGE": "example/skillop:test"}
    try:
        with webhook_operator(real, tmp_path_factory.mktemp("large"),
                              kind="MutatingWebhookConfiguration", webhook="inject",
                              values={"namespaces": [NS]}, env=env,
                              name="large-operator") as proc:
            for doc in docs[:-1]:
                real.apply(doc)
            started = time.perf_counter()
            real.apply(docs[-1])
            real.wait_ready("Actor", NS, "big", timeout=300)
            took = time.perf_counter() - started
            rss = _rss(proc.popen.pid)
            print(f"\n{SIZE:,} tools: Actor applied to Ready in {took:.1f} s;"
                  f" operator memory VmHWM {rss['VmHWM'] // 1024} MiB,"
                  f" VmRSS {rss['VmRSS'] // 1024} MiB")
            yield real, proc
    finally:
        real.delete_namespaces(NS)


def _rss(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def _lay_out(real: RealCluster, directory: Path, names: list[str]) -> None:
    """The ConfigMaps' keys in one directory, as the projected volume shows them."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        body = real.configmap(NS, name)
        if body is None:
            continue
        for key, value in (body.data or {}).items():
            (directory / key).write_text(value)
        for key, value in (body.binary_data or {}).items():
            (directory / key).write_bytes(base64.b64decode(value))


def test_the_operator_writes_a_5000_tool_set_and_the_gateway_reads_it_back(
        written: tuple[RealCluster, Any], tmp_path: Path) -> None:
    real, _ = written
    status = real.get("Actor", NS, "big")["status"]
    assert status["toolCount"] == SIZE
    main, part = real.configmap(NS, CM), real.configmap(NS, PART)
    assert main is not None and part is not None
    assert sorted(main.binary_data) == [PACKED_KEY] and "tools.json" not in (main.data or {})
    assert sorted(part.binary_data) == [chunk_key(1)]
    index = json.loads(main.data[INDEX_KEY])
    assert index["hash"] == status["toolsHash"]
    for body in (main, part):
        assert body.metadata.annotations["skillop.dev/tools-hash"] == status["toolsHash"]
        assert body.metadata.owner_references[0].name == "big"
    _lay_out(real, tmp_path / "tools", [CM, PART])
    served = load_served_set(tmp_path / "tools")
    assert (served.hash, len(served.tools)) == (status["toolsHash"], SIZE)


def test_a_labelled_pods_gateway_mounts_every_part(written: tuple[RealCluster, Any]) -> None:
    real, _ = written
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "agent", "namespace": NS, "labels": {"skillop.dev/actor": "big"}},
           "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]}}

    def injected() -> dict[str, Any] | None:
        done = real.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                            stdin=json.dumps(pod))
        spec = json.loads(done.stdout)["spec"] if done.returncode == 0 else {}
        return spec if "initContainers" in spec else None

    spec = wait_for(injected, timeout=60, interval=0.5, message="the pod injected")
    (gateway,) = [c for c in spec["initContainers"] if c["name"] == "skillop-gateway"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in gateway["volumeMounts"] if m["mountPath"] == "/etc/skillop"]
    sources = volumes[mount["name"]]["projected"]["sources"]
    assert [s["configMap"]["name"] for s in sources] == [CM, *(f"{CM}-part-{i}"
                                                              for i in (1, 2, 3))]
    assert all(s["configMap"]["optional"] for s in sources)


def test_a_part_deleted_or_edited_by_hand_is_repaired(written: tuple[RealCluster, Any],
                                                      ) -> None:
    real, _ = written
    good = real.configmap(NS, PART).binary_data[chunk_key(1)]
    patch = json.dumps({"binaryData": {chunk_key(1): base64.b64encode(b"edited").decode()}})
    assert real.kubectl("patch", "configmap", PART, "-n", NS, "--type=merge",
                        "-p", patch).returncode == 0
    wait_for(lambda: (cm := real.configmap(NS, PART)) is not None
             and cm.binary_data[chunk_key(1)] == good,
             timeout=60, interval=0.2, message="the edited part repaired")
    assert real.kubectl("delete", "configmap", PART, "-n", NS).returncode == 0
    wait_for(lambda: (cm := real.configmap(NS, PART)) is not None
             and cm.binary_data[chunk_key(1)] == good,
             timeout=60, interval=0.2, message="the deleted part written again")
