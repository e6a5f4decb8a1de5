"""``skillop gateway``: its flags and its entry point.

Kept apart from the server so that ``skillop --help`` does not import the MCP SDK.
Every flag has an environment default, for the sidecar's manifest.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from skillop.resolve.inject import CONFIGMAPS_DIR, DEFAULT_PORT, SECRETS_DIR, TOOLSET_DIR
from skillop.sources.egress import DEFAULT_EGRESS_PATTERNS

# Where the injected sidecar mounts them (resolve.inject), so its defaults hold.
DEFAULT_TOOLSET_DIR = TOOLSET_DIR
DEFAULT_SECRETS_DIR = SECRETS_DIR
DEFAULT_CONFIGMAPS_DIR = CONFIGMAPS_DIR
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("gateway", help="serve the mounted tool set over MCP, enforcing it",
                       description="Serve the Actor's mounted ToolSet over MCP: its mcp and"
                       " agent_skill tools only, forwarded to their upstream servers"
                       " (docs/gateway.md).")
    env = os.environ.get
    p.add_argument("--toolset-dir", default=env("SKILLOP_TOOLSET_DIR", DEFAULT_TOOLSET_DIR),
                   metavar="DIR", help="the mounted Actor ConfigMap (default: %(default)s)")
    p.add_argument("--secrets-dir", default=env("SKILLOP_SECRETS_DIR", DEFAULT_SECRETS_DIR),
                   metavar="DIR", help="mounted Secrets, one directory each, named after the"
                   " Secret (default: %(default)s)")
    p.add_argument("--configmaps-dir",
                   default=env("SKILLOP_CONFIGMAPS_DIR", DEFAULT_CONFIGMAPS_DIR), metavar="DIR",
                   help="mounted ConfigMaps holding servers' CA bundles (tls.caConfigMapRef),"
                   " one directory each, named after the ConfigMap (default: %(default)s)")
    p.add_argument("--ca-file", default=env("SKILLOP_MCP_CA_FILE") or None, metavar="PEM",
                   help="CA bundle trusted for every https upstream, besides the system's"
                   " (default: SKILLOP_MCP_CA_FILE, as in the operator)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--listen", default=env("SKILLOP_GATEWAY_LISTEN", DEFAULT_LISTEN),
                      metavar="HOST:PORT", help="streamable HTTP at http://HOST:PORT/mcp"
                      " (default: %(default)s; port 0 picks one)")
    mode.add_argument("--stdio", action="store_true",
                      help="serve MCP on stdin/stdout instead (audit lines go to stderr)")
    p.add_argument("--allow", action="append", default=[], metavar="HOST_GLOB",
                   help="upstream hosts that may be contacted (default: SKILLOP_MCP_ALLOW or"
                   f" {', '.join(DEFAULT_EGRESS_PATTERNS)})")
    p.add_argument("--poll", type=_positive, default=_positive(env("SKILLOP_GATEWAY_POLL", "1")),
                   metavar="SECONDS", help="how often to look for new mounts (default 1)")
    p.add_argument("--default-timeout", type=_positive,
                   default=_positive(env("SKILLOP_GATEWAY_TIMEOUT", "60")), metavar="SECONDS",
                   help="per-call limit for tools without timeoutSeconds (default 60)")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _allow(args: argparse.Namespace) -> tuple[str, ...]:
    if args.allow:
        return tuple(args.allow)
    from_env = [p.strip() for p in os.environ.get("SKILLOP_MCP_ALLOW", "").split(",")
                if p.strip()]
    return tuple(from_env) or DEFAULT_EGRESS_PATTERNS


def gateway_command(args: argparse.Namespace) -> int:
    try:
        from skillop.gateway.server import Options, parse_listen, run_gateway
    except ImportError as exc:  # the mcp extra is not installed
        print(f"skillop gateway: needs the MCP SDK (pip install 'skillop[mcp]'): {exc}",
              file=sys.stderr)
        return 2
    try:
        options = Options(toolset_dir=Path(args.toolset_dir), secrets_dir=Path(args.secrets_dir),
                          allow=_allow(args), poll_interval=args.poll,
                          default_timeout=args.default_timeout,
                          configmaps_dir=Path(args.configmaps_dir),
                          ca_file=Path(args.ca_file) if args.ca_file else None)
        if not args.stdio:
            parse_listen(args.listen)
    except ValueError as exc:
        print(f"skillop gateway: {exc}", file=sys.stderr)
        return 2
    return run_gateway(options, listen=None if args.stdio else args.listen, stdio=args.stdio)
