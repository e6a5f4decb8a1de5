"""``skillop inject``: actor pods with the gateway, offline (as ``istioctl kube-inject``).

For GitOps users who render manifests in CI: every document of ``-f`` is printed
back, Pods and the pod templates of workloads (Deployment, StatefulSet, ...)
labelled ``skillop.dev/actor`` injected by the very function the mutating
webhook runs (``resolve.inject``), with the Actor's credentials resolved from the
manifests given (``-f`` and ``--catalog``). The cluster's webhook then finds the
sidecar already there and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from skillop.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from skillop.cli.safetext import shown
from skillop.model.settings import flag_type, manifest_path

if TYPE_CHECKING:  # loaded by the inject command only: every skillop run builds this parser
    from skillop.resolve.inject import SidecarSettings
    from skillop.resolve.resolver import Resolver


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("inject", help="print manifests with the gateway injected into actor pods",
                       description="Print the manifests of -f with the gateway sidecar injected"
                       " into Pods and pod templates labelled skillop.dev/actor, as the"
                       " mutating webhook would (docs/gateway.md, Injection).")
    p.add_argument("-f", "--filename", action="append", default=[], metavar="PATH",
                   type=flag_type(manifest_path),
                   help="manifests to inject and print (repeatable; '-' for stdin)")
    p.add_argument("--catalog", action="append", default=[], metavar="PATH",
                   type=flag_type(manifest_path),
                   help="more manifests (Skills, Actors, Tools, policies) to resolve the"
                   " Actors' credentials with; not printed")
    p.add_argument("-n", "--namespace", default=None,
                   help="namespace of objects without one (default: default)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.add_argument("--image", help="the gateway's image (default: SKILLOP_INJECT_IMAGE or"
                   " the operator's own)")
    p.add_argument("--port", type=int, help="the gateway's port (default: SKILLOP_INJECT_PORT"
                   " or 8765)")


def inject_command(args: argparse.Namespace) -> int:
    if not args.filename:
        print("skillop: error: give manifests with -f PATH", file=sys.stderr)
        return EXIT_USAGE
    # Imported here, not for the parser every run builds: the models and the
    # resolver, and the operator's own parsing of the same variables (it loads
    # the operator package, which the other offline commands must not).
    from skillop.cli.load import Loaded, load_paths, print_warnings
    from skillop.model.manifest import DEFAULT_NAMESPACE
    from skillop.operator.settings import SettingsError
    from skillop.resolve.catalog import Catalog
    from skillop.resolve.inject import Refused
    from skillop.resolve.resolver import Resolver

    if args.namespace is None:
        args.namespace = DEFAULT_NAMESPACE

    try:
        settings = _settings(args)
    except SettingsError as err:
        print(shown(f"skillop inject: {err}"), file=sys.stderr)
        return EXIT_USAGE
    loaded = load_paths(args.filename, namespace=args.namespace,
                        into=Loaded(documents=[]))
    printed = list(loaded.documents or [])
    load_paths(args.catalog, namespace=args.namespace, into=loaded)
    print_warnings(loaded)
    unreadable = [p for p in loaded.problems if p.subject.kind == "<file>"]
    if unreadable:
        for problem in unreadable:
            print(shown(problem.line()), file=sys.stderr)
        return EXIT_PROBLEMS
    resolver = Resolver(Catalog.of(loaded.objects))
    out: list[Any] = []
    refusals: list[str] = []
    for origin, doc in printed:
        try:
            out.append(_inject_document(doc, resolver, args.namespace, settings))
        except Refused as err:
            refusals.append(f"{origin}: {_describe(doc)}: refused: {err}")
    if refusals:
        print("\n".join(map(shown, refusals)), file=sys.stderr)
        return EXIT_PROBLEMS
    sys.stdout.write(render(out, args.output))
    return EXIT_OK


def _settings(args: argparse.Namespace) -> SidecarSettings:
    from dataclasses import replace

    from skillop.operator.settings import SettingsError, sidecar_from_env

    settings = sidecar_from_env()
    if args.image:
        settings = replace(settings, image=args.image)
    if args.port is not None:
        if not 1 <= args.port <= 65535:
            raise SettingsError(f"--port {args.port} must be between 1 and 65535")
        settings = replace(settings, port=args.port)
    return settings


def _inject_document(doc: Any, resolver: Resolver, default_ns: str,
                     settings: SidecarSettings) -> Any:
    from skillop.resolve.inject import (
        actor_of,
        inject,
        pod_templates,
        target_of,
    )

    if not isinstance(doc, dict):
        return doc
    namespace = str((doc.get("metadata") or {}).get("namespace") or default_ns)
    for path in pod_templates(doc):
        pod = _at(doc, path)
        actor = actor_of(pod)
        if actor is None:
            continue
        target = target_of(resolver, namespace, actor)
        injected = inject(pod, target, namespace=namespace, settings=settings)
        _warn_unresolved(resolver, namespace, actor)
        doc = _replaced(doc, path, injected)
    return doc


def _warn_unresolved(resolver: Resolver, namespace: str, actor: str) -> None:
    from skillop.model.names import ObjectRef
    from skillop.resolve.inject import unknown_actor

    ref = ObjectRef(namespace, actor)
    missing = unknown_actor(resolver, namespace, actor)
    if missing is not None:
        print(shown(f"warning: {missing}; injected with its ConfigMap and no Secrets"
                    " (not in the given manifests)"), file=sys.stderr)
        return
    resolution = resolver.resolve_actor(ref)
    if resolution is not None and not resolution.ok:
        print(shown(f"warning: Actor {ref} does not resolve ({resolution.problems[0].short()}):"
                    " injected with its ConfigMap and no Secrets"), file=sys.stderr)


def _at(doc: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for step in path:
        doc = doc[step]
    return doc


def _replaced(doc: dict[str, Any], path: tuple[str, ...], value: dict[str, Any]) -> Any:
    if not path:
        return value
    return {**doc, path[0]: _replaced(doc[path[0]], path[1:], value)}


def _describe(doc: Any) -> str:
    if not isinstance(doc, dict):
        return "document"
    meta = doc.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{doc.get('kind')} {name}"


def render(docs: list[Any], output: str) -> str:
    """The documents as ``skillop inject`` prints them (one, or a List in JSON)."""
    import yaml

    if output == "json":
        value = docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List",
                                                 "items": docs}
        return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    return "---\n".join(yaml.safe_dump(d, sort_keys=False, allow_unicode=True) for d in docs)
