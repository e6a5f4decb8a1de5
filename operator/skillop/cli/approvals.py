"""``skillop approvals | approve NAME | deny NAME --reason`` (also ``kubectl skillop ...``).

A person lists the ToolCallApprovals waiting in a namespace and decides one; the
decision is a write of the request's status subresource, which the API server
lets only holders of the approver role make, and the operator's webhook records
who made it (docs/gateway.md, Approvals). The cluster calls are in
``cli.cluster``; this module parses the answer into what a person reads.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from skillop.cli.safetext import shown

if TYPE_CHECKING:
    from datetime import datetime

_MAX_VALUE = 24


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("-n", "--namespace", default=None,
                        help="the namespace (default: the kube-context's)")
    target.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: KUBECONFIG)")
    target.add_argument("--context", default=None,
                        help="the kubeconfig context (default: the current one)")
    p = sub.add_parser("approvals", parents=[target], help="list tool calls waiting for approval")
    p.add_argument("-A", "--all-namespaces", action="store_true",
                   help="in every namespace")
    p = sub.add_parser("approve", parents=[target], help="approve one tool call (its request)")
    p.add_argument("name", metavar="NAME", help="the ToolCallApproval")
    p.add_argument("--reason", default=None, help="why (kept in the request's status)")
    p = sub.add_parser("deny", parents=[target], help="deny one tool call (its request)")
    p.add_argument("name", metavar="NAME", help="the ToolCallApproval")
    p.add_argument("--reason", required=True, help="why (the agent is told)")


def approvals_command(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from skillop.cli.cluster import (
        ClusterError,
        ClusterUnavailable,
        decide_approval,
        list_approvals,
    )

    try:
        if args.command == "approvals":
            items = list_approvals(namespace=args.namespace, all_namespaces=args.all_namespaces,
                                   kubeconfig=args.kubeconfig, context=args.context)
            sys.stdout.write(approvals_table(items, all_namespaces=args.all_namespaces,
                                             now=datetime.now(UTC)))
            return 0
        state = "Approved" if args.command == "approve" else "Denied"
        kept = decide_approval(args.name, state=state, reason=args.reason,
                               namespace=args.namespace, kubeconfig=args.kubeconfig,
                               context=args.context)
    except ClusterError as err:
        print(shown(f"skillop {args.command}: {err}"), file=sys.stderr)
        from skillop.operator.apiserver import EXIT_UNREACHABLE

        return EXIT_UNREACHABLE if isinstance(err, ClusterUnavailable) else 1
    meta, status = kept.get("metadata") or {}, kept.get("status") or {}
    print(shown(f"toolcallapproval {meta.get('namespace')}/{meta.get('name')} {state.lower()}"
                f" (decided by {status.get('decidedBy') or 'unknown'})"))
    return 0


def approvals_table(items: list[dict[str, Any]], *, all_namespaces: bool,
                    now: datetime) -> str:
    """The requests as a table, oldest first: what a person needs to decide. Every
    cell is escaped before the columns are sized: a request is anyone's who may
    create one, and a forged row must not rewrite the real ones on the terminal."""
    if not items:
        return "No approval requests.\n"
    header = [*(["NAMESPACE"] if all_namespaces else []),
              "NAME", "ACTOR", "TOOL", "STATE", "AGE", "ARGUMENTS"]
    rows = [header]
    for item in sorted(items, key=lambda i: (i.get("metadata") or {}).get("creationTimestamp", "")):
        meta, spec = item.get("metadata") or {}, item.get("spec") or {}
        state = (item.get("status") or {}).get("state") or "Pending"
        rows.append([shown(cell) for cell in (
            *([meta.get("namespace", "")] if all_namespaces else []),
            meta.get("name", ""), spec.get("actor", ""),
            (spec.get("tool") or {}).get("bindingName", ""), state,
            _age(meta.get("creationTimestamp"), now), _arguments(spec))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
                   for r in rows)


def _arguments(spec: dict[str, Any]) -> str:
    """Every key, each value cut short (``kubectl get tca NAME -o yaml`` shows them whole)."""
    return ", ".join(f"{shown(a.get('name'))}={_cut(shown(a.get('value')))}"
                     for a in spec.get("arguments") or [] if isinstance(a, dict))


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE - 3] + "..."


def _age(created: object, now: datetime) -> str:
    from skillop.operator.approvals import parse_time

    at = parse_time(created)
    if at is None:
        return "?"
    seconds = max(0, int((now - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
