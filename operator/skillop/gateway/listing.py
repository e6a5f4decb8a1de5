"""The set's listing as the gateway answers it: in pages over an event stream, and
shaped for each protocol revision on the front's fast path.

Over HTTP the handshake era's answers go through the SDK's server as an event
stream; the SDK's client refuses an event over 1 MiB, and a large set's listing
is several, so it is sent in pages (``LISTING_PAGE_BYTES``) named by opaque
cursors bound to the set they were given for. A JSON answer (the front's, the
2026-07-28 era's) is whole.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import SERVER_RESULTS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from skillop.gateway.served import ServedSet
from skillop.model.caller import ANONYMOUS, Caller

#: The most JSON a page of a listing sent as an event stream holds: well under the
#: 1 MiB the MCP SDK's client accepts in one event (``DEFAULT_MAX_SSE_EVENT_SIZE``).
LISTING_PAGE_BYTES: Final = 512 * 1024


def cursor_of(set_hash: str, page: int) -> str:
    """An opaque cursor: the page, in the set it was given for."""
    return f"{set_hash.removeprefix('sha256:')[:16]}.{page}"


def page_of(cursor: str | None, set_hash: str, starts: Sequence[int]) -> int | None:
    """The page ``cursor`` names in this set (0 without one); None when it names
    none of them (another set's, or not one of ours)."""
    if cursor is None:
        return 0
    prefix, _, page = cursor.partition(".")
    if prefix != set_hash.removeprefix("sha256:")[:16] or not (
            page.isascii() and page.isdigit() and len(page) <= 6):
        return None
    index = int(page)
    return index if 0 < index < len(starts) and page == str(index) else None


class View:
    """One caller's view of a set (all callers matching the same rules share it):
    its listing, and the work done once for it (page starts, JSON per revision)."""

    __slots__ = ("json", "listing", "starts")

    def __init__(self, listing: tuple[types.Tool, ...]) -> None:
        self.listing = listing
        self.starts: tuple[int, ...] | None = None
        self.json: dict[str, bytes] = {}


#: How many views of a set (sets of matched caller rules) a gateway keeps.
MAX_VIEWS: Final = 256


class Listings:
    """A set's listing, the work done once per set and caller view: where each page
    starts, and the fast path's JSON per protocol revision. A caller sees only the
    tools their rules let them call (``caller_policy``)."""

    def __init__(self, server_info: dict[str, Any]) -> None:
        #: The server's identity as 2026-07-28 answers carry it (``shaped``).
        self._server_info = server_info
        self._served: ServedSet | None = None
        self._views: OrderedDict[frozenset[int], View] = OrderedDict()
        #: Told each time a client is given a listing (the gateway warms its upstreams
        #: from the first on).
        self.listed: Callable[[], None] = _nothing

    def view(self, served: ServedSet, caller: Caller = ANONYMOUS) -> View:
        """``caller``'s view of ``served``, made once per set of rules they match."""
        if self._served is not served:
            self._served, self._views = served, OrderedDict()
        rules = served.caller_rules
        matched = rules.matched(caller) if rules.rules else frozenset()
        found = self._views.get(matched)
        if found is None:
            hidden = rules.hidden(matched, tuple(served.tools)) if rules.rules else frozenset()
            found = self._views[matched] = View(
                tuple(t for t in served.listing if t.name not in hidden) if hidden
                else served.listing)
            if len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(matched)
        return found

    def listing(self, served: ServedSet, *, caller: Caller = ANONYMOUS,
                ) -> tuple[types.Tool, ...]:
        """The tools ``caller`` is listed."""
        return self.view(served, caller).listing

    def page(self, served: ServedSet, cursor: str | None, *,
             streamed: bool, caller: Caller = ANONYMOUS) -> types.ListToolsResult:
        """The page ``cursor`` names (the first without one); ``streamed``: the answer
        goes as an event stream (paged), else it is whole unless a cursor is given."""
        self.listed()
        view = self.view(served, caller)
        listing = view.listing
        if not streamed and cursor is None:
            return types.ListToolsResult(tools=list(listing))
        starts = _page_starts(view) if streamed else (0,)
        page = page_of(cursor, served.hash, starts)
        if page is None:
            raise MCPError(types.INVALID_PARAMS,
                           "Invalid cursor: not one of this tool set's pages (the set may have"
                           " changed: list again from the start)")
        end = starts[page + 1] if page + 1 < len(starts) else len(listing)
        return types.ListToolsResult(
            tools=list(listing[starts[page]:end]),
            next_cursor=cursor_of(served.hash, page + 1) if page + 1 < len(starts) else None)

    def json(self, served: ServedSet, version: str, *, caller: Caller = ANONYMOUS) -> bytes:
        """The whole listing's ``result`` for ``caller``, shaped for ``version`` (once
        per set, view and version)."""
        self.listed()
        view = self.view(served, caller)
        found = view.json.get(version)
        if found is None:
            listing = types.ListToolsResult(tools=list(view.listing))
            found = view.json[version] = self.shaped("tools/list", version, listing)
        return found

    def shaped(self, method: str, version: str, result: types.Result) -> bytes:
        """``result`` as the SDK's server puts it on the wire for ``version``: a
        2026-07-28 result also says it is complete and names the server, as the SDK's
        runner stamps it; then validated by the revision's own surface model and only
        the fields that revision defines written, as the SDK's serializer does
        (``serialize_server_result``), straight to JSON (its model writes it)."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if version in MODERN_PROTOCOL_VERSIONS:
            dumped.setdefault("resultType", "complete")
            meta = dumped.get("_meta")
            dumped["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                               SERVER_INFO_META_KEY: self._server_info}
        surface = _surface(method, version)
        return surface.dump_json(surface.validate_python(dumped, by_name=False), by_alias=True,
                                 exclude_none=True)


def _nothing() -> None:
    pass


@cache
def _surface(method: str, version: str) -> TypeAdapter[Any]:
    """The SDK's model of ``method``'s result in ``version`` (its serializer's)."""
    surface: Any = SERVER_RESULTS[(method, version)]  # a model or a union of models
    return TypeAdapter(surface)


def _page_starts(view: View) -> tuple[int, ...]:
    """Where each page of the listing starts: as many tools as fit in
    ``LISTING_PAGE_BYTES`` of JSON (at least one), found once per view."""
    if view.starts is None:
        starts, size = [0], 0
        for i, tool in enumerate(view.listing):
            length = len(tool.model_dump_json(by_alias=True, exclude_none=True))
            if size and size + length > LISTING_PAGE_BYTES:
                starts.append(i)
                size = 0
            size += length
        view.starts = tuple(starts)
    return view.starts
