"""A forward's ``timeoutSeconds`` bound (``guards.forward.Bound``): its own cancellation is a
timeout, anyone else's stays a cancellation, whichever came first."""

from __future__ import annotations

import asyncio

from skillop.gateway.guards.forward import Bound


async def _bounded(seconds: float, *, cancel_after: float | None = None) -> str:
    """What a bounded wait of 10 s ends as: ``timed out``, ``cancelled`` or ``done``,
    with the task cancelled from outside after ``cancel_after`` seconds if given."""

    async def wait() -> str:
        bound = Bound(seconds)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            if bound.expired_alone():
                return "timed out"
            raise
        finally:
            bound.disarm()
        return "done"

    task = asyncio.create_task(wait())
    if cancel_after is not None:
        asyncio.get_running_loop().call_later(cancel_after, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


def test_the_bound_expiring_is_a_timeout() -> None:
    assert asyncio.run(_bounded(0.05)) == "timed out"


def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    assert asyncio.run(_bounded(5, cancel_after=0.05)) == "cancelled"


def test_a_cancellation_from_outside_wins_over_a_timer_that_fired_too() -> None:
    """The outside cancellation due just before the timer, both within a loop turn or
    two, whichever the task sees first: the call was cancelled, not timed out."""
    assert asyncio.run(_bounded(0.05, cancel_after=0.05)) == "cancelled"


def test_a_timer_that_fired_first_is_a_timeout() -> None:
    """The timer fired and the call ended on it before the outside cancellation came."""
    assert asyncio.run(_bounded(0.05, cancel_after=0.5)) == "timed out"


def test_a_bound_disarmed_in_time_never_cancels() -> None:
    async def quick() -> bool:
        bound = Bound(0.01)
        bound.disarm()
        await asyncio.sleep(0.05)  # past the bound: not cancelled
        return True

    assert asyncio.run(quick())
