"""``skillop operator`` stops cleanly on SIGTERM (a rolling upgrade, ``kubectl delete
pod``), also when the signal comes again while it stops (a supervisor repeating
it, Ctrl-C twice): exit 0 and nothing in its log that looks like a crash."""

from __future__ import annotations

import signal

import pytest
from realkit import RealCluster, operator_process

pytestmark = pytest.mark.realapi

CRASHES = ("Traceback", "InvalidStateError", "Task exception was never retrieved",
           "was destroyed but it is pending")


@pytest.mark.parametrize("signals", [(signal.SIGTERM,),
                                     (signal.SIGTERM, signal.SIGTERM, signal.SIGINT)],
                         ids=["once", "repeated"])
def test_sigterm_stops_the_operator_without_a_traceback(
        real: RealCluster, signals: tuple[signal.Signals, ...]) -> None:
    env = {"SKILLOP_INJECTION": "true", "SKILLOP_MCP_DISCOVERY": "false"}
    with operator_process(real.plane, env=env, name="sigterm") as proc:
        for sig in signals:  # at once: the repeats come while it stops
            proc.popen.send_signal(sig)
        code = proc.popen.wait(30)
    log = proc.output()
    assert code == 0, log[-3000:]
    for crash in CRASHES:
        assert crash not in log, log[-5000:]
