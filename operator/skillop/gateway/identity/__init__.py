"""Who the end user behind a request is: their OpenID Connect token, verified at the
gateway against the Actor's ``spec.callers`` (docs/gateway.md, Callers).

``header`` reads the token from its request header; ``keys`` fetches and caches the
issuer's signing keys; ``verify`` checks a token with them; ``verified`` remembers
tokens already verified; ``callers`` puts these together per set; ``http`` is the
MCP authorization flow in front of the gateway's HTTP app.
"""
