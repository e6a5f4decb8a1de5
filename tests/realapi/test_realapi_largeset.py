"""A 5,000-tool set on a real API server: the operator writes it (packed, into
parts and the Actor's ConfigMap holding the index), the injection webhook mounts
every part, and the gateway reads it back from the ConfigMaps laid out as the
kubelet lays out the projected volume; a part edited or deleted by hand is
repaired; a change, a set grown to three ConfigMaps and one shrunk to one write
the Actor's ConfigMap and its status, nothing else, and the parts no index names
any more are deleted after a grace. Writes are counted from the API server's
audit log.

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
from realkit import OperatorProcess, RealCluster, audit_now, wait_quiet, webhook_operator

from benchload import bench_module
from clusterkit import wait_for
from skillop.gateway.served import load_served_set
from skillop.model.toolset import INDEX_KEY, TOOLS_KEY, PackedIndex

pytestmark = [pytest.mark.realapi, pytest.mark.timeout(900)]

NS = "realapi-large"
SIZE = 5000
CM = "big-tools"
PART = "big-tools-part-1"
PART2 = "big-tools-part-2"
#: The grace before a part no index names is deleted (SKILLOP_STALE_PART_SECONDS).
GRACE = 20.0
PARTS = (CM, *(f"{CM}-part-{i}" for i in (1, 2, 3)))


@pytest.fixture(scope="module")
def written(real: RealCluster, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[RealCluster, OperatorProcess]]:
    docs = bench_module("largesets").manifests(SIZE, namespace=NS, distinct=True)
    real.namespace(NS)
    env = {"SKILLOP_INJECTION": "true", "SKILLOP_MCP_DISCOVERY": "false",
           "SKILLOP_SECRETS_READABLE": "true", "SKILLOP_INJECT_IMAGE": "example/skillop:test",
           "SKILLOP_STALE_PART_SECONDS": str(GRACE)}
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


def _index(real: RealCluster) -> PackedIndex:
    main = real.configmap(NS, CM)
    assert main is not None
    return PackedIndex.parse(main.data[INDEX_KEY])


def test_the_operator_writes_a_5000_tool_set_and_the_gateway_reads_it_back(
        written: tuple[RealCluster, Any], tmp_path: Path) -> None:
    real, _ = written
    status = real.get("Actor", NS, "big")["status"]
    assert status["toolCount"] == SIZE
    main, part = real.configmap(NS, CM), real.configmap(NS, PART)
    assert main is not None and part is not None and "tools.json" not in (main.data or {})
    index = _index(real)
    assert index.hash == status["toolsHash"]
    # The parts hold the tools; the Actor's ConfigMap the index, the header and room.
    assert index.chunks[0].config_map == CM and {c.config_map for c in index.chunks[1:]} == {
        PART, PART2}
    for chunk in index.chunks:
        body = real.configmap(NS, chunk.config_map)
        assert body is not None and chunk.key in body.binary_data
    assert main.metadata.annotations["skillop.dev/tools-hash"] == status["toolsHash"]
    for body in (main, part):
        assert body.metadata.owner_references[0].name == "big"
    _lay_out(real, tmp_path / "tools", [CM, PART, PART2])
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
    key = next(c.key for c in _index(real).chunks if c.config_map == PART)
    good = real.configmap(NS, PART).binary_data[key]
    patch = json.dumps({"binaryData": {key: base64.b64encode(b"edited").decode()}})
    assert real.kubectl("patch", "configmap", PART, "-n", NS, "--type=merge",
                        "-p", patch).returncode == 0
    wait_for(lambda: (cm := real.configmap(NS, PART)) is not None
             and cm.binary_data[key] == good,
             timeout=60, interval=0.2, message="the edited part repaired")
    assert real.kubectl("delete", "configmap", PART, "-n", NS).returncode == 0
    wait_for(lambda: (cm := real.configmap(NS, PART)) is not None
             and cm.binary_data[key] == good,
             timeout=60, interval=0.2, message="the deleted part written again")


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
    for name in PARTS:
        body = real.configmap(NS, name)
        out[name] = None if body is None else (body.data, body.binary_data)
    return out


def _changed_set(real: RealCluster, old_hash: str, since: str) -> list[tuple[str, str]]:
    """Once the Actor's status names another set and the operator is quiet: its writes."""
    wait_for(lambda: real.get("Actor", NS, "big")["status"].get("toolsHash") != old_hash,
             timeout=300, interval=0.5, message="the new set written")
    wait_quiet(real.plane, quiet=3.0, timeout=120)
    return _set_writes(real, since)


def test_a_change_writes_the_actors_configmap_alone(written: tuple[RealCluster, Any]) -> None:
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
    print(f"\none tool of {SIZE:,} changed: writes {writes}")
    # The changed chunk goes beside the index: the parts keep their bytes.
    assert writes == [("update", CM), ("patch", "status")]
    assert {n: v for n, v in after.items() if n != CM} == {
        n: v for n, v in before.items() if n != CM}
    # A part deleted by hand: written again, and nothing else.
    since = audit_now()
    assert real.kubectl("delete", "configmap", PART, "-n", NS).returncode == 0
    wait_for(lambda: real.configmap(NS, PART) is not None, timeout=60, interval=0.2,
             message="the deleted part written again")
    wait_quiet(real.plane, quiet=2.0, timeout=60)
    assert _set_writes(real, since) == [("create", PART)]
    # With the chunks the index names there (not those of the version before).
    again = _contents(real)
    assert {n: v for n, v in again.items() if n != PART} == {
        n: v for n, v in after.items() if n != PART}
    named = {c.key for c in _index(real).chunks if c.config_map == PART}
    assert sorted(again[PART][1]) == sorted(named)
    assert all(again[PART][1][k] == after[PART][1][k] for k in named)


def test_a_set_grown_to_three_configmaps_and_shrunk_to_one_writes_one_configmap(
        written: tuple[RealCluster, Any], tmp_path: Path) -> None:
    real, _ = written
    wait_quiet(real.plane, quiet=2.0, timeout=120)
    actor = real.get("Actor", NS, "big")
    old_hash = actor["status"]["toolsHash"]
    extra = [bench_module("largewrites").incompressible(f"extra-{n}", 300, namespace=NS)
             for n in range(2)]
    for doc in extra:
        real.apply(doc)
    before = _contents(real)
    since = audit_now()
    real.patch_spec("Actor", NS, "big", {"skills": [*actor["spec"]["skills"],
                                                    *(d["metadata"]["name"] for d in extra)]})
    writes = _changed_set(real, old_hash, since)
    status = real.get("Actor", NS, "big")["status"]
    assert status["toolCount"] == SIZE + 600
    print(f"\ngrown to {status['toolCount']:,} tools (three ConfigMaps): writes {writes}")
    assert writes == [("update", CM), ("patch", "status")]
    assert {c.config_map for c in _index(real).chunks} == {CM, PART, PART2}
    assert {n: v for n, v in _contents(real).items() if n != CM} == {
        n: v for n, v in before.items() if n != CM}
    grown = _contents(real)
    _lay_out(real, tmp_path / "grown", list(PARTS))
    served = load_served_set(tmp_path / "grown")
    assert (served.hash, len(served.tools)) == (status["toolsHash"], SIZE + 600)
    # Shrunk to a set that fits tools.json: the Actor's ConfigMap; the parts stay
    # for the grace (a pod still showing the index before reads it whole), then go.
    since, old_hash = audit_now(), status["toolsHash"]
    real.patch_spec("Actor", NS, "big", {"skills": [actor["spec"]["skills"][0]]})
    writes = _changed_set(real, old_hash, since)
    print(f"shrunk to one ConfigMap: writes {writes}")
    assert writes == [("update", CM), ("patch", "status")]
    main = real.configmap(NS, CM)
    assert TOOLS_KEY in main.data and not main.binary_data
    # A pod whose kubelet still shows the grown index reads the grown set whole.
    _lay_out(real, tmp_path / "before", [PART, PART2])
    data, binary = grown[CM]
    for key, value in data.items():
        (tmp_path / "before" / key).write_text(value)
    for key, value in binary.items():
        (tmp_path / "before" / key).write_bytes(base64.b64decode(value))
    assert load_served_set(tmp_path / "before").hash == status["toolsHash"]
    wait_for(lambda: real.configmap(NS, PART) is None and real.configmap(NS, PART2) is None,
             timeout=GRACE + 60, interval=0.5, message="the parts deleted after the grace")
    wait_quiet(real.plane, quiet=2.0, timeout=60)
    deleted = _set_writes(real, since)[len(writes):]
    print(f"then, after {GRACE:.0f} s: {deleted}")
    assert sorted(deleted) == [("delete", PART), ("delete", PART2)]
    _lay_out(real, tmp_path / "tools", [CM])
    assert load_served_set(tmp_path / "tools").hash == real.get("Actor", NS, "big")[
        "status"]["toolsHash"]
    # Nothing comes back: the deletions are no news to the operator.
    time.sleep(3)
    assert _set_writes(real, since) == [*writes, *deleted]


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
