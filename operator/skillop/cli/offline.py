"""The offline commands: ``validate``, ``tools``, ``flatten``, ``tree``, ``explain``.

Each reads manifests (``-f``, and with ``--cluster`` the current kube-context)
and runs the same resolver as the operator. Apart from ``cli.main`` so that
parsing the command line, ``--help`` and the other commands load neither
pydantic nor the models and resolver these need.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from skillop.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from skillop.cli.load import Loaded, load_paths, print_warnings
from skillop.cli.safetext import shown, shown_lines
from skillop.model.manifest import DEFAULT_NAMESPACE, Resource
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.problems import Problem
from skillop.model.wording import count
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolution, Resolver


def offline_command(args: argparse.Namespace, *, ca: tuple[str, ...]) -> int:
    """Run ``args.command`` on the manifests; ``ca``: the ``--ca-file`` bundle, read."""
    args.ca_bundles = ca  # for --discover, wherever the servers a command reaches are listed
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    handler = {"validate": _validate, "tools": _tools, "flatten": _flatten, "tree": _tree,
               "explain": _explain}[args.command]
    try:
        return int(handler(args, loaded))
    except BrokenPipeError:
        return EXIT_OK


def _load(args: argparse.Namespace) -> Loaded | int:
    # docs/api.md: manifests without metadata.namespace are in default, whatever -n says
    # (-n is the namespace of ACTOR and SKILL arguments).
    loaded = load_paths(args.filename)
    if args.cluster:
        from skillop.cli.cluster import ClusterUnavailable, load_cluster
        from skillop.operator.apiserver import EXIT_UNREACHABLE

        try:
            context_namespace = load_cluster(loaded, kubeconfig=args.kubeconfig,
                                             context=args.context)
        except ClusterUnavailable as err:  # an outage, not the input's problem
            print(shown(f"skillop: {err}"), file=sys.stderr)
            return EXIT_UNREACHABLE
        if args.namespace is None:  # as kubectl: -n, else the context's namespace
            args.namespace = context_namespace
    if args.namespace is None:
        args.namespace = DEFAULT_NAMESPACE
    print_warnings(loaded)
    return loaded


def _report(problems: Sequence[Problem]) -> int:
    for problem in sorted(dict.fromkeys(problems), key=_problem_order):
        print(shown(problem.line()), file=sys.stderr)
    return EXIT_PROBLEMS if problems else EXIT_OK


def _problem_order(p: Problem) -> tuple[str, str, str, str, str]:
    return (p.origin or "", p.subject.kind, p.subject.namespace, p.subject.name, p.field)


def _validate(args: argparse.Namespace, loaded: Loaded) -> int:
    catalog = _catalog(args, loaded)
    resolver = Resolver(catalog)
    problems = loaded.problems + resolver.all_problems()
    if problems:
        return _report(problems)
    for warning in resolver.all_warnings():
        print(shown(f"warning: {warning}"), file=sys.stderr)
    policies = f", {count(len(catalog.policies), 'policy', 'policies')}" if catalog.policies else ""
    print(f"valid: {count(len(catalog.tools), 'tool')}, {count(len(catalog.skills), 'skill')},"
          f" {count(len(catalog.actors), 'actor')}{policies}")
    return EXIT_OK


def _ref(text: str, args: argparse.Namespace) -> ObjectRef | None:
    try:
        return parse_ref(text, namespace=args.namespace)
    except RefError as err:
        print(shown(f"skillop: error: {err}"), file=sys.stderr)
        return None


def _catalog(args: argparse.Namespace, loaded: Loaded,
             subject: tuple[str, ObjectRef] | None = None) -> Catalog:
    """The catalog of the input; with ``--discover``, live tool lists of the servers
    ``subject`` (kind, ref) reaches, or of every server when there is no subject."""
    catalog = Catalog.of(loaded.objects)
    for problem in loaded.problems:
        about = problem.subject
        if (about.kind, about.namespace, about.name) in loaded.invalid:
            ref = ObjectRef(about.namespace, about.name)
            catalog.invalid.setdefault((about.kind, ref), problem.short())
    if getattr(args, "discover", False):
        from skillop.cli.discover import discover_into

        skills = None if subject is None else _reached(catalog, *subject)
        for warning in discover_into(catalog, allow=args.allow, timeout=args.timeout,
                                     skills=skills, ca=args.ca_bundles):
            print(shown(f"warning: {warning}"), file=sys.stderr)
    return catalog


def _reached(catalog: Catalog, kind: str, ref: ObjectRef) -> tuple[ObjectRef, ...]:
    """The skills ``ref`` reaches and its policy admits, resolved with declared tools:
    what reaches an Actor does not depend on which tools servers list."""
    resolver = Resolver(catalog)
    resolution = resolver.resolve_actor(ref) if kind == "Actor" else resolver.resolve_skill(ref)
    return resolution.skills if resolution is not None else ()


def _resolve(args: argparse.Namespace, loaded: Loaded, kind: str, name: str,
             ) -> tuple[Resolver, Resolution] | int:
    ref = _ref(name, args)
    if ref is None:
        return EXIT_USAGE
    resolver = Resolver(_catalog(args, loaded, (kind, ref)))
    resolution = (resolver.resolve_actor(ref) if kind == "Actor"
                  else resolver.resolve_skill(ref))
    if resolution is None:
        # The input's problems first: a file that could not be read may be why.
        _report(loaded.problems)
        if (kind, ref.namespace, ref.name) not in loaded.invalid:
            print(shown(_not_found(kind, ref, loaded)), file=sys.stderr)
        return EXIT_PROBLEMS
    return resolver, resolution


def _not_found(kind: str, ref: ObjectRef, loaded: Loaded) -> str:
    """The "not found" line, with the likely reason when the name is in ``default``."""
    line = f"{kind} {ref} not found in the given manifests"
    in_default = ObjectRef(DEFAULT_NAMESPACE, ref.name)
    if ref.namespace != DEFAULT_NAMESPACE and any(
            isinstance(o, Resource) and (o.kind, o.ref) == (kind, in_default)
            for o in loaded.objects):
        line += (f" ({kind} {in_default} is: manifests without metadata.namespace are in"
                 " default, whatever -n says)")
    return line


def _print_set(args: argparse.Namespace, loaded: Loaded, kind: str, name: str) -> int:
    result = _resolve(args, loaded, kind, name)
    if isinstance(result, int):
        return result
    resolver, resolution = result
    problems = [*loaded.problems, *resolution.problems]
    if problems:
        return _report(problems)
    _warn(resolution)
    claims = getattr(args, "claims", None)
    if claims is not None:
        from skillop.cli.callers import caller_for, seen_by

        subject = resolution.subject
        actor = resolver.catalog.actors[ObjectRef(subject.namespace, subject.name)]
        resolution = seen_by(resolution, caller_for(actor, claims))
    sys.stdout.write(_format(resolution, args.output))
    return EXIT_OK


def _format(resolution: Resolution, output: str) -> str:
    if output == "json":
        from skillop.resolve.toolset import tools_json

        return tools_json(resolution.text)
    if output == "yaml":
        import yaml

        return str(yaml.safe_dump(resolution.document, sort_keys=False, allow_unicode=True))
    from skillop.cli.render import tools_table

    return tools_table(resolution) + "\n"


def _warn(resolution: Resolution) -> None:
    for warning in resolution.warnings:
        print(shown(f"warning: {warning}"), file=sys.stderr)


def _tools(args: argparse.Namespace, loaded: Loaded) -> int:
    return _print_set(args, loaded, "Actor", args.actor)


def _flatten(args: argparse.Namespace, loaded: Loaded) -> int:
    return _print_set(args, loaded, "Skill", args.skill)


def _tree(args: argparse.Namespace, loaded: Loaded) -> int:
    ref = _ref(args.name, args)
    if ref is None:
        return EXIT_USAGE
    kind = "Actor" if any(getattr(o, "kind", None) == "Actor" and getattr(o, "ref", None) == ref
                          for o in loaded.objects) else "Skill"
    result = _resolve(args, loaded, kind, args.name)
    if isinstance(result, int):
        return result
    from skillop.cli.render import tree

    resolver, resolution = result
    roots = _roots(resolver, resolution, ref)
    print(tree(resolver, resolution, roots))
    return _report([*loaded.problems, *resolution.problems])


def _roots(resolver: Resolver, resolution: Resolution, ref: ObjectRef) -> list[ObjectRef]:
    if resolution.subject.kind == "Skill":
        return [ref]
    actor = resolver.catalog.actors[ref]
    out: list[ObjectRef] = []
    for text in actor.spec.skills:
        try:
            out.append(parse_ref(text, namespace=ref.namespace))
        except RefError:
            continue
    return list(dict.fromkeys(out))


def _explain(args: argparse.Namespace, loaded: Loaded) -> int:
    ref = _ref(args.actor, args)
    if ref is None:
        return EXIT_USAGE
    from skillop.resolve.explain import explain

    resolver = Resolver(_catalog(args, loaded, ("Actor", ref)))
    explanation = explain(resolver, ref, args.tool)
    if explanation is None:
        print(shown(_not_found("Actor", ref, loaded)), file=sys.stderr)
        return EXIT_PROBLEMS
    if explanation.unknown:
        print(shown(": ".join(explanation.lines)), file=sys.stderr)
        return EXIT_PROBLEMS
    print(shown_lines(explanation.text()))
    resolution = resolver.resolve_actor(ref)
    if args.claims is not None and resolution is not None and resolution.ok:
        from skillop.cli.callers import caller_for, decision_line

        found = resolution.tool(args.tool)
        if found is not None:
            caller = caller_for(resolver.catalog.actors[ref], args.claims)
            print(shown(decision_line(resolution, found.binding_name, caller)))
    return _report([*loaded.problems, *(resolution.problems if resolution else ())])
