"""Benchmark: resolving a large synthetic catalog, against parsing its YAML.

What is measured, and why
-------------------------
The operator re-resolves actors whenever a Skill, Tool or Actor changes, and the
CLI resolves from manifest files; both first parse YAML (or JSON) into objects.
Parsing is work nobody can avoid, so it is the yardstick: resolving every actor
of a catalog should cost no more than parsing that catalog's YAML once.

The script generates a deterministic synthetic catalog (``--seed``):

* ``--skills`` Skills (default 10,000) in namespaces of 1,250 Skills each (a
  bigger catalog has more teams, not bigger ones, so actor closures keep their
  size distribution as the catalog grows), each Skill with about five tools
  from mixed sources: registry ``Tool`` references (some to
  Tools shared across namespaces), built-in groups, anonymous tools with small
  input schemas, declared MCP servers with 2-3 tools, inline SKILL.md documents;
* a layered include DAG: each skill includes 0-3 skills of deeper layers, mostly
  nearby skills of its own namespace (so there are diamonds), a few skills of
  other namespaces that are shared with ``sharing: {from: All}``; a spine makes
  the longest include chain 30 edges deep; some includes override tools of the
  included skill;
* ``--actors`` Actors (default 1,000) with 1-5 root skills, some with an access
  policy (deny globs, denied capabilities, a large ``maxTools``).

It then times, each the best of ``--repeat`` interleaved rounds (so that on a
busy machine every figure is taken under the same conditions), in wall-clock
seconds (``time.perf_counter``, the figures the targets are about) and CPU
seconds of the process (``time.process_time``, steadier on a shared machine):

1. ``yaml.load_all`` of the whole text with PyYAML's C loader (``parse``);
2. ``parse_object`` of every document plus ``Catalog.of`` (``load``): pydantic
   validation of every model;
3. a fresh ``Resolver`` resolving every actor, including its ToolSet document
   and hash (``resolve``), which is what the operator does after a restart.

The catalog must be valid: problems met while resolving are counted and
printed, and the script fails when there are any (a benchmark of error paths
would measure the wrong thing); a sample of actors is resolved again by a second
Resolver, whose hashes must agree with the first and with ``document_hash``
recomputed from the document. Only a summary of each Resolution is kept, as the
operator keeps none: holding 1,000 documents would time the garbage collector.
It prints the input size, the include depth, the closure sizes, every figure,
the process's peak RSS, and last ``resolve/parse ratio: X.XX``.

``--scaling`` also resolves a catalog twice the size (same actors), and one
twice the size with twice the actors, in rounds interleaved with the default
size, and prints the resolve-time ratios (and, for scale, the YAML parse ratios).
``--cli`` times ``skillop tools team-a/developer -f examples -o table`` (wall
clock, a fresh process each time, best of 5).

``--policies N`` resolves the same catalog again with N policies (alternately
ClusterSkillPolicies, half of them with a namespace selector, and SkillPolicies
spread over the namespaces; each with deny globs that prune some deep skills,
capability rules, ``requireApproval``, ``mcpServers.allow`` and ``maxTools``).
Each round resolves both catalogs back to back (which goes first alternates), in
CPU seconds, after one untimed round each, with both catalogs frozen out of the
garbage collector's reach; at least eight rounds with the collector on, then as
many with it off. The cost is the median round's ratio, with its quartiles (and,
for comparison with earlier figures, the ratio of each catalog's best round): a
ratio taken within a round is steady where the best of each is not, as this
machine's speed moves by up to 3x from one minute to the next.

Targets: resolve/parse <= 1.0; N=10 policies => resolve at most 5% slower; x2
catalog => resolve time x2.2 at most; peak memory under 1 GiB at the default
size; the CLI under 0.5 s.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from skillop.model.manifest import Parsed, parse_object
from skillop.model.names import ObjectRef
from skillop.model.problems import Problem
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import document_hash
from skillop.sources.builtins import builtin_group

API = "skillop.dev/v1alpha1"
DEPTH = 30  # the longest include chain, in include edges
SKILLS_PER_NAMESPACE = 1250  # a bigger catalog has more teams, not bigger ones
WINDOW = 6  # includes go to skills at most this many positions away (diamonds)
TOOLS_PER_SKILL = 0.3  # registry Tools generated per Skill
SHARED_TOOL = 0.1  # fraction of Tools labelled skillop.dev/shared=true
SHARED_SKILL = 0.05  # fraction of Skills with sharing: {from: All}
CROSS_NS = 0.05  # fraction of includes / tool refs that cross namespaces
ROOT = Path(__file__).resolve().parent.parent
CLI_TARGET = 0.5
POLICY_ROUNDS = 8  # --policies: paired rounds, at least (a 5-point effect needs them)
T = TypeVar("T")

VERBS = ("run", "list", "get", "create", "update", "delete", "scan", "build", "check",
         "render", "sync", "fetch")
NOUNS = ("tests", "issues", "pods", "images", "users", "tickets", "metrics", "logs",
         "secrets", "charts", "branches", "builds", "alerts", "reports", "tables",
         "queues", "buckets", "invoices", "docs", "traces")
BUILTIN_GROUPS = ("file_operations", "directory_operations", "git_operations",
                  "shell_operations")


# -- the synthetic catalog -----------------------------------------------------------


@dataclass
class SkillPlan:
    ns: str
    name: str
    layer: int
    index: int  # position among the skills of (ns, layer)
    shared: bool
    includes: list[int] = field(default_factory=list)
    #: Tools this skill declares itself: (name, identity); for override keys.
    own: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Catalogue:
    """The generated YAML and what the generator knows about its shape."""

    text: str
    tools: int
    skills: int
    actors: int
    declared_tools: int  # tools declared by skills (all sources), before dedupe
    max_depth: int
    closures: list[int]  # closure size in skills of every actor


class Generator:
    def __init__(self, skills: int, actors: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n_skills = skills
        self.n_actors = actors
        count = max(1, round(skills / SKILLS_PER_NAMESPACE))
        self.namespaces = [f"team-{i}" for i in range(count)]
        self.docs: list[dict[str, Any]] = []
        self.plans: list[SkillPlan] = []
        self.by_slot: dict[tuple[str, int], list[int]] = {}
        self.shared_by_layer: dict[int, list[int]] = {}
        self.tools: dict[str, list[tuple[str, str]]] = {}  # ns -> [(object name, tool name)]
        self.shared_tools: list[tuple[str, str, str]] = []  # (ns, object name, tool name)
        self.name_identities: dict[str, set[str]] = {}
        self.declared = 0

    def pick(self, items: list[T] | tuple[T, ...]) -> T:
        return items[self.rng.randrange(len(items))]

    def tool_name(self) -> str:
        return f"{self.pick(VERBS)}_{self.pick(NOUNS)}"

    def schema(self, props: int) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        for i in range(props):
            kind = self.pick(("string", "integer", "boolean", "string"))
            prop: dict[str, Any] = {"type": kind, "description": f"The {self.pick(NOUNS)} "
                                    f"parameter number {i} of this tool."}
            if kind == "integer":
                prop["minimum"] = 0
            properties[f"{self.pick(NOUNS)}_{i}"] = prop
        return {"type": "object", "properties": properties,
                "required": sorted(properties)[: max(1, props // 2)]}

    def capabilities(self) -> dict[str, Any]:
        r = self.rng.random()
        if r < 0.4:
            return {"readOnly": True, "idempotent": self.rng.random() < 0.5}
        if r < 0.7:
            return {"writes": True, "checkpoint": "file"}
        if r < 0.8:
            return {"writes": True, "destructive": True, "requiresApproval": True}
        if r < 0.9:
            return {"openWorld": True, "tags": ["network"], "timeoutSeconds": 60}
        return {}

    # -- objects -------------------------------------------------------------------
    def generate(self) -> Catalogue:
        self.plan_skills()
        self.make_tools()
        for i in range(len(self.plans)):
            self.docs.append(self.skill_doc(i))
        closures = self.make_actors()
        text = yaml.dump_all(self.docs, Dumper=yaml.CSafeDumper, sort_keys=False,
                             default_flow_style=False, width=100)
        n_tools = sum(len(v) for v in self.tools.values())
        return Catalogue(text, n_tools, len(self.plans), self.n_actors, self.declared,
                         self.max_depth(), closures)

    def plan_skills(self) -> None:
        for i in range(self.n_skills):
            layer = i % (DEPTH + 1)
            position = i // (DEPTH + 1)
            ns = self.namespaces[position % len(self.namespaces)]
            slot = self.by_slot.setdefault((ns, layer), [])
            shared = self.rng.random() < SHARED_SKILL
            plan = SkillPlan(ns, f"skill-l{layer:02d}-{len(slot):04d}", layer, len(slot), shared)
            slot.append(i)
            self.plans.append(plan)
            if shared:
                self.shared_by_layer.setdefault(layer, []).append(i)
        for plan in self.plans:
            plan.includes = self.plan_includes(plan)

    def plan_includes(self, plan: SkillPlan) -> list[int]:
        if plan.layer == DEPTH:
            return []
        out: list[int] = []
        spine = plan.ns == self.namespaces[0] and plan.index == 0
        if spine:  # the chain that reaches DEPTH
            out.append(self.by_slot[(plan.ns, plan.layer + 1)][0])
        count = self.rng.choices((0, 1, 2, 3), weights=(40, 35, 17, 8))[0]
        for _ in range(count):
            layer = min(DEPTH, plan.layer + self.rng.choices((1, 2, 3), weights=(7, 2, 1))[0])
            if self.rng.random() < CROSS_NS and self.shared_by_layer.get(layer):
                target = self.pick(self.shared_by_layer[layer])
            else:
                slot = self.by_slot.get((plan.ns, layer))
                if not slot:
                    continue
                j = plan.index * len(slot) // max(1, len(self.by_slot[(plan.ns, plan.layer)]))
                j = min(len(slot) - 1, max(0, j + self.rng.randint(-WINDOW, WINDOW)))
                target = slot[j]
            if target not in out:
                out.append(target)
        return out

    def make_tools(self) -> None:
        per_ns = max(4, int(self.n_skills * TOOLS_PER_SKILL) // len(self.namespaces))
        for ns in self.namespaces:
            pool = self.tools.setdefault(ns, [])
            for k in range(per_ns):
                name, tool = f"tool-{k:05d}", self.tool_name()
                shared = self.rng.random() < SHARED_TOOL
                meta: dict[str, Any] = {"name": name, "namespace": ns}
                if shared:
                    meta["labels"] = {"skillop.dev/shared": "true"}
                    self.shared_tools.append((ns, name, tool))
                spec: dict[str, Any] = {
                    "name": tool, "description": f"{tool.replace('_', ' ').capitalize()}"
                    f" in the {ns} systems ({name}).",
                    "inputSchema": self.schema(self.rng.randint(2, 6)),
                    "capabilities": self.capabilities(),
                }
                if self.rng.random() < 0.3:
                    spec["title"] = tool.replace("_", " ").title()
                if self.rng.random() < 0.5:
                    spec["runtime"] = {"image": f"registry.example/{ns}/{name}:1.0",
                                       "command": ["/bin/tool", tool]}
                pool.append((name, tool))
                self.docs.append({"apiVersion": API, "kind": "Tool", "metadata": meta,
                                  "spec": spec})

    def declare(self, plan: SkillPlan, used: set[str], name: str, identity: str) -> bool:
        if name in used:
            return False
        used.add(name)
        plan.own.append((name, identity))
        self.name_identities.setdefault(name, set()).add(identity)
        self.declared += 1
        return True

    def skill_doc(self, i: int) -> dict[str, Any]:
        plan = self.plans[i]
        ref = f"{plan.ns}/{plan.name}"
        used: set[str] = set()
        spec: dict[str, Any] = {"description": f"Synthetic skill {ref}"}
        rng = self.rng
        refs: list[dict[str, Any]] = []
        for _ in range(rng.choices((0, 1, 2, 3), weights=(5, 20, 40, 35))[0]):
            if rng.random() < CROSS_NS and self.shared_tools:
                ns, obj, tool = self.pick(self.shared_tools)
                text = f"{ns}/{obj}" if ns != plan.ns else obj
            else:
                ns = plan.ns
                obj, tool = self.pick(self.tools[plan.ns])
                text = obj
            if not self.declare(plan, used, tool, f"tool:{ns}/{obj}"):
                continue
            item: dict[str, Any] = {"ref": text}
            if rng.random() < 0.1:
                item["overrides"] = {"description": f"{tool} as {plan.name} uses it"}
            refs.append(item)
        if refs:
            spec["tools"] = refs
        if rng.random() < 0.15:
            group = self.pick(BUILTIN_GROUPS)
            spec["builtins"] = [group]
            for tool in (t.name for t in builtin_group(group) or ()):
                self.declare(plan, used, tool, f"builtin:{group}/{tool}")
        anonymous = []
        for _ in range(rng.choices((0, 1, 2), weights=(10, 45, 45))[0]):
            tool = self.tool_name()
            if not self.declare(plan, used, tool, f"anon:{ref}#{tool}"):
                continue
            anonymous.append({"name": tool, "description": f"Inline {tool} for {plan.name}.",
                              "inputSchema": self.schema(rng.randint(1, 2)),
                              "capabilities": self.capabilities()})
        if anonymous:
            spec["anonymousTools"] = anonymous
        if rng.random() < 0.3:
            spec["mcpServers"] = [self.mcp_server(plan, used)]
        if rng.random() < 0.1:
            name = f"howto-{plan.layer}-{plan.index}-{plan.ns}"
            if self.declare(plan, used, name, f"agentskill:{ref}#{name}"):
                spec["agentSkills"] = [{"inline": (
                    f"---\nname: {name}\ndescription: How {plan.name} does its job.\n---\n"
                    f"# {plan.name}\n\n1. Read the task.\n2. Use the tools of {ref}.\n")}]
        includes = [self.include(plan, self.plans[t]) for t in plan.includes]
        if includes:
            spec["includes"] = includes
        if plan.shared:
            spec["sharing"] = {"from": "All"}
        return {"apiVersion": API, "kind": "Skill",
                "metadata": {"name": plan.name, "namespace": plan.ns}, "spec": spec}

    def mcp_server(self, plan: SkillPlan, used: set[str]) -> dict[str, Any]:
        url = f"http://mcp-{plan.name}.{plan.ns}.svc:8080/mcp"
        tools = []
        for _ in range(self.rng.randint(2, 3)):
            tool = f"{self.pick(NOUNS)}_{self.pick(VERBS)}"
            if not self.declare(plan, used, tool, f"mcp:{url}#{tool}"):
                continue
            tools.append({"name": tool, "description": f"{tool} via MCP.",
                          "inputSchema": self.schema(self.rng.randint(1, 3)),
                          "annotations": {"readOnlyHint": self.rng.random() < 0.5}})
        server: dict[str, Any] = {"name": "mcp", "url": url, "tools": tools}
        if self.rng.random() < 0.3:
            server["overrides"] = {tools[0]["name"]: {"capabilities": {"requiresApproval": True}}}
        return server

    def include(self, plan: SkillPlan, target: SkillPlan) -> dict[str, Any]:
        text = target.name if target.ns == plan.ns else f"{target.ns}/{target.name}"
        out: dict[str, Any] = {"skill": text}
        if target.own and self.rng.random() < 0.15:
            name, identity = self.pick(target.own)
            # A bare name is only safe when no other tool anywhere has it.
            key = (name if len(self.name_identities[name]) == 1
                   else f"{target.ns}/{target.name}.{name}")
            override: dict[str, Any] = {"capabilities": {"requiresApproval": True}}
            if not identity.startswith("builtin:") and self.rng.random() < 0.5:
                override["description"] = f"{name}, as {plan.name} wants it"
            out["overrides"] = {key: override}
        return out

    def make_actors(self) -> list[int]:
        closures: list[int] = []
        memo: dict[int, frozenset[int]] = {}
        shared_all = [i for layer in self.shared_by_layer.values() for i in layer]
        for a in range(self.n_actors):
            ns = self.namespaces[a % len(self.namespaces)]
            if a == 0:  # team-a/developer style: the spine's top in the first namespace
                roots = [self.by_slot[(self.namespaces[0], 0)][0]]
            else:
                roots = []
                for _ in range(self.rng.randint(1, 5)):
                    if self.rng.random() < CROSS_NS and shared_all:
                        roots.append(self.pick(shared_all))
                    else:
                        layer = min(DEPTH, int(self.rng.expovariate(1 / 6)))
                        slot = self.by_slot.get((ns, layer)) or self.by_slot[(ns, 0)]
                        roots.append(self.pick(slot))
            skills = [self.plans[r].name if self.plans[r].ns == ns
                      else f"{self.plans[r].ns}/{self.plans[r].name}" for r in roots]
            spec: dict[str, Any] = {"skills": list(dict.fromkeys(skills))}
            if self.rng.random() < 0.3:
                spec["skillAccessPolicy"] = {
                    "deny": [f"*/skill-l{self.rng.randint(1, DEPTH):02d}-*"],
                    "denyCapabilities": self.rng.sample(["destructive", "unsafe", "openWorld"],
                                                        self.rng.randint(1, 2)),
                    "maxTools": 4096,
                }
            self.docs.append({"apiVersion": API, "kind": "Actor",
                              "metadata": {"name": f"actor-{a:05d}", "namespace": ns},
                              "spec": spec})
            closure: set[int] = set()
            for r in roots:
                closure |= self.closure(r, memo)
            closures.append(len(closure))
        return closures

    def closure(self, root: int, memo: dict[int, frozenset[int]]) -> frozenset[int]:
        # Iterative post-order: children (deeper layers) first.
        stack = [root]
        while stack:
            i = stack[-1]
            if i in memo:
                stack.pop()
                continue
            pending = [t for t in self.plans[i].includes if t not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            memo[i] = frozenset({i}).union(*(memo[t] for t in self.plans[i].includes))
        return memo[root]

    def max_depth(self) -> int:
        depth: dict[int, int] = {}
        for i in sorted(range(len(self.plans)), key=lambda i: -self.plans[i].layer):
            depth[i] = max((depth[t] + 1 for t in self.plans[i].includes), default=0)
        return max(depth.values(), default=0)


# -- measuring -----------------------------------------------------------------------


@dataclass
class Timing:
    """Best wall-clock (``time.perf_counter``) and CPU (``time.process_time``) seconds."""

    wall: float = float("inf")
    cpu: float = float("inf")

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn(*args)
        self.wall = min(self.wall, time.perf_counter() - wall)
        self.cpu = min(self.cpu, time.process_time() - cpu)
        return result


def parse(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=yaml.CSafeLoader))


def load(docs: list[Any]) -> tuple[Catalog, list[Problem]]:
    objects: list[Parsed] = []
    problems: list[Problem] = []
    for doc in docs:
        result = parse_object(doc, origin="bench.yaml")
        problems += result.problems
        if result.obj is not None:
            objects.append(result.obj)
    return Catalog.of(objects), problems


@dataclass(frozen=True)
class Outcome:
    """What the benchmark keeps of a Resolution (keeping them all would measure the
    garbage collector walking a heap the operator never holds)."""

    actor: ObjectRef
    hash: str
    tools: int
    pruned: int
    warnings: int
    problems: tuple[Problem, ...]


def resolve_all(catalog: Catalog) -> list[Outcome]:
    resolver = Resolver(catalog)
    out = []
    for ref in catalog.actors:
        r = resolver.resolve_actor(ref)
        assert r is not None
        out.append(Outcome(ref, r.hash, len(r.tools), len(r.pruned), len(r.warnings),
                           r.problems))
    return out


@dataclass
class Figures:
    catalogue: Catalogue
    catalog: Catalog
    parse: Timing
    load: Timing
    resolve: Timing
    outcomes: list[Outcome]
    problems: list[Problem]


def measure(skills: int, actors: int, seed: int, repeat: int) -> Figures:
    """Best of ``repeat`` rounds of parse, load, resolve. Rounds are interleaved, so
    that on a busy machine every figure is taken under the same conditions."""
    catalogue = Generator(skills, actors, seed).generate()
    parse_t, load_t, resolve_t = Timing(), Timing(), Timing()
    for round_ in range(repeat):
        docs = parse_t.run(parse, catalogue.text)
        catalog, problems = load_t.run(load, docs)
        del docs
        outcomes = resolve_t.run(resolve_all, catalog)
        if round_ < repeat - 1:
            del catalog, problems, outcomes  # keep one catalog in memory at a time
    problems = problems + [p for o in outcomes for p in o.problems]
    return Figures(catalogue, catalog, parse_t, load_t, resolve_t, outcomes, problems)


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def report(f: Figures) -> None:
    c = f.catalogue
    tools = [o.tools for o in f.outcomes]
    pruned = sum(o.pruned for o in f.outcomes)
    warnings = sum(o.warnings for o in f.outcomes)
    print(f"input: {len(c.text.encode()):,} bytes, {c.tools + c.skills + c.actors:,} documents"
          f" ({c.tools:,} tools, {c.skills:,} skills, {c.actors:,} actors),"
          f" {c.declared_tools:,} tools declared by skills"
          f" ({c.declared_tools / max(1, c.skills):.1f} per skill)")
    print(f"include DAG: max depth {c.max_depth}; actor closure {statistics.mean(c.closures):.1f}"
          f" skills mean, {max(c.closures)} max; effective tools per actor"
          f" {statistics.mean(tools):.1f} mean, {max(tools)} max")
    print(f"policy: {pruned:,} skills/tools pruned or dropped; {warnings:,} warnings")
    per_actor = f.resolve.wall / max(1, c.actors) * 1e3
    print(f"parse   (yaml CSafeLoader):           {f.parse.wall:7.3f} s  (cpu {f.parse.cpu:.3f} s)")
    print(f"load    (parse_object + Catalog.of):  {f.load.wall:7.3f} s  (cpu {f.load.cpu:.3f} s)")
    print(f"resolve (all actors, ToolSet + hash): {f.resolve.wall:7.3f} s  (cpu"
          f" {f.resolve.cpu:.3f} s; {per_actor:.2f} ms per actor)")


def check_valid(f: Figures, sample: int = 50) -> None:
    """No problems; and hashes that are deterministic (a second Resolver agrees) and
    what ``document_hash`` recomputes from the document itself."""
    resolver = Resolver(f.catalog)
    for o in f.outcomes[:: max(1, len(f.outcomes) // sample)]:
        r = resolver.resolve_actor(o.actor)
        assert r is not None
        if not r.hash == o.hash == document_hash(r.document):
            sys.exit(f"hash mismatch for {o.actor}: the ToolSet hash is not reproducible")
    fail_on(f.problems)
    print("problems: 0 (the catalog is valid)")


def fail_on(problems: list[Problem]) -> None:
    if not problems:
        return
    print(f"problems: {len(problems)} - the generated catalog is invalid:", file=sys.stderr)
    for problem in list(dict.fromkeys(problems))[:20]:
        print(f"  {problem.line()}", file=sys.stderr)
    sys.exit(1)


def scaling(skills: int, actors: int, seed: int, repeat: int) -> None:
    """Resolve at N skills, 2N skills (same actors) and 2N skills with 2x actors, in
    interleaved rounds (one catalog in memory at a time), and print the ratios.
    Interleaving matters on a shared machine: conditions drift over minutes."""
    sizes = ((skills, actors), (2 * skills, actors), (2 * skills, 2 * actors))
    texts = [Generator(s, a, seed).generate().text for s, a in sizes]
    parse_t = [Timing() for _ in sizes]
    resolve_t = [Timing() for _ in sizes]
    for _ in range(repeat):
        for i, text in enumerate(texts):
            docs = parse_t[i].run(parse, text)
            catalog, problems = load(docs)
            del docs
            outcomes = resolve_t[i].run(resolve_all, catalog)
            fail_on(problems + [p for o in outcomes for p in o.problems])
            del catalog, outcomes
    for (n, a), p, r in zip(sizes, parse_t, resolve_t, strict=True):
        print(f"[{n:,} skills, {a:,} actors] resolve {r.wall:.3f} s (cpu {r.cpu:.3f} s;"
              f" {r.wall / a * 1e3:.2f} ms per actor), parse {p.wall:.3f} s")
    base, base_parse = resolve_t[0], parse_t[0]
    for i, label in ((1, "x2 catalog"), (2, "x2 catalog and x2 actors")):
        r, p = resolve_t[i], parse_t[i]
        print(f"scaling {label}: resolve time ratio {r.wall / base.wall:.2f}"
              f" (cpu {r.cpu / base.cpu:.2f}; YAML parse ratio {p.wall / base_parse.wall:.2f};"
              f" target <= 2.20)")


def policy_docs(count: int, namespaces: list[str]) -> list[dict[str, Any]]:
    """``count`` policies over the generated namespaces (labelled for selectors)."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": ns, "labels": {"tier": "tenant" if i % 2 == 0 else "platform"}}}
        for i, ns in enumerate(namespaces)]
    for i in range(count):
        spec: dict[str, Any] = {
            "deny": [f"*/skill-l{DEPTH - 1 - i % 5:02d}-00{i % 10}*"],
            "denyCapabilities": ["unsafe"] if i % 2 == 0 else ["sideEffects"],
            "maxTools": 5000 - i}
        if i % 2 == 0:
            spec |= {"requireApproval": ["openWorld"],
                     "mcpServers": {"allow": ["*.svc", "*.svc.cluster.local"]}}
            if i % 4 == 0:
                spec["namespaceSelector"] = {"matchLabels": {"tier": "tenant"}}
            docs.append({"apiVersion": API, "kind": "ClusterSkillPolicy",
                         "metadata": {"name": f"guard-{i:02d}"}, "spec": spec})
        else:
            spec["allow"] = ["*"]
            docs.append({"apiVersion": API, "kind": "SkillPolicy",
                         "metadata": {"name": f"guard-{i:02d}",
                                      "namespace": namespaces[i % len(namespaces)]},
                         "spec": spec})
    return docs


def policy_cost(skills: int, actors: int, seed: int, repeat: int, count: int) -> None:
    """Resolve every actor without and with ``count`` policies, in paired rounds
    (at least ``POLICY_ROUNDS``), with the collector on and then off."""
    generator = Generator(skills, actors, seed)
    docs = parse(generator.generate().text)
    plain, problems = load(docs)
    governed, more = load(docs + policy_docs(count, generator.namespaces))
    del docs
    fail_on(problems + more)
    # One untimed round each: values memoized on the catalogs' own objects (a
    # registry Tool's verdicts) are then as warm in every timed round.
    base, outcomes = resolve_all(plain), resolve_all(governed)
    fail_on([p for o in base + outcomes for p in o.problems])
    # The two catalogs live as long as the operator's; frozen, the collector does
    # not walk them, which it otherwise does in whichever round happens to start a
    # full collection: that alone moved this figure by -5 to +10 points.
    gc.collect()
    gc.freeze()
    rounds = max(repeat, POLICY_ROUNDS)
    timings = []
    for collect in (True, False):
        if not collect:
            gc.disable()
        timings.append((collect, paired_rounds(plain, governed, rounds)))
        gc.enable()
    gc.unfreeze()
    tools = (sum(o.tools for o in base), sum(o.tools for o in outcomes))
    pruned = (sum(o.pruned for o in base), sum(o.pruned for o in outcomes))
    print(f"policies: {count} ({len(governed.policies)} in the catalog) over"
          f" {len(generator.namespaces)} namespaces; tools {tools[0]:,} -> {tools[1]:,},"
          f" pruned or dropped {pruned[0]:,} -> {pruned[1]:,}")
    for collect, pairs in timings:
        without, with_ = min(w for w, _ in pairs), min(c for _, c in pairs)
        ratios = sorted(c / w - 1 for w, c in pairs)
        low, _, high = statistics.quantiles(ratios, n=4)
        print(f"resolve (gc {'on' if collect else 'off'}, {rounds} paired rounds, cpu) without"
              f" policies {without:.3f} s, with {with_:.3f} s (best of each): cost"
              f" {statistics.median(ratios):+.1%} in the median round (quartiles"
              f" {low:+.1%} .. {high:+.1%}; best of each {with_ / without - 1:+.1%})"
              f" (target <= +5%)")


def paired_rounds(plain: Catalog, governed: Catalog, rounds: int) -> list[tuple[float, float]]:
    """CPU seconds of resolving every actor of ``plain`` and of ``governed``, back
    to back in each round, which of the two goes first alternating: a slow phase
    of the machine (this one's speed moves by up to 3x from minute to minute)
    then slows both halves of a round alike, and the ratio of a round stays
    what the policies cost."""
    pairs = []
    for i in range(rounds):
        order = (plain, governed) if i % 2 == 0 else (governed, plain)
        seconds = {}
        for catalog in order:
            gc.collect()
            start = time.process_time()
            resolve_all(catalog)
            seconds[id(catalog)] = time.process_time() - start
        pairs.append((seconds[id(plain)], seconds[id(governed)]))
    return pairs


def cli_wall(runs: int = 5) -> float:
    cmd = [str(Path(sys.executable).parent / "skillop"), "tools", "team-a/developer",
           "-f", str(ROOT / "examples"), "-o", "table"]
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--actors", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scaling", action="store_true",
                        help="also resolve x2 skills (same actors) and x2 skills and actors")
    parser.add_argument("--policies", type=int, default=0, metavar="N",
                        help="also resolve with N SkillPolicies/ClusterSkillPolicies (cost)")
    parser.add_argument("--cli", action="store_true",
                        help="also time `skillop tools` on examples/ (best of 5)")
    args = parser.parse_args(argv)
    if args.skills < DEPTH + 1 or args.actors < 1:
        parser.error(f"--skills must be at least {DEPTH + 1} and --actors at least 1")

    figures = measure(args.skills, args.actors, args.seed, args.repeat)
    report(figures)
    check_valid(figures)
    rss = peak_rss_mib()
    print(f"peak memory (max RSS): {rss:.0f} MiB (target < 1024 MiB at the default size)")
    ratio = figures.resolve.wall / figures.parse.wall
    cpu_ratio = figures.resolve.cpu / figures.parse.cpu
    del figures

    if args.scaling:
        scaling(args.skills, args.actors, args.seed, args.repeat)
    if args.policies:
        policy_cost(args.skills, args.actors, args.seed, args.repeat, args.policies)
    if args.cli:
        wall = cli_wall()
        print(f"cli: skillop tools team-a/developer -f examples -o table: {wall:.3f} s wall"
              f" (best of 5; target < {CLI_TARGET} s)")
    print(f"resolve/parse cpu ratio: {cpu_ratio:.2f}")
    print(f"resolve/parse ratio: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
