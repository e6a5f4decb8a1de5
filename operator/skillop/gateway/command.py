"""``skillop gateway``: its flags and its entry point.

Kept apart from the server so that ``skillop --help`` does not import the MCP SDK.
Every flag has an environment default, for the sidecar's manifest: its setting
in ``model.settings`` (docs/gateway.md's table is rendered from those).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from skillop.model import settings as env
from skillop.model.settings import Setting


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The flags; each defaults to its variable (read in ``gateway_command``, so that
    a bad value is one line there, not a traceback while building every parser)."""
    p = sub.add_parser("gateway", help="serve the mounted tool set over MCP, enforcing it",
                       description="Serve the Actor's mounted ToolSet over MCP: its mcp and"
                       " agent_skill tools only, forwarded to their upstream servers"
                       " (docs/gateway.md).")
    paths: tuple[tuple[Setting[Any], str], ...] = (
        (env.TOOLSET_DIR, "DIR"), (env.SECRETS_DIR, "DIR"), (env.CONFIGMAPS_DIR, "DIR"),
        (env.MCP_CA_FILE, "PEM"), (env.API_DIR, "DIR"), (env.SEARCH_CACHE_DIR, "DIR"))
    for path, metavar in paths:
        p.add_argument(path.flag or "", metavar=metavar, help=_help(path))
    p.add_argument(env.GATEWAY_METRICS_LISTEN.flag or "", metavar="HOST:PORT",
                   help=_help(env.GATEWAY_METRICS_LISTEN))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(env.GATEWAY_LISTEN.flag or "", metavar="HOST:PORT",
                      help=_help(env.GATEWAY_LISTEN))
    mode.add_argument("--stdio", action="store_true",
                      help="serve MCP on stdin/stdout instead (audit lines go to stderr)")
    p.add_argument(env.MCP_ALLOW.flag or "", action="append", metavar="HOST_GLOB",
                   type=env.flag_type(env.host_pattern),
                   help=_help(env.MCP_ALLOW) + "; repeat for more")
    for seconds in (env.GATEWAY_POLL, env.GATEWAY_TIMEOUT, env.GATEWAY_RELIST_INTERVAL,
                    env.GATEWAY_REQUEST_TIMEOUT):
        p.add_argument(seconds.flag or "", type=env.flag_type(env.seconds()), metavar="SECONDS",
                       help=_help(seconds))


def _help(setting: Setting[Any]) -> str:
    return (f"{setting.description.replace('`', '')} (default: {setting.env}, else"
            f" {setting.default_text.replace('`', '')})").replace("%", "%%")


def gateway_command(args: argparse.Namespace) -> int:
    from skillop.gateway.serve import collector_paused  # imports nothing it pauses for

    # The MCP SDK's modules and classes live as long as the process.
    try:
        with collector_paused():
            from skillop.gateway.options import Options
            from skillop.gateway.serve import parse_listen, run_gateway
    except ImportError as exc:  # the mcp extra is not installed
        print(f"skillop gateway: needs the MCP SDK (pip install 'skillop[mcp]'): {exc}",
              file=sys.stderr)
        return 2
    try:
        ca_file = env.MCP_CA_FILE.read() if args.ca_file is None else args.ca_file
        listen = env.GATEWAY_LISTEN.read() if args.listen is None else args.listen
        options = Options.build(
            toolset_dir=Path(args.toolset_dir or env.TOOLSET_DIR.read()),
            secrets_dir=Path(args.secrets_dir or env.SECRETS_DIR.read()),
            allow=allow_list(args.allow),
            poll_interval=env.GATEWAY_POLL.read() if args.poll is None else args.poll,
            default_timeout=(env.GATEWAY_TIMEOUT.read() if args.default_timeout is None
                             else args.default_timeout),
            relist_interval=(env.GATEWAY_RELIST_INTERVAL.read() if args.relist_interval is None
                             else args.relist_interval),
            request_timeout=(env.GATEWAY_REQUEST_TIMEOUT.read() if args.request_timeout is None
                             else args.request_timeout),
            configmaps_dir=Path(args.configmaps_dir or env.CONFIGMAPS_DIR.read()),
            ca_file=Path(ca_file) if ca_file else None,
            api_dir=Path(args.api_dir or env.API_DIR.read()),
            search_cache_dir=Path(args.search_cache_dir or env.SEARCH_CACHE_DIR.read()),
            metrics_listen=args.metrics_listen or env.GATEWAY_METRICS_LISTEN.read())
        if not args.stdio:
            parse_listen(listen)
        if options.metrics_listen:
            parse_listen(options.metrics_listen, flag="--metrics-listen")
    except ValueError as exc:  # SettingsError too: it names the variable
        print(f"skillop gateway: {exc}", file=sys.stderr)
        return 2
    return run_gateway(options, listen=None if args.stdio else listen, stdio=args.stdio)


def allow_list(flags: list[str] | None) -> tuple[str, ...]:
    """``--allow`` if given, else ``SKILLOP_MCP_ALLOW``, whose blank means the default
    allow-list, as for the operator (docs/install.md)."""
    return tuple(flags) if flags else env.MCP_ALLOW.read()
