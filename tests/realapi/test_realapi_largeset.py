"""A 5,000-tool set on a real API server: the operator writes it (packed, into the
Actor's ConfigMap and a part), the injection webhook mounts every part, and the
gateway reads it back from the ConfigMaps laid out as the kubelet lays out the
projected volume; a part edited or deleted by hand is repaired; a change writes
only the ConfigMaps whose bytes changed; a set grown to three ConfigMaps and
shrunk to one has its parts deleted after the index. Writes are counted from the
API server's audit log.

The set is the recorded servers' tools and renamed copies, each description with
160 characters of its own (bench/largesets.py, ``distinct``): tools written apart
share less than copies, so the set needs a part.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realkit import OperatorProcess, RealCluster, audit_now, wait_quiet, webhook_operator

from benchload import bench_module
from clusterkit import wait_for
from skillop.gateway.served import load_served_set
from skillop.model.toolset import INDEX_KEY, PACKED_KEY, TOOLS_KEY, chunk_key

pytestmark = [pytest.mark.realapi, pytest.mark.timeout(900)]

NS = "realapi-large"
SIZE = 5000
CM = "big-tools"
PART = "big-tools-part-1"
PART2 = "big-tools-part-2"


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


def _incompressible(name: str, tools: int) -> dict[str, Any]:
    """A Skill of ``tools`` tools whose descriptions gzip cannot shrink (1.5 KiB each):
    with the 5,000 tools, a set that needs three ConfigMaps packed."""
    def text(seed: str) -> str:
        block = hashlib.sha512(seed.encode()).digest()
        out = b""
        while len(out) < 1152:
            block = hashlib.sha512(block).digest()
            out += block
        return base64.b64encode(out).decode()[:1536]

    made = [{"name": f"{name.replace('-', '_')}_{i:04d}", "description": text(f"{name}{i}")}
            for i in range(tools)]
    return {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"mcpServers": [{"name": "server", "tools": made,
                                     "url": f"http://127.0.0.1:9/{name}/mcp"}]}}


def _set_writes(real: RealCluster, since: str) -> list[tuple[str, str]]:
    """(verb, object) of every operator write since ``since`` to the Actor's
    ConfigMaps (by name) and to its status (``status``), in the order made."""
    out = []
    for write in real.plane.writes(since=since):
        ref = write.get("objectRef") or {}
        if ref.get("resource") == "configmaps" and ref.get("name", "").startswith(CM):
            out.append((write["verb"], ref["name"]))
        elif ref.get("resource") == "actors" and ref.get("name") == "big":
            out.append((write["verb"], ref.get("subresource") or "actor"))
    return out


def _contents(real: RealCluster) -> dict[str, Any]:
    """What each of the set's ConfigMaps holds (None: there is none)."""
    out: dict[str, Any] = {}
    for name in (CM, *(f"{CM}-part-{i}" for i in (1, 2, 3))):
        body = real.configmap(NS, name)
        out[name] = None if body is None else (body.data, body.binary_data)
    return out


def _changed_set(real: RealCluster, old_hash: str, since: str) -> list[tuple[str, str]]:
    """Once the Actor's status names another set and the operator is quiet: its writes."""
    wait_for(lambda: real.get("Actor", NS, "big")["status"].get("toolsHash") != old_hash,
             timeout=300, interval=0.5, message="the new set written")
    wait_quiet(real.plane, quiet=3.0, timeout=120)
    return _set_writes(real, since)


def test_a_change_writes_only_the_configmaps_whose_bytes_changed(
        written: tuple[RealCluster, Any]) -> None:
    real, _ = written
    wait_quiet(real.plane, quiet=2.0, timeout=120)
    before, old_hash = _contents(real), real.get("Actor", NS, "big")["status"]["toolsHash"]
    name = bench_module("largesets").manifests(SIZE, namespace=NS, distinct=True)[-2][
        "metadata"]["name"]  # the last Skill: its tools come late in the document
    servers = real.get("Skill", NS, name)["spec"]["mcpServers"]
    servers[0]["tools"][-1]["description"] += " (now with one more sentence)"
    since = audit_now()
    real.patch_spec("Skill", NS, name, {"mcpServers": servers})
    writes = _changed_set(real, old_hash, since)
    after = _contents(real)
    changed = [n for n in (PART, CM) if after[n] != before[n]]
    print(f"\none tool of {SIZE:,} changed: {len(changed)} of 2 ConfigMaps changed;"
          f" writes: {writes}")
    # One write per ConfigMap whose bytes changed (parts before the index), one status.
    assert writes == [*(("update", n) for n in changed), ("patch", "status")]
    # A part deleted by hand: written again, and nothing else.
    since = audit_now()
    assert real.kubectl("delete", "configmap", PART, "-n", NS).returncode == 0
    wait_for(lambda: real.configmap(NS, PART) is not None, timeout=60, interval=0.2,
             message="the deleted part written again")
    wait_quiet(real.plane, quiet=2.0, timeout=60)
    assert _set_writes(real, since) == [("create", PART)]
    assert _contents(real) == after


def test_a_set_grown_to_three_configmaps_and_shrunk_to_one_has_its_parts_deleted(
        written: tuple[RealCluster, Any], tmp_path: Path) -> None:
    real, _ = written
    wait_quiet(real.plane, quiet=2.0, timeout=120)
    actor = real.get("Actor", NS, "big")
    old_hash = actor["status"]["toolsHash"]
    extra = [_incompressible(f"extra-{n}", 300) for n in range(2)]
    for doc in extra:
        real.apply(doc)
    since = audit_now()
    real.patch_spec("Actor", NS, "big", {"skills": [*actor["spec"]["skills"],
                                                    *(d["metadata"]["name"] for d in extra)]})
    writes = _changed_set(real, old_hash, since)
    status = real.get("Actor", NS, "big")["status"]
    assert status["toolCount"] == SIZE + 600
    third = real.configmap(NS, PART2)
    assert third is not None and third.metadata.owner_references[0].name == "big"
    print(f"\ngrown to {status['toolCount']:,} tools (three ConfigMaps): writes {writes}")
    assert sorted(writes) == sorted([("create", PART2), ("update", PART), ("update", CM),
                                     ("patch", "status")])
    # Shrunk to a set that fits tools.json: the Actor's ConfigMap, then the parts go.
    since, old_hash = audit_now(), status["toolsHash"]
    real.patch_spec("Actor", NS, "big", {"skills": [actor["spec"]["skills"][0]]})
    writes = _changed_set(real, old_hash, since)
    print(f"shrunk to one ConfigMap: writes {writes}")
    assert writes == [("update", CM), ("delete", PART), ("delete", PART2), ("patch", "status")]
    main = real.configmap(NS, CM)
    assert TOOLS_KEY in main.data and not main.binary_data
    assert real.configmap(NS, PART) is None and real.configmap(NS, PART2) is None
    _lay_out(real, tmp_path / "tools", [CM])
    assert load_served_set(tmp_path / "tools").hash == real.get("Actor", NS, "big")[
        "status"]["toolsHash"]
    # Nothing comes back: the deletions are no news to the operator.
    time.sleep(3)
    assert _set_writes(real, since) == writes


def test_the_actors_deletion_takes_every_part_with_it(written: tuple[RealCluster, Any]) -> None:
    real, _ = written
    skills = [s["metadata"]["name"] for s in real.list("Skill", NS)]
    old_hash = real.get("Actor", NS, "big")["status"]["toolsHash"]
    real.patch_spec("Actor", NS, "big", {"skills": skills})  # every Skill: three ConfigMaps
    wait_for(lambda: real.get("Actor", NS, "big")["status"].get("toolsHash") != old_hash
             and real.configmap(NS, PART2) is not None,
             timeout=300, interval=0.5, message="the set in three ConfigMaps again")
    real.delete("Actor", NS, "big")
    wait_for(lambda: all(real.configmap(NS, n) is None for n in (CM, PART, PART2)),
             timeout=120, interval=0.5, message="the garbage collector's deletions")
