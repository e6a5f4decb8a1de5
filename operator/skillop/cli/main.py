"""The ``skillop`` command (also ``kubectl-skillop``).

Offline commands read manifests and run the same resolver as the operator; they
import neither kopf nor the Kubernetes client, so they start fast in CI hooks.
Exit codes: 0 success, 1 the input has problems (one line each on stderr),
2 usage errors, 3 the cluster could not be read (``--cluster``: one line).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from skillop import __version__
from skillop.cli.approvals import add_parsers as approvals_parsers
from skillop.cli.approvals import approvals_command
from skillop.cli.inject import add_parser as inject_parser
from skillop.cli.inject import inject_command
from skillop.cli.load import Loaded, load_paths, print_warnings
from skillop.cli.safetext import shown, shown_lines
from skillop.gateway.command import add_parser as gateway_parser
from skillop.gateway.command import gateway_command
from skillop.model.manifest import DEFAULT_NAMESPACE, Resource
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.problems import Problem
from skillop.model.settings import (
    DEFAULT_EGRESS_PATTERNS,
    flag_type,
    host_pattern,
    manifest_path,
    seconds,
)
from skillop.model.wording import count
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolution, Resolver

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
_DEFAULT_ALLOW = ", ".join(DEFAULT_EGRESS_PATTERNS)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("-f", "--filename", action="append", default=[], metavar="PATH",
                        type=flag_type(manifest_path),
                        help="manifest file or directory (repeatable; '-' for stdin)")
    common.add_argument("-n", "--namespace", default=None,
                        help="namespace for names without one (default: default; with"
                        " --cluster, the context's, as kubectl)")
    common.add_argument("--cluster", action="store_true",
                        help="read Tools, Skills, Actors, policies from the current kube-context"
                        " (the default as kubectl-skillop, the kubectl plugin, without -f)")
    common.add_argument("--context", default=None,
                        help="with --cluster: the kubeconfig context (default: the current one)")
    common.add_argument("--kubeconfig", default=None,
                        help="with --cluster: the kubeconfig file (default: KUBECONFIG)")
    common.add_argument("--discover", action="store_true",
                        help="list url MCP servers live (tools/list) instead of declared tools")
    common.add_argument("--allow", action="append", default=[], metavar="HOST_GLOB",
                        type=flag_type(host_pattern),
                        help=f"hosts discovery may contact (default: {_DEFAULT_ALLOW})")
    common.add_argument("--timeout", type=flag_type(seconds()), default=10.0, metavar="SECONDS",
                        help="discovery timeout per server (default 10)")
    common.add_argument("--ca-file", metavar="PATH",
                        help="PEM CA certificates to trust for https servers (private CAs)")
    output = _Parser(add_help=False)
    output.add_argument("-o", "--output", choices=("json", "yaml", "table"), default="table")
    parser = _Parser(prog="skillop", description=_plain(__doc__.splitlines()[0]))
    parser.add_argument("--version", action="version", version=f"skillop {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("validate", parents=[common], help="check manifests: schema, refs, DAG")
    p = sub.add_parser("tools", parents=[common, output], help="an actor's effective tool set")
    p.add_argument("actor")
    p = sub.add_parser("flatten", parents=[common, output], help="a skill's flattened tool set")
    p.add_argument("skill")
    p = sub.add_parser("tree", parents=[common], help="the include hierarchy")
    p.add_argument("name", metavar="ACTOR|SKILL")
    p = sub.add_parser("explain", parents=[common], help="why an actor has or lacks a tool")
    p.add_argument("actor")
    p.add_argument("tool")
    p = sub.add_parser("discover", parents=[output], help="list an MCP server's tools")
    p.add_argument("url")
    p.add_argument("--transport", choices=("streamable-http", "sse"), default="streamable-http")
    p.add_argument("--allow", action="append", default=[], metavar="HOST_GLOB",
                   type=flag_type(host_pattern),
                   help=f"hosts that may be contacted (default: {_DEFAULT_ALLOW})")
    p.add_argument("--header", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--timeout", type=flag_type(seconds()), default=10.0, metavar="SECONDS")
    p.add_argument("--ca-file", metavar="PATH",
                   help="PEM CA certificates to trust for an https server (private CAs)")
    sub.add_parser("operator", help="run the operator (kopf) with the project's settings")
    gateway_parser(sub)
    inject_parser(sub)
    approvals_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "operator":
        from skillop.operator.main import run  # kopf only when running the operator

        return run()
    if args.command == "gateway":
        return gateway_command(args)
    if args.command == "inject":
        return inject_command(args)
    if args.command in ("approvals", "approve", "deny"):
        return approvals_command(args)
    if args.command == "discover":
        from skillop.cli.discover import discover_command

        ca = _ca_bundles(args)
        if ca is None:
            return EXIT_USAGE
        return discover_command(args.url, transport=args.transport, allow=args.allow, ca=ca,
                                output=args.output, headers=args.header, timeout=args.timeout)
    if not args.filename and not args.cluster:
        if not _as_kubectl_plugin():
            return _usage("give manifests with -f PATH (or --cluster)")
        args.cluster = True  # a kubectl plugin answers about the cluster kubectl talks to
    if _ca_bundles(args) is None:
        return EXIT_USAGE
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


def _as_kubectl_plugin() -> bool:
    """Run as ``kubectl skillop`` (kubectl runs ``kubectl-skillop`` from PATH)."""
    return os.path.basename(sys.argv[0]).startswith("kubectl-skillop")


def _plain(text: str) -> str:
    """A docstring line for --help: without reStructuredText's ``literal`` and :role:`x`."""
    return re.sub(r"(?::[a-z]+:)?`+([^`]+)`+", r"\1", text)


def _ca_bundles(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The ``--ca-file`` bundle (none given: empty); None, said once, when unreadable."""
    path = getattr(args, "ca_file", None)
    if not path:
        return ()
    try:
        return (Path(path).read_text(),)
    except (OSError, UnicodeDecodeError) as err:
        _usage(f"--ca-file {path}: cannot be read ({getattr(err, 'strerror', None) or err})")
        return None


def _usage(message: str) -> int:
    print(shown(f"skillop: error: {message}"), file=sys.stderr)
    return EXIT_USAGE


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
                                     skills=skills, ca=_ca_bundles(args) or ()):
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
    _, resolution = result
    problems = [*loaded.problems, *resolution.problems]
    if problems:
        return _report(problems)
    _warn(resolution)
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
    return _report([*loaded.problems, *(resolution.problems if resolution else ())])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
