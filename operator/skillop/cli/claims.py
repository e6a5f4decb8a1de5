"""``--claims JSON|@FILE``: the claims of a caller's token, for ``explain`` and
``tools`` to answer for that caller (docs/api.md, CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: A claims file larger than this is no token's claims.
MAX_CLAIMS_BYTES = 1024 * 1024


def parse_claims(name: str, raw: str) -> dict[str, Any]:
    """The claims ``raw`` gives: a JSON object, inline or in the file ``@path``;
    raises ``ValueError`` with one line saying why not."""
    text, where = raw, "the value"
    if raw.startswith("@"):
        where = raw[1:]
        try:
            with Path(where).open("rb") as file:
                data = file.read(MAX_CLAIMS_BYTES + 1)
        except OSError as err:
            raise ValueError(f"{where}: cannot be read ({err.strerror or err})") from None
        if len(data) > MAX_CLAIMS_BYTES:
            raise ValueError(f"{where}: larger than {MAX_CLAIMS_BYTES} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: not UTF-8 text") from None
    try:
        claims = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        reason = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deeply"
        raise ValueError(f"{where} is not JSON ({reason})") from None
    if not isinstance(claims, dict):
        raise ValueError(f"{where} is not a JSON object of claims, e.g."
                         ' \'{"sub": "alice", "groups": ["sre"]}\'')
    return claims
