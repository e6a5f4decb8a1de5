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
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from skillop.model import problems as P
from skillop.model.canonical import canonical_json
from skillop.model.manifest import POLICY_KINDS, ActorResource
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.policies import ServerHost, server_host
from skillop.model.problems import Problem, Subject
from skillop.model.specs import ApprovalSettings, Disclosure, McpServer
from skillop.model.toolset import Owner, ServerEntry
from skillop.resolve import graph
from skillop.resolve.caller_rules import NO_SECTION, caller_section
from skillop.resolve.catalog import Catalog
from skillop.resolve.credentials import CredentialCheck, UsesMemo, check_credentials
from skillop.resolve.entries import Entry, Flat, merge_into
from skillop.resolve.exchange import check_token_exchange
from skillop.resolve.flatten import Flattener, first_parents, path_to
from skillop.resolve.limits import budget_problems, size_problems
from skillop.resolve.namespace_rules import AppliedPolicy, NamespaceRules
from skillop.resolve.naming import binding_names, effective_names
from skillop.resolve.policy import EffectivePolicy, MarkedEntries, effective_policy
from skillop.resolve.resolution import Once, PrunedItem, Resolution
from skillop.resolve.skillgate import Refusal, SkillGate
from skillop.resolve.skills import SkillView, skill_view
from skillop.resolve.tooljson import EffectiveTool
from skillop.resolve.toolset import disclosure_entry, toolset_document, toolset_text, used_servers

#: This module's own, and the result types callers import from here
#: (``resolve.resolution``).
__all__ = ["PrunedItem", "Resolution", "Resolver"]


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
        slot = (ns, *(_hashable(v) for v in own.model_dump(mode="json").values()))
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
        parents = first_parents(flats)
        paths: dict[ObjectRef, tuple[ObjectRef, ...]] = {}  # one per skill, shared by its tools
        tools = tuple(sorted(
            (EffectiveTool.of(name, bindings[name], entry, path_to(parents, entry.skill, paths))
             for name, entry in zip(names, entries, strict=True)),
            key=lambda t: t.name))
        if budget is not None:
            problems += budget_problems(subject, budget, tools, origin=self._origin(subject))
        servers = used_servers(tools, self._servers(skills), self._server_entries)
        binding = CredentialCheck()
        if actor is not None:
            binding = check_credentials(subject, actor.spec.credentials, servers,
                                        origin=actor.origin, memo=self._uses)
            problems += binding.problems
        owner = f"{subject.namespace}/{subject.name}"
        shown, unknown = disclosure_entry(disclosure, tools)
        warnings += [f"{subject}: {w}" for w in unknown]
        rules = NO_SECTION if actor is None else caller_section(
            actor, self.catalog.policies_for(subject.namespace), tools, flats)
        callers = actor.spec.callers if actor is not None else None
        if actor is not None:
            exchange = check_token_exchange(subject, callers, servers, origin=actor.origin)
            problems += exchange[0]
            warnings += exchange[1]
        render_set = functools.partial(toolset_text, owner_kind=owner_kind, owner=owner,
                                       servers=servers, disclosure=shown, approval=approval,
                                       callers=callers, rules=rules)
        render = Once(functools.partial(render_set, tools=tools))
        if owner_kind == "actor" and not problems:
            stored = self.catalog.actors.get(ObjectRef(subject.namespace, subject.name))
            problems += size_problems(subject, tools, render, render_set, actor=stored,
                                      origin=self._origin(subject))
        document = functools.partial(toolset_document, owner_kind=owner_kind, owner=owner,
                                     tools=tools, servers=servers,
                                     disclosure=shown, approval=approval, callers=callers,
                                     rules=rules)
        return Resolution(subject, tools, skills, tuple(problems), tuple(warnings),
                          tuple(pruned), render, lambda: document(digest=render()[1]),
                          tuple(dropped), policies, servers, binding)

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


def _hashable(value: Any) -> Hashable:
    """A JSON value as a hashable one: lists as tuples, objects as canonical JSON."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return canonical_json(value) if isinstance(value, dict) else value
