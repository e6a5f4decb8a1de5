"""The ``skillop`` command (also ``kubectl-skillop``).

Offline commands read manifests and run the same resolver as the operator; they
import neither kopf nor the Kubernetes client, so they start fast in CI hooks.
Exit codes: 0 success, 1 the input has problems (one line each on stderr),
2 usage errors, 3 the cluster could not be read (``--cluster``: one line).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from skillop import __version__
from skillop.cli.approvals import add_parsers as approvals_parsers
from skillop.cli.claims import parse_claims
from skillop.cli.exits import EXIT_USAGE
from skillop.cli.inject import add_parser as inject_parser
from skillop.cli.safetext import shown
from skillop.gateway.command import add_parser as gateway_parser
from skillop.model.settings import (
    DEFAULT_EGRESS_PATTERNS,
    flag_type,
    host_pattern,
    manifest_path,
    seconds,
)

# Parsing the command line loads only the parsers' modules: each command imports
# what it runs in ``main`` (pydantic, the models and the resolver for the offline
# ones; bench/startup.py, tests/cli/test_cli_startup.py).
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
    claims = _Parser(add_help=False)
    claims.add_argument("--claims", type=flag_type(parse_claims), metavar="JSON|@FILE",
                        help="answer for the caller these token claims name (a JSON"
                             " object, or @file holding one)")
    p = sub.add_parser("tools", parents=[common, output, claims],
                       help="an actor's effective tool set")
    p.add_argument("actor")
    p = sub.add_parser("flatten", parents=[common, output], help="a skill's flattened tool set")
    p.add_argument("skill")
    p = sub.add_parser("tree", parents=[common], help="the include hierarchy")
    p.add_argument("name", metavar="ACTOR|SKILL")
    p = sub.add_parser("explain", parents=[common, claims],
                       help="why an actor has or lacks a tool")
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
        from skillop.gateway.command import gateway_command

        return gateway_command(args)
    if args.command == "inject":
        from skillop.cli.inject import inject_command

        return inject_command(args)
    if args.command in ("approvals", "approve", "deny"):
        from skillop.cli.approvals import approvals_command

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
    ca = _ca_bundles(args)
    if ca is None:
        return EXIT_USAGE
    return _offline_command()(args, ca=ca)


def _offline_command() -> Callable[..., int]:
    """The offline commands' entry; imported the first time with the cyclic collector
    paused, and what the import made frozen out of its reach (``gc.freeze``), with
    pydantic's plugins off unless ``PYDANTIC_DISABLE_PLUGINS`` is set.

    The import creates every model and resolver class (pydantic, dataclasses), which
    live as long as the process; with the collector on, each collection during the
    import and the run walks them again: about 6% of a ``validate``'s CPU, 15-25 ms
    (docs/benchmarks.md). The collector runs as before for what the command creates.
    """
    # Pydantic's plugins instrument validation for an application's telemetry; a
    # command that reads manifests and exits has none, and the entry-point scan over
    # every installed distribution is about 2.4% of a ``validate``. Setting the
    # variable (even empty) keeps them on.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if "skillop.cli.offline" not in sys.modules:
        enabled = gc.isenabled()
        gc.disable()
        try:
            import skillop.cli.offline  # noqa: F401  (its classes, made uncollected)
        finally:
            gc.freeze()
            if enabled:
                gc.enable()
    from skillop.cli.offline import offline_command

    return offline_command


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
