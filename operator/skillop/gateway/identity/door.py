"""The gateway's door: the set's ``callers`` in force, and each request's caller.

The Gateway holds one ``Door``. A reload hands it the set's ``callers``: the
same as before keeps the keys and the verified tokens; another (a new issuer,
audience, header...) starts afresh, every cache dropped, so a token verified
for the old settings is checked again under the new ones. A set without
``callers`` makes every request anonymous, as before callers existed.

``REQUEST_CALLER`` carries the caller the HTTP front verified to the front's
answers in the same task (the fast path); the SDK's handlers run in the
session's tasks and ask the door again with the request's headers (a lookup:
the token was verified a moment before).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from pathlib import Path

from skillop.gateway.identity.callers import Callers, Refusal
from skillop.gateway.observe import NOTHING, Observer
from skillop.model.caller import ANONYMOUS, Caller
from skillop.model.callers import CallersSpec

#: The caller of the HTTP request being answered, once the front identified it.
REQUEST_CALLER: ContextVar[Caller | None] = ContextVar("request_caller", default=None)


class Door:
    """Who may come in, under the set's ``callers`` (None: anyone, as anonymous)."""

    def __init__(self, *, observer: Observer = NOTHING, ca_file: Path | None = None) -> None:
        """``ca_file``: trusted for the issuer's keys besides the system's CAs."""
        self._observer = observer
        self._ca_file = ca_file
        self.callers: Callers | None = None
        self._watchers: list[Callable[[], None]] = []

    def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed`` now and whenever the settings change (``update``)."""
        self._watchers.append(changed)
        changed()

    @property
    def spec(self) -> CallersSpec | None:
        return self.callers.spec if self.callers is not None else None

    def update(self, spec: CallersSpec | None) -> bool:
        """Use ``spec`` from now on; True when it differs (the caches were dropped)."""
        if spec == self.spec:
            return False
        self.callers = Callers(spec, ca_file=self._ca_file) if spec is not None else None
        for changed in self._watchers:
            changed()
        return True

    async def identify(self, headers: Mapping[str, str] | None) -> Caller | Refusal:
        """The caller ``headers`` name (None: no headers, stdio), or why not;
        a refusal is counted by its kind."""
        callers = self.callers
        if callers is None:
            return ANONYMOUS
        found = await callers.identify(headers)
        if isinstance(found, Refusal):
            kind = found.kind
            self._observer.count(lambda m: m.caller_refused(kind))
        return found
