"""The guards of a tool call, one module each, in the order a call meets them.

``call_path`` is that order (``pipeline.Pipeline`` runs it): the tool must be
the set's (``membership``); the caller's rules must allow it (``caller_rules``,
which may also ask for approval) and every rate limit covering it have a token
(``rate_limit``); an upstream tool's live definition must be the one
the set was resolved from (``definition_pin``); a ``requiresApproval`` call must
be approved (``approval_gate``), after which the definition is checked again (a
person may think for minutes); a server with ``tokenExchange`` gets the caller's
token exchanged for its audience (``token_exchange``); an Agent Skill is
answered its SKILL.md body (``skill_body``); an upstream tool is forwarded
within its ``timeoutSeconds`` (``forward``). A new guard is a module here and an entry below.
"""

from __future__ import annotations

from pathlib import Path

from skillop.gateway.approval_request import Requests
from skillop.gateway.buckets import Buckets
from skillop.gateway.guards.approval_gate import ApprovalGate
from skillop.gateway.guards.caller_rules import CallerRulesGuard
from skillop.gateway.guards.definition_pin import DefinitionPin
from skillop.gateway.guards.forward import Forward
from skillop.gateway.guards.membership import Membership
from skillop.gateway.guards.rate_limit import RateLimitGuard
from skillop.gateway.guards.skill_body import SkillBody
from skillop.gateway.guards.token_exchange import TokenExchange
from skillop.gateway.observe import NOTHING, Observer
from skillop.gateway.pipeline import Guard
from skillop.gateway.secrets import DEFAULT_SECRETS_DIR


def call_path(requests: Requests, *, observer: Observer = NOTHING,
              secrets_dir: Path = DEFAULT_SECRETS_DIR,
              ca_file: Path | None = None,
              buckets: Buckets | None = None) -> list[Guard]:
    """The guards of every call, in order; ``requests`` makes and follows the
    ToolCallApprovals (``spec.approval.via: Request``); ``observer`` times and
    traces the approval's wait and the forward; ``secrets_dir``: where the token
    exchange's client Secret is mounted, ``ca_file`` what its issuer is trusted by
    besides the system's CAs; ``buckets`` keeps the rate limits' tokens (a new
    store when None)."""
    exchange = TokenExchange(secrets_dir, ca_file=ca_file)
    return [
        Membership(),
        CallerRulesGuard(),
        # A call the rules refuse takes no token.
        RateLimitGuard(buckets or Buckets()),
        DefinitionPin(),
        ApprovalGate(requests, observer=observer),
        # The upstream may have changed while a human thought.
        DefinitionPin(after_approval=True),
        # After the approval's wait: a token exchanged before it might expire in it.
        exchange,
        SkillBody(),
        # Checks the exchange again for the server it calls (a reload may have
        # asked for one since the set said none).
        Forward(observer=observer, exchange=exchange),
    ]
