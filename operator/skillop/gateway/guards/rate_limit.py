"""Every rate limit covering the call must have a token for it (``buckets``); a
refusal names the limit and says when to retry, in its text and as
``_meta["skillop.dev/retryAfterSeconds"]``."""

from __future__ import annotations

from typing import Final

from skillop.gateway.buckets import Buckets
from skillop.gateway.pipeline import CONTINUE, Call, Refuse, SyncGuard, Verdict
from skillop.gateway.served import ServedSet, ServedTool

#: The refusal's ``_meta`` key: whole seconds until the call may be tried again.
META_RETRY_AFTER: Final = "skillop.dev/retryAfterSeconds"


class RateLimitGuard(SyncGuard):
    __slots__ = ("buckets",)

    def __init__(self, buckets: Buckets) -> None:
        self.buckets = buckets

    def applies(self, served: ServedSet, tool: ServedTool | None) -> bool:
        return tool is not None and bool(served.rate_limits)

    def check(self, call: Call) -> Verdict:
        limits = call.served.rate_limits
        if not limits:
            return CONTINUE
        refused = self.buckets.take(limits, call.caller, call.member.binding_name)
        if refused is None:
            return CONTINUE
        return Refuse(f"rate limited by {refused.limit.describe()}; retry after"
                      f" {refused.retry_after} s", meta={META_RETRY_AFTER: refused.retry_after})
