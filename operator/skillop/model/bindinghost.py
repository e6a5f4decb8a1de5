"""Where a credential may go: the host pattern a binding names (docs/api.md, Actor
``credentials[].hosts`` and ``callers.tokenExchange.hosts``), as a field type.

Its own module, apart from ``hostpatterns``, so that reading the grammar (the
gateway's settings, egress) never loads pydantic.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

from skillop.model.hostpatterns import HostPattern


def _binding_host(text: str) -> str:
    try:
        HostPattern.parse_normal(text)
    except ValueError as err:
        raise PydanticCustomError("host_pattern", "{why}", {"why": str(err)}) from None
    return text


#: Where a Secret (or a token exchanged for a caller) may go: ``[scheme://]host[:port]``,
#: globs allowed (the egress allow-list's grammar); no path, query or userinfo.
BindingHost = Annotated[
    str, StringConstraints(min_length=1, max_length=300, pattern=r"^[^/?#@\s]+(://[^/?#@\s]+)?/?$"),
    AfterValidator(_binding_host),
]
