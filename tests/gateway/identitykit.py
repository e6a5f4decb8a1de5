"""Keys, tokens and a JWKS server of the tests' own, for the gateway's token checks
without an OpenID provider (``tests/oidc.py`` is the real one)."""

from __future__ import annotations

import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "skillop-gateway"


class Key:
    """A signing key: its private half signs, its public half goes in the JWKS."""

    def __init__(self, kid: str, *, kind: str = "RSA") -> None:
        self.kid = kid
        self.kind = kind
        self.private: Any = (rsa.generate_private_key(public_exponent=65537, key_size=2048)
                             if kind == "RSA" else ec.generate_private_key(ec.SECP256R1()))
        self.alg = "RS256" if kind == "RSA" else "ES256"

    def jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.kind == "RSA" else ECAlgorithm
        jwk: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.alg}

    def public_pem(self) -> bytes:
        return bytes(self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def sign(self, claims: dict[str, Any], *, alg: str | None = None,
             headers: dict[str, Any] | None = None) -> str:
        return jwt.encode(claims, self.private, algorithm=alg or self.alg,
                          headers={"kid": self.kid, **(headers or {})})


class JwksServer:
    """An issuer on a loopback port: discovery and a JWKS of ``keys``, each fetch counted."""

    def __init__(self, *keys: Key, tls: ssl.SSLContext | None = None) -> None:
        self.keys = list(keys)
        self.fetches = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": server.issuer, "jwks_uri": f"{server.issuer}/jwks"}
                elif self.path == "/jwks":
                    server.fetches += 1
                    body = {"keys": [key.jwk() for key in server.keys]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self._http.socket = tls.wrap_socket(self._http.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.issuer = f"{scheme}://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def claims(self, subject: str = "alice", **more: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.issuer, "aud": AUDIENCE, "sub": subject, "iat": now,
                "exp": now + 300, **more}
