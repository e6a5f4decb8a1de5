"""Benchmark: the ConfigMap writes each change of a large set costs, as the
operator plans them (docs/toolset.md, Large sets).

What is measured, and why
-------------------------
The set is ``bench/largesets.py``'s ``distinct`` one (the recorded servers' tools
and renamed copies, each description with 160 characters of its own:
``--size`` tools, default 5,000), in namespace ``realapi-large`` as the real-API
test has it. The operator's own planning (``operator.actorplan.actor_plan``) is
run against what an API server would hold after each step (the ConfigMaps it
wrote, read back through JSON as the watch shows them), with no API server, so
the figures are the writes and not their latency. Steps: the set written; one
tool changed (the last Skill's last tool); grown by ``--grow`` tools gzip cannot
shrink; shrunk to one Skill (fits ``tools.json``); and from the grown set, a part
deleted by hand. Printed per step: the ConfigMap writes (parts, the Actor's,
deletions after the grace), each ConfigMap's size, the plan's time. The status
write each change also costs is not counted here (the real-API test counts it:
tests/realapi/test_realapi_largeset.py).

Run: ``python bench/largewrites.py [--size 5000] [--grow 600]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

NS = "realapi-large"
ACTOR = "big"
Doc = dict[str, Any]


def _largesets() -> Any:
    spec = importlib.util.spec_from_file_location(
        "largesets_bench", Path(__file__).resolve().parent / "largesets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def incompressible(name: str, tools: int, *, namespace: str = NS) -> Doc:
    """A Skill of ``tools`` tools whose descriptions gzip cannot shrink (1.5 KiB
    each, base64 of a sha512 chain: the same for the same name)."""
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
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mcpServers": [{"name": "server", "tools": made,
                                     "url": f"http://127.0.0.1:9/{name}/mcp"}]}}


class Cluster:
    """The Actor's ConfigMaps as an API server would hold them, and the plans."""

    def __init__(self) -> None:
        self.held: dict[str, Doc] = {}

    def change(self, label: str, docs: list[Doc]) -> None:
        from skillop.operator.actorplan import actor_plan
        from skillop.operator.configmaps import observe_configmap

        bench = _largesets()
        resolution = bench.resolve(docs, namespace=NS, actor=ACTOR)
        actor = next(d for d in docs if d["kind"] == "Actor")
        from skillop.model.manifest import parse_object

        parsed = parse_object({**actor, "metadata": {**actor["metadata"], "uid": "uid-big"}}).obj
        seen = {n: observe_configmap(b) for n, b in self.held.items()}
        cm = f"{ACTOR}-tools"
        started = time.perf_counter()
        plan = actor_plan(parsed, resolution, old_status={}, observed=seen.get(cm),
                          observed_parts={n: o for n, o in seen.items() if n != cm},
                          now="2026-12-03T00:00:00Z")
        took = time.perf_counter() - started
        writes = [b["metadata"]["name"] for b in
                  (*plan.parts, *([plan.configmap] if plan.configmap else []))]
        for body in (*plan.parts, *([plan.configmap] if plan.configmap else [])):
            self.held[body["metadata"]["name"]] = json.loads(json.dumps(body))
        deleted = self.settle(cm)
        sizes = ", ".join(f"{n} {_kib(b)}" for n, b in sorted(self.held.items()))
        print(f"{label}: {len(resolution.tools):,} tools; ConfigMap writes {len(writes)}"
              f" ({', '.join(writes) or 'none'}); then, after the grace,"
              f" {len(deleted)} deleted ({', '.join(deleted) or 'none'}); held: {sizes};"
              f" plan {took * 1000:.0f} ms")

    def settle(self, cm: str) -> list[str]:
        """The parts the Actor's index no longer names (deleted after the grace)."""
        index = json.loads((self.held[cm].get("data") or {}).get("tools.index.json", "{}"))
        named = {c["configMap"] for c in index.get("chunks", [])}
        gone = sorted(n for n in self.held if n != cm and n not in named)
        for name in gone:
            del self.held[name]
        return gone


def _kib(body: Doc) -> str:
    size = sum(len(k) + len(v.encode()) for k, v in (body.get("data") or {}).items())
    size += sum(len(k) + len(base64.b64decode(v)) for k, v in
                (body.get("binaryData") or {}).items())
    return f"{size / 1024:,.0f} KiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--grow", type=int, default=600)
    args = parser.parse_args()
    docs = _largesets().manifests(args.size, namespace=NS, actor=ACTOR, distinct=True)
    *skills, actor = docs
    cluster = Cluster()
    cluster.change("written", docs)
    skills[-1]["spec"]["mcpServers"][0]["tools"][-1]["description"] += " (one more sentence)"
    cluster.change("one tool changed", [*skills, actor])
    extra = [incompressible(f"extra-{n}", args.grow // 2) for n in range(2)]
    grown = {**actor, "spec": {"skills": [*actor["spec"]["skills"],
                                          *(e["metadata"]["name"] for e in extra)]}}
    cluster.change(f"grown by {args.grow}", [*skills, *extra, grown])
    kept = dict(cluster.held)
    shrunk = {**actor, "spec": {"skills": actor["spec"]["skills"][:1]}}
    cluster.change("shrunk to one Skill", [*skills, shrunk])
    cluster.held = {n: b for n, b in kept.items() if n != f"{ACTOR}-tools-part-1"}
    cluster.change("grown set, part-1 deleted by hand", [*skills, *extra, grown])
    return 0


if __name__ == "__main__":
    sys.exit(main())
