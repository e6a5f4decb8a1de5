"""``skillop operator``: kopf with the project's settings."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable
from typing import TypeVarTuple

from skillop.operator.settings import OperatorConfig, SettingsError

log = logging.getLogger("skillop")
Ts = TypeVarTuple("Ts")


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
    # What is imported lives as long as the process: out of the collector's sight,
    # each full collection (they grow with the objects of a large listing) walks
    # only what the operator has made since.
    gc.freeze()

    logging.basicConfig(level=config.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kopf logs every handler run at INFO; skillop's own batch lines say what matters.
    logging.getLogger("kopf.objects").setLevel(max(logging.WARNING, logging.root.level))
    log.info("API server: %s", target)
    # standalone: no kopf peering; the Lease decides who writes (leader.py). The
    # health port (liveness and /metrics) is skillop's own server (health.py).
    with asyncio.Runner(loop_factory=StopOnceLoop) as runner:
        runner.run(kopf.operator(
            clusterwide=not config.namespaces,
            namespaces=list(config.namespaces),
            standalone=True,
            memo=handlers.SharedMemo(config=config),
        ))
    return 0


class StopOnceLoop(asyncio.SelectorEventLoop):
    """The event loop, with stop signals answered once.

    kopf sets a future's result on SIGINT and SIGTERM; a second signal while it
    stops (a supervisor that repeats SIGTERM, Ctrl-C twice) set it again, and
    asyncio printed that ``InvalidStateError`` with a traceback. A repeated stop
    signal is now only logged: the operator is already stopping.
    """

    def __init__(self) -> None:
        super().__init__()
        #: The stop signals received: SIGINT after SIGTERM is a repeat too.
        self.stop_signals: list[int] = []

    def add_signal_handler(self, sig: int, callback: Callable[[*Ts], object],
                           *args: *Ts) -> None:
        if sig not in (signal.SIGINT, signal.SIGTERM):
            super().add_signal_handler(sig, callback, *args)
            return

        def once(*call_args: *Ts) -> None:
            if self.stop_signals:
                log.info("signal %s again: already stopping", signal.Signals(sig).name)
                return
            self.stop_signals.append(sig)
            callback(*call_args)

        super().add_signal_handler(sig, once, *args)

    def remove_signal_handler(self, sig: int) -> bool:
        removed = super().remove_signal_handler(sig)
        if self.stop_signals and sig in (signal.SIGINT, signal.SIGTERM):
            # Stopping already: a repeat between the loop's close and the exit
            # would otherwise kill the process (status -15) after a clean stop.
            signal.signal(sig, signal.SIG_IGN)
        return removed
