"""What looks like a credential in a Skill: URL userinfo, query parameters, env names.

Everything a Skill says about its MCP servers is copied into Actor ConfigMaps
(``tools.json``) that the pods of every namespace reaching the skill can read,
and into status. Credentials belong in Secrets (``headersFrom``,
``env[].valueFrom.secretKeyRef``). A URL with userinfo (``user:pass@``) is
refused outright; names that merely *look* like credentials (a query parameter
``token``, an env var ``API_KEY`` with a literal value) get warnings, since a
name alone cannot prove anything.

The name rule (docs/security.md): split the name into word parts at every
character that is not a letter or digit and where a lowercase letter is
followed by an uppercase one (``X-Amz-Signature`` -> x, amz, signature;
``apiKey`` -> api, key); compare case-insensitively. The name looks like a
credential when a part begins or ends with one of ``CREDENTIAL_WORDS``: so
``access_token``, ``apikey``, ``client_secret``, ``Authorization``, ``oauth``,
``sig``, ``X-Amz-Signature``, ``DB_PASSWORD``, ``passwd`` and ``GITHUB_TOKEN``
do, and ``page``, ``limit``, ``PATH`` or ``HOME`` do not. Beginning or ending,
not merely containing, keeps names like ``design`` quiet while catching the
glued spellings (``accesstoken``, ``xapikey``) real services use.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

#: Word-part prefixes and suffixes that mark a credential-like name.
CREDENTIAL_WORDS = ("token", "key", "secret", "pass", "pwd", "auth", "sig", "credential",
                    "jwt", "bearer")

#: A URL whose authority (between ``scheme://`` and the first ``/``, ``?`` or
#: ``#``) holds an ``@``: userinfo. The same expression is the CRD's CEL rule.
USERINFO_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@"
_USERINFO_RE = re.compile(USERINFO_PATTERN)
_WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_]+")


def has_userinfo(url: str) -> bool:
    """Whether the URL carries ``user[:password]@`` before its host."""
    return bool(_USERINFO_RE.match(url))


def word_parts(name: str) -> list[str]:
    """The name's word parts, lowercased (see the module docstring)."""
    return [part.lower() for part in _WORD_PARTS.findall(name)]


def looks_like_credential(name: str) -> bool:
    """Whether a query parameter or environment variable name looks like a credential."""
    return any(part.startswith(CREDENTIAL_WORDS) or part.endswith(CREDENTIAL_WORDS)
               for part in word_parts(name))


def credential_query_names(url: str) -> list[str]:
    """The URL's query parameter names that look like credentials, in order, once each."""
    try:
        query = urlsplit(url).query
    except ValueError:  # an unparsable URL has no parameters worth naming
        return []
    names = (name for name, _ in parse_qsl(query, keep_blank_values=True))
    return list(dict.fromkeys(n for n in names if looks_like_credential(n)))
