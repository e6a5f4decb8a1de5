"""The resolver: one catalog snapshot in, Resolutions (and their ToolSets) out.

Pure: no I/O, no clocks, no Kubernetes. A ``Resolver`` memoizes per-skill views,
flattened sets and cycle analysis, so resolving many actors over a shared DAG
does each skill once; make a new one when the catalog changes.

Resolution order for an actor (API contract, Semantics):
references -> policy pruning of skills -> flatten (dedupe, overrides, merge of
paths) -> tool filter (capabilities, sources, MCP hosts) -> approval marks ->
conflict names -> binding names -> budget. The policy is the Actor's effective
one: its own tightened by every SkillPolicy and ClusterSkillPolicy that applies
(``resolve.policy``), in the same pass.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillop.model import problems as P
from skillop.model.manifest import POLICY_KINDS, ActorResource
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.policies import ServerHost, server_host
from skillop.model.problems import Problem, Subject
from skillop.model.specs import ApprovalSettings, Disclosure, McpServer
from skillop.model.toolset import Owner, ServerEntry, ToolSetDocument, default_configmap_name
from skillop.model.wording import count
from skillop.resolve import graph
from skillop.resolve.catalog import Catalog
from skillop.resolve.credentials import (
    CredentialCheck,
    CredentialUse,
    UsesMemo,
    check_credentials,
)
from skillop.resolve.entries import Entry, Flat, merge_into
from skillop.resolve.flatten import Flattener
from skillop.resolve.namespace_rules import AppliedPolicy, Ceiling, NamespaceRules
from skillop.resolve.naming import binding_names, effective_names
from skillop.resolve.policy import EffectivePolicy, MarkedEntries, effective_policy
from skillop.resolve.skillgate import Refusal, SkillGate
from skillop.resolve.skills import SkillView, skill_view
from skillop.resolve.tokens import ENCODING
from skillop.resolve.toolset import (
    EffectiveTool,
    configmap_layout,
    configmap_name,
    disclosure_entry,
    toolset_document,
    toolset_text,
    used_servers,
)


@dataclass(frozen=True, slots=True)
class PrunedItem:
    kind: str
    name: str
    reason: str
    skill: str | None = None
    #: The SkillPolicy or ClusterSkillPolicy that removed it (``ClusterSkillPolicy
    #: tenants``) and its rule (``deny``); None for the Actor's own policy.
    policy: str | None = None
    rule: str | None = None

    @classmethod
    def of(cls, kind: str, name: str, refusal: Refusal, skill: str | None = None,
           ) -> PrunedItem:
        return cls(kind, name, refusal.reason, skill, refusal.policy, refusal.rule)

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "name": self.name, "reason": self.reason}
        for key in ("skill", "policy", "rule"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class Resolution:
    """Everything known about one Actor's (or Skill's) effective tool set."""

    subject: Subject
    tools: tuple[EffectiveTool, ...]
    skills: tuple[ObjectRef, ...]
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]
    pruned: tuple[PrunedItem, ...]
    #: The ToolSet document's hash.
    hash: str
    #: The document's canonical JSON: what the ConfigMap stores.
    text: str = field(repr=False)
    #: Builds the document (``toolset``): only the CLI reads it, and the operator,
    #: writing ``text``, never pays for it.
    build_document: Callable[[], ToolSetDocument] = field(repr=False, compare=False)
    dropped: tuple[tuple[Entry, str], ...] = ()
    #: The SkillPolicies and ClusterSkillPolicies that applied (an Actor's).
    policies: tuple[AppliedPolicy, ...] = ()
    #: What the set's tool definitions cost the model, in tokens (``resolve.tokens``).
    tokens: int = 0
    #: The document's ``mcpServers`` (what the gateway connects to, and the Secrets
    #: and CA bundles its pod must mount), without building the whole document.
    servers: tuple[ServerEntry, ...] = field(default=(), repr=False, compare=False)
    #: Which Secret the set sends where, and where unbound (an Actor's;
    #: ``resolve.credentials``).
    binding: CredentialCheck = field(default_factory=CredentialCheck)

    @property
    def credentials(self) -> tuple[CredentialUse, ...]:
        """Every Secret of the Actor's namespace the set sends, and where."""
        return self.binding.uses

    @property
    def bound_servers(self) -> tuple[ServerEntry, ...]:
        """``servers`` without those sending a Secret where the Actor did not bind
        it: what a pod may be given credentials for."""
        unbound = self.binding.unbound
        return tuple(s for s in self.servers if (s.skill, s.name) not in unbound) \
            if unbound else self.servers

    @property
    def ok(self) -> bool:
        return not self.problems

    @functools.cached_property
    def toolset(self) -> ToolSetDocument:
        """The ToolSet document, whose canonical JSON is ``text``."""
        return self.build_document()

    @functools.cached_property
    def document(self) -> dict[str, Any]:
        """The ToolSet document as JSON values, keys in the contract's order."""
        return self.toolset.as_dict()

    def tool(self, name: str) -> EffectiveTool | None:
        for tool in self.tools:
            if name in (tool.name, tool.binding_name, tool.entry.qualified_name):
                return tool
        return None


class Resolver:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._views: dict[ObjectRef, SkillView | None] = {}
        self._cycles: dict[ObjectRef, graph.Cycle] = {}
        self._explored: set[ObjectRef] = set()
        self._cyclic: set[ObjectRef] = set()
        self.flattener = Flattener(self.view, self._cyclic, self._subject_of)
        self._policy_memos: dict[SkillGate, dict[ObjectRef, Flat]] = {}
        self._effective: dict[tuple[Any, ...], EffectivePolicy] = {}
        self._namespace_rules: dict[str, NamespaceRules] = {}
        #: Approval-marked entries, shared by every namespace (``screen``).
        self._marks: MarkedEntries = {}
        self._names: dict[ObjectRef, tuple[str, ...]] = {}
        self._unreached_memo: dict[tuple[SkillGate, ObjectRef],
                                   tuple[tuple[ObjectRef, PrunedItem], ...]] = {}
        self._hosts: dict[tuple[ObjectRef, str], ServerHost] = {}
        #: Each MCP server's ToolSet entry, built once for every Actor that uses it.
        self._server_entries: dict[tuple[ObjectRef, str], ServerEntry] = {}
        self._uses: UsesMemo = {}

    # -- per-skill facts ------------------------------------------------------------
    def view(self, ref: ObjectRef) -> SkillView | None:
        if ref not in self._views:
            skill = self.catalog.skills.get(ref)
            self._views[ref] = None if skill is None else skill_view(skill, self.catalog)
        return self._views[ref]

    def _subject_of(self, ref: ObjectRef) -> tuple[Subject, str | None]:
        skill = self.catalog.skills[ref]
        return skill.subject, skill.origin

    def _targets(self, ref: ObjectRef) -> list[ObjectRef]:
        view = self.view(ref)
        return [] if view is None else [e.target for e in view.includes]

    def explore(self, roots: Iterable[ObjectRef]) -> None:
        """Find the cycles reachable from ``roots`` (each part of the graph once).

        An explored set is closed under reachability, so a new component never
        contains an explored skill: edges into explored skills can be ignored.
        """
        fresh = [r for r in roots if r not in self._explored and r in self.catalog.skills]
        if not fresh:
            return
        explored = self._explored

        def edges(ref: ObjectRef) -> list[ObjectRef]:
            return [t for t in self._targets(ref) if t not in explored]

        found = graph.cycles(fresh, edges)
        explored |= graph.reachable(fresh, edges)
        self._cycles.update(found)
        self._cyclic.update(found)

    def skill_problems(self, ref: ObjectRef) -> tuple[Problem, ...]:
        """A skill's own problems: its spec, references, overrides and cycles."""
        view = self.view(ref)
        if view is None:
            return ()
        self.explore([ref])
        self.flattener.flat(ref)
        out = list(view.problems) + list(self.flattener.override_problems.get(ref, ()))
        cycle = self._cycles.get(ref)
        if cycle is not None:
            skill = self.catalog.skills[ref]
            index = next(e.index for e in view.includes if e.target == cycle.next)
            out.append(Problem(skill.subject, f"spec.includes[{index}].skill", P.CYCLE_DETECTED,
                               f"include cycle: {cycle.spell()}", skill.origin))
        return tuple(out)

    # -- resolutions --------------------------------------------------------------
    def resolve_skill(self, ref: ObjectRef) -> Resolution | None:
        skill = self.catalog.skills.get(ref)
        if skill is None:
            return None
        self.explore([ref])
        flat = self.flattener.flat(ref)
        assert flat is not None
        entries = list(flat.entries.values())
        problems = self._closure_problems(flat.skills)
        return self._finish(skill.subject, "skill", [flat], entries, flat.skills, problems,
                            list(flat.warnings), [], [], budget=None)

    def resolve_actor(self, ref: ObjectRef) -> Resolution | None:
        actor = self.catalog.actors.get(ref)
        if actor is None:
            return None
        problems, roots = self._actor_roots(actor)
        policy = self.effective_policy(actor)
        gate = policy.gate
        pruned: list[PrunedItem] = []
        allowed_roots = []
        for root in roots:
            refusal = self._refusal(gate, root)
            if refusal is None:
                allowed_roots.append(root)
            else:
                pruned.append(PrunedItem.of("Skill", root.canonical, refusal))
        self.explore(roots)
        flats = self._flats(allowed_roots, gate)
        entries: dict[str, Entry] = {}
        skills: dict[ObjectRef, None] = {}
        merged: list[str] = []
        warnings: dict[str, None] = {}
        for flat in flats:
            merge_into(entries, flat.entries, merged)
            skills.update(dict.fromkeys(flat.skills))
            warnings.update(dict.fromkeys(flat.warnings))
        warnings.update(dict.fromkeys(f"{actor.subject}: {w}" for w in merged))
        # Skills below the roots are pruned only where a root is refused or a
        # flattening is not the full one; otherwise there is nothing to report.
        if pruned or any(flat is not self.flattener.full.get(flat.skill) for flat in flats):
            pruned += self._pruned_skills(roots, skills, gate, pruned)
        screened = policy.screen(entries.values(), self._host, self._marks)
        kept, refused = screened.kept, screened.dropped
        warnings.update(dict.fromkeys(f"{actor.subject}: {w}" for w in screened.warnings))
        dropped = [(entry, refusal.reason) for entry, refusal in refused]
        pruned += [PrunedItem.of("Tool", entry.tool.name, refusal, entry.skill.canonical)
                   for entry, refusal in refused]
        problems += self._closure_problems(tuple(skills), gate)
        problems += self._policy_problems(actor)
        approval, replaced = policy.approval(actor.spec.approval)
        if replaced is not None:
            warnings[f"{actor.subject}: {replaced}"] = None
        return self._finish(actor.subject, "actor", flats, kept, tuple(skills), problems,
                            list(warnings), pruned, dropped, budget=policy,
                            policies=policy.applied, actor=actor,
                            disclosure=actor.spec.disclosure, approval=approval)

    def effective_policy(self, actor: ActorResource) -> EffectivePolicy:
        """The Actor's own policy tightened by every policy governing its namespace:
        one object for every Actor of a namespace with the same own policy, so its
        skill verdicts are shared; and one ``NamespaceRules`` (the policies' part)
        for the whole namespace, so its tool verdicts are shared whatever the own policy."""
        ns, own = actor.meta.namespace, actor.spec.skill_access_policy
        # Every field of the own policy, whatever fields it has: a field left out
        # would hand one Actor another's effective policy.
        slot = (ns, *(tuple(v) if isinstance(v, list) else v
                      for v in own.model_dump(mode="python").values()))
        found = self._effective.get(slot)
        if found is None:
            rules = self._namespace_rules.get(ns)
            if rules is None:
                rules = self._namespace_rules[ns] = self.catalog.namespace_rules(ns)
            found = self._effective[slot] = effective_policy(own, rules)
        return found

    def _policy_problems(self, actor: ActorResource) -> list[Problem]:
        """``DependencyFailed`` for every invalid policy that may govern the Actor: a
        policy that cannot be read must not loosen anything, so the Actor keeps its
        last good tool set until the policy is fixed (a ClusterSkillPolicy's selector
        is unreadable too: it may govern every namespace)."""
        ns = actor.meta.namespace
        return [Problem(actor.subject, "", P.DEPENDENCY_FAILED,
                        f"{kind} {ref.name if not ref.namespace else ref} is invalid: {why};"
                        " the last good tool set stays until it is fixed", actor.origin)
                for (kind, ref), why in sorted(self.catalog.invalid.items())
                if kind in POLICY_KINDS and ref.namespace in ("", ns)]

    @staticmethod
    def _refusal(gate: SkillGate, ref: ObjectRef) -> Refusal | None:
        return gate.refusal(ref)  # memoized by the gate

    def _host(self, entry: Entry) -> ServerHost:
        """The host of an MCP tool's server URL, for ``mcpServers.allow``."""
        server = entry.tool.mcp_server
        if server is None:
            return server_host(None)  # no server, no URL: no host
        slot = (entry.skill, server)
        if slot not in self._hosts:
            view = self.view(entry.skill)
            url = next((s.url for s in view.servers if s.name == server), None) if view else None
            self._hosts[slot] = server_host(url)
        return self._hosts[slot]

    def _actor_roots(self, actor: ActorResource) -> tuple[list[Problem], list[ObjectRef]]:
        problems: list[Problem] = []
        roots: list[ObjectRef] = []
        ns = actor.meta.namespace
        for i, text in enumerate(actor.spec.skills):
            field_ = f"spec.skills[{i}]"
            try:
                ref = parse_ref(text, namespace=ns)
            except RefError as err:
                problems.append(Problem(actor.subject, field_, P.INVALID_REF, str(err),
                                        actor.origin))
                continue
            skill = self.catalog.skills.get(ref)
            if skill is None:
                problems.append(Problem(actor.subject, field_,
                                        *self.catalog.missing("Skill", ref), actor.origin))
            elif not self.catalog.skill_admits(skill, ns):
                problems.append(Problem(actor.subject, field_, P.REF_NOT_PERMITTED,
                                        f"skill {ref} is not shared with namespace {ns}"
                                        " (its spec.sharing)", actor.origin))
            elif ref not in roots:
                roots.append(ref)
        return problems, roots

    def _flats(self, roots: Sequence[ObjectRef], gate: SkillGate) -> list[Flat]:
        if gate.admits_all:
            return [f for r in roots if (f := self.flattener.flat(r)) is not None]
        memo = self._policy_memos.setdefault(gate, {})

        def allowed(ref: ObjectRef) -> bool:
            return gate.refusal(ref) is None

        out = []
        for root in roots:
            flat = memo.get(root)
            if flat is None:
                full = self.flattener.flat(root)
                if full is None:
                    continue
                # A closure the gate refuses nothing of flattens as it is: checking
                # the verdicts is cheaper than the pruning walk over it.
                if gate.admits_every(self._closure_names(root, full)):
                    flat = memo[root] = full
                else:
                    flat = self.flattener.flat(root, allowed=allowed, memo=memo)
            if flat is not None:
                out.append(flat)
        return out

    def _closure_names(self, root: ObjectRef, full: Flat) -> tuple[str, ...]:
        """The canonical names of ``root``'s closure, once for every gate."""
        found = self._names.get(root)
        if found is None:
            found = self._names[root] = tuple(ref.canonical for ref in full.skills)
        return found

    def _pruned_skills(self, roots: Sequence[ObjectRef], reached: dict[ObjectRef, None],
                       gate: SkillGate, already: list[PrunedItem]) -> list[PrunedItem]:
        reported = {p.name for p in already}
        out = []
        for root in roots:
            for ref, item in self._unreached(gate, root):
                if ref in reached or item.name in reported:
                    continue
                reported.add(item.name)
                out.append(item)
        return out

    def _unreached(self, gate: SkillGate, root: ObjectRef,
                   ) -> tuple[tuple[ObjectRef, PrunedItem], ...]:
        """The skills of ``root``'s closure that its flattening under ``gate`` does
        not reach, in closure order, each with its report: the same for every Actor
        under the gate, so found once per (gate, root), not per Actor."""
        slot = (gate, root)
        found = self._unreached_memo.get(slot)
        if found is None:
            full = self.flattener.flat(root)
            kept = self._policy_memos.get(gate, {}).get(root)
            if kept is full:  # nothing pruned below the root (the usual case)
                self._unreached_memo[slot] = ()
                return ()
            inside = set(kept.skills) if kept is not None else set()
            closure = full.skills if full is not None else ()
            unreached = [ref for ref in closure if ref not in inside]
            refused = [(ref, why) for ref in unreached if (why := gate.refusal(ref)) is not None]
            found = self._unreached_memo[slot] = tuple(
                (ref, PrunedItem.of("Skill", ref.canonical, gate.refusal(ref)
                                    or self._through(ref, refused)))
                for ref in unreached)
        return found

    def _through(self, ref: ObjectRef, refused: list[tuple[ObjectRef, Refusal]]) -> Refusal:
        """Why ``ref`` is pruned though no rule names it: the first pruned skill it is
        reached through, whose policy and rule it names too (docs/api.md: every
        pruned skill names the policy and rule behind it)."""
        for skill, why in refused:
            below = self.flattener.flat(skill)
            if below is not None and ref in below.skills:
                return Refusal("reached only through pruned skills", why.policy, why.rule)
        return Refusal("reached only through pruned skills")

    def _closure_problems(self, skills: Sequence[ObjectRef], gate: SkillGate | None = None,
                          ) -> list[Problem]:
        """The problems of every skill reached (what ``gate`` prunes is not reached)."""
        if self._cyclic.intersection(skills):
            skills = self._through_cycles(skills, gate)
        out: dict[Problem, None] = {}
        for ref in skills:
            out.update(dict.fromkeys(self.skill_problems(ref)))
        return list(out)

    def _through_cycles(self, skills: Sequence[ObjectRef], gate: SkillGate | None,
                        ) -> list[ObjectRef]:
        """``skills`` and what their includes reach beyond them: flattening skips the
        edges of an include cycle, so it leaves out the rest of the cycle, and every
        skill on it is in error (docs/api.md, Semantics 8) as ``validate`` says."""
        def edges(ref: ObjectRef) -> list[ObjectRef]:
            return [t for t in self._targets(ref) if gate is None or gate.refusal(t) is None]

        return [*skills, *sorted(graph.reachable(skills, edges).difference(skills))]

    def _finish(self, subject: Subject, owner_kind: Owner, flats: Sequence[Flat],
                entries: list[Entry], skills: tuple[ObjectRef, ...], problems: list[Problem],
                warnings: list[str], pruned: list[PrunedItem],
                dropped: list[tuple[Entry, str]], *, budget: EffectivePolicy | None,
                policies: tuple[AppliedPolicy, ...] = (),
                actor: ActorResource | None = None,
                disclosure: Disclosure | None = None,
                approval: ApprovalSettings | None = None) -> Resolution:
        names = effective_names([(e.tool.name, e.qualified_name) for e in entries])
        bindings = binding_names(names)
        parents = self._tree(flats)
        paths: dict[ObjectRef, tuple[ObjectRef, ...]] = {}  # one per skill, shared by its tools
        tools = tuple(sorted(
            (EffectiveTool.of(name, bindings[name], entry, _path(parents, entry.skill, paths))
             for name, entry in zip(names, entries, strict=True)),
            key=lambda t: t.name))
        tokens = sum(t.tokens for t in tools)
        if budget is not None:
            problems += self._budget_problems(subject, budget, tools, tokens)
        servers = used_servers(tools, self._servers(skills), self._server_entries)
        binding = CredentialCheck()
        if actor is not None:
            binding = check_credentials(subject, actor.spec.credentials, servers,
                                        origin=actor.origin, memo=self._uses)
            problems += binding.problems
        owner = f"{subject.namespace}/{subject.name}"
        shown, unknown = disclosure_entry(disclosure, tools)
        warnings += [f"{subject}: {w}" for w in unknown]
        text, digest = toolset_text(owner_kind=owner_kind, owner=owner, tools=tools,
                                    servers=servers, disclosure=shown, approval=approval)
        if owner_kind == "actor" and not problems:
            problems += self._size_problems(subject, tools, text, digest)
        document = functools.partial(toolset_document, owner_kind=owner_kind, owner=owner,
                                     tools=tools, servers=servers, digest=digest,
                                     disclosure=shown, approval=approval)
        return Resolution(subject, tools, skills, tuple(problems), tuple(warnings),
                          tuple(pruned), digest, text, document, tuple(dropped), policies,
                          tokens, servers, binding)

    def _budget_problems(self, subject: Subject, policy: EffectivePolicy,
                         tools: Sequence[EffectiveTool], tokens: int) -> list[Problem]:
        """``TooManyTools`` and ``TooManyToolTokens``: the set over its budgets."""
        out = []
        if policy.max_tools is not None and len(tools) > policy.max_tools.value:
            out.append(self._budget_problem(
                subject, "maxTools", P.TOO_MANY_TOOLS, policy.max_tools,
                f"{count(len(tools), 'tool')} exceed the budget of {policy.max_tools.value}"))
        if policy.max_tool_tokens is not None and tokens > policy.max_tool_tokens.value:
            largest = ", ".join(f"{t.binding_name} ({t.tokens})"
                                for t in largest_tools(tools, TOKEN_CONTRIBUTORS))
            out.append(self._budget_problem(
                subject, "maxToolTokens", P.TOO_MANY_TOOL_TOKENS, policy.max_tool_tokens,
                f"the tools cost {tokens} tokens ({ENCODING}), over the budget of"
                f" {policy.max_tool_tokens.value}", f"; the largest: {largest}"))
        return out

    def _budget_problem(self, subject: Subject, rule: str, reason: str, budget: Ceiling,
                        message: str, detail: str = "") -> Problem:
        """A budget exceeded, on the Actor's field or naming the policy whose
        ceiling is the budget."""
        if budget.policy is None:
            return Problem(subject, f"spec.skillAccessPolicy.{rule}", reason, message + detail,
                           self._origin(subject))
        # The field is the Actor's: its skills bring the tools a policy's ceiling caps.
        return Problem(subject, "spec.skills", reason,
                       f"{message} set by {budget.policy} ({rule}){detail}", self._origin(subject))

    def _size_problems(self, subject: Subject, tools: Sequence[EffectiveTool],
                       text: str, digest: str) -> list[Problem]:
        """``TooLarge`` when the actor's set cannot be stored, even packed into
        the most ConfigMaps an Actor has (see toolset)."""
        actor = self.catalog.actors.get(ObjectRef(subject.namespace, subject.name))
        name = (configmap_name(actor) if actor is not None
                else default_configmap_name(subject.name))
        problem = configmap_layout(name, text, digest, tools).problem
        if problem is None:
            return []
        return [Problem(subject, "spec.skills", P.TOO_LARGE, problem, self._origin(subject))]

    def _origin(self, subject: Subject) -> str | None:
        ref = ObjectRef(subject.namespace, subject.name)
        obj = (self.catalog.actors if subject.kind == "Actor" else self.catalog.skills).get(ref)
        return None if obj is None else obj.origin

    def _servers(self, skills: Iterable[ObjectRef]) -> list[tuple[ObjectRef, McpServer]]:
        out = []
        for ref in skills:
            view = self.view(ref)
            if view is not None:
                out += [(ref, server) for server in view.servers]
        return out

    @staticmethod
    def _tree(flats: Sequence[Flat]) -> dict[ObjectRef, ObjectRef | None]:
        """First-visit parents of a pre-order walk: each skill's first path. The
        flattened sets hold exactly the include edges followed (pruned ones left
        out), so the walk needs no policy."""
        parents: dict[ObjectRef, ObjectRef | None] = {}
        for root in flats:
            if root.skill in parents:
                continue
            parents[root.skill] = None
            stack = [iter(root.children)]
            nodes = [root.skill]
            while stack:
                child = next(stack[-1], None)
                if child is None:
                    stack.pop()
                    nodes.pop()
                    continue
                if child.skill in parents:
                    continue
                parents[child.skill] = nodes[-1]
                nodes.append(child.skill)
                stack.append(iter(child.children))
        return parents

    # -- whole catalog ------------------------------------------------------------
    def all_problems(self) -> list[Problem]:
        """Every problem of every skill and actor in the catalog."""
        out: dict[Problem, None] = {}
        self.explore(sorted(self.catalog.skills))
        for ref in sorted(self.catalog.skills):
            out.update(dict.fromkeys(self.skill_problems(ref)))
        for ref in sorted(self.catalog.actors):
            resolution = self.resolve_actor(ref)
            if resolution is not None:
                out.update(dict.fromkeys(resolution.problems))
        return list(out)

    def all_warnings(self) -> list[str]:
        """Every skill's own warnings (each once, not once per includer or actor)."""
        out: dict[str, None] = {}
        for ref in sorted(self.catalog.skills):
            view = self.view(ref)
            if view is not None:
                out.update(dict.fromkeys(view.warnings))
        return list(out)


#: How many of the costliest tools a token budget problem names.
TOKEN_CONTRIBUTORS = 5


def largest_tools(tools: Sequence[EffectiveTool], count: int) -> list[EffectiveTool]:
    """The ``count`` tools that cost the most tokens, costliest first (ties by name)."""
    return heapq.nsmallest(count, tools, key=lambda t: (-t.tokens, t.name))


def _path(parents: dict[ObjectRef, ObjectRef | None], skill: ObjectRef,
          memo: dict[ObjectRef, tuple[ObjectRef, ...]]) -> tuple[ObjectRef, ...]:
    found = memo.get(skill)
    if found is None:
        path = [skill]
        while (parent := parents.get(path[-1])) is not None:
            path.append(parent)
        found = memo[skill] = tuple(reversed(path))
    return found
