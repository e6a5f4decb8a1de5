"""``skillop operator``: kopf with the project's settings."""

from __future__ import annotations

import asyncio
import logging
import sys

from skillop.operator.settings import OperatorConfig, SettingsError


def run() -> int:
    try:
        # Read once, here, and passed down (the handlers get it in kopf's memo): a
        # value that does not parse stops the operator with one line, not a traceback.
        config = OperatorConfig.from_env()
    except SettingsError as err:
        print(f"skillop operator: {err}", file=sys.stderr)
        return 2
    from skillop.operator.apiserver import EXIT_UNREACHABLE, Unreachable, reach

    try:
        # Once, before kopf: kopf's login retries every minute for ever, each time with
        # a traceback. At start-up nothing is running yet, so an unusable cluster is
        # said in one line and the process exits (the Deployment restarts it with
        # back-off); once connected, kopf's own reconnects take over.
        target = reach()
    except Unreachable as err:
        print(f"skillop operator: cannot reach the cluster: {err}", file=sys.stderr)
        return EXIT_UNREACHABLE

    import kopf

    from skillop.operator import handlers  # registers the handlers

    handlers.register_webhook(config)

    logging.basicConfig(level=config.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kopf logs every handler run at INFO; skillop's own batch lines say what matters.
    logging.getLogger("kopf.objects").setLevel(max(logging.WARNING, logging.root.level))
    logging.getLogger("skillop").info("API server: %s", target)
    # standalone: no kopf peering; the Lease decides who writes (leader.py). The
    # health port (liveness and /metrics) is skillop's own server (health.py).
    asyncio.run(kopf.operator(
        clusterwide=not config.namespaces,
        namespaces=list(config.namespaces),
        standalone=True,
        memo=kopf.Memo(config=config),
    ))
    return 0
