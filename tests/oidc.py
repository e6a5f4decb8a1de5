"""A real OpenID provider for the tests: panva's ``oidc-provider`` from npm
(``tests/fixtures/oidc``, pinned), run by node on a loopback port.

``with OidcProvider() as idp:`` starts it (installing the npm package once per
machine, ``npmkit``) and waits until its discovery document answers; without node
or npm the test skips in one line. Tokens come from the provider's own token
endpoint, signed by its key (its ``kid`` in ``jwks_uri``):

- ``idp.token(subject, groups=..., audience=..., expires_in=..., extra_claims=...)``
  mints one (a test-only grant, ``urn:skillop:test:mint``);
- ``idp.rotate()`` gives the provider a new signing key; the old one leaves the
  JWKS (and tokens it signed are no longer accepted for exchange);
- the RFC 8693 token-exchange grant answers the confidential clients
  ``client_id``/``client_secret`` (client_secret_basic) and ``post_client_id``
  (client_secret_post): a JWT for the requested audience and scope with the
  subject token's ``sub``; ``idp.exchanges()`` lists what each exchange asked
  (``ok`` when it issued a token) and ``idp.answer_exchanges(...)`` sets how the
  next ones answer (an error, a lifetime, a delay, extra claims).
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from types import TracebackType
from typing import IO, Any

from npmkit import TESTS, installed_or_skip

SOURCE = TESTS / "fixtures" / "oidc"
MINT = "urn:skillop:test:mint"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
_MINTER = "skillop-test-minter"
#: How long node may take to listen (the provider started, its keys made).
_START_SECONDS = 120


class OidcProvider:
    """The provider process; a context manager (see the module's docstring)."""

    client_id = "skillop-gateway"
    post_client_id = "skillop-gateway-post"

    def __init__(self, *, client_secret: str = "skillop-test-secret") -> None:
        self.client_secret = client_secret
        self._process: subprocess.Popen[str] | None = None
        # node's stderr, read back when it fails to start; open while it runs
        self._log: IO[str] = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 closed by __exit__
        self.issuer = ""
        self.discovery: dict[str, Any] = {}

    def __enter__(self) -> OidcProvider:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
        self._log.close()

    def start(self) -> None:
        """Run node (the package installed first) and wait for discovery."""
        target = installed_or_skip(SOURCE, "oidc-provider",
                                   needed_for="the OpenID provider of the tests")
        env = {**os.environ, "OIDC_CLIENT_SECRET": self.client_secret, "OIDC_PORT": "0"}
        self._process = subprocess.Popen(
            ["node", str(target / "provider.mjs")], cwd=target, env=env, text=True,
            stdout=subprocess.PIPE, stderr=self._log)
        port = self._port()
        self.issuer = f"http://127.0.0.1:{port}"
        self.discovery = self._wait_for_discovery()

    def stop(self) -> None:
        """Stop node: the provider's endpoints refuse connections from now on."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)
        self._process = None

    @property
    def jwks_uri(self) -> str:
        return str(self.discovery["jwks_uri"])

    @property
    def token_endpoint(self) -> str:
        return str(self.discovery["token_endpoint"])

    def token(self, subject: str, *, groups: list[str] | tuple[str, ...] = (),
              audience: str = "skillop-gateway", expires_in: int = 300,
              extra_claims: dict[str, Any] | None = None, scope: str | None = None) -> str:
        """A JWT access token the provider signs for ``subject``."""
        form = {"grant_type": MINT, "client_id": _MINTER, "client_secret": self.client_secret,
                "subject": subject, "groups": json.dumps(list(groups)),
                "claims": json.dumps(extra_claims or {}), "audience": audience,
                "expires_in": str(expires_in)}
        if scope is not None:
            form["scope"] = scope
        return str(self._post_form(self.token_endpoint, form)["access_token"])

    def exchange(self, subject_token: str, *, audience: str,
                 scope: str | None = None) -> dict[str, Any]:
        """An RFC 8693 exchange as a confidential client (client_secret_basic) does
        it: the token endpoint's answer."""
        form = {"grant_type": EXCHANGE, "subject_token": subject_token,
                "subject_token_type": ACCESS_TOKEN_TYPE, "audience": audience}
        if scope is not None:
            form["scope"] = scope
        basic = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        return self._post_form(self.token_endpoint, form,
                               headers={"Authorization": f"Basic {basic}"})

    def jwks(self) -> dict[str, Any]:
        return self._json(urllib.request.Request(self.jwks_uri))

    def rotate(self) -> str:
        """A new signing key; the old one leaves the JWKS. Returns the new kid."""
        return str(self._admin("POST", "rotate")["kid"])

    def exchanges(self) -> list[dict[str, Any]]:
        """Every exchange the token endpoint was asked for, in order."""
        return list(self._admin("GET", "exchanges")["exchanges"])

    def exchange_count(self) -> int:
        """How many exchanges issued a token."""
        return sum(1 for seen in self.exchanges() if seen["ok"])

    def answer_exchanges(self, *, error: str | None = None, expires_in: int | None = None,
                         delay_ms: int | None = None,
                         claims: dict[str, Any] | None = None) -> None:
        """How the next exchanges answer: ``error`` refuses them (invalid_grant),
        ``expires_in`` sets the issued tokens' lifetime, ``delay_ms`` slows each one,
        ``claims`` are added to the issued tokens."""
        wanted = {"error": error, "expires_in": expires_in, "delay_ms": delay_ms,
                  "claims": claims}
        self._admin("POST", "exchange", {k: v for k, v in wanted.items() if v is not None})

    def reset(self) -> None:
        """Forget the exchanges seen and answer them normally again."""
        self._admin("POST", "reset")

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read()

    def _port(self) -> int:
        process = self._process
        assert process is not None and process.stdout is not None
        # Node loads the provider and makes its signing keys before it listens:
        # seconds on a quiet machine, over 30 s on a CI machine under load.
        deadline = time.monotonic() + _START_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([process.stdout], [], [], left)
            line = process.stdout.readline() if ready else ""
            if line.startswith("listening "):
                return int(line.split()[1])
            if ready and not line:  # node exited
                break
        self.stop()
        raise RuntimeError(f"the OpenID provider did not start within {_START_SECONDS} s: "
                           f"{self.log()[-2000:]}")

    def _wait_for_discovery(self) -> dict[str, Any]:
        url = f"{self.issuer}/.well-known/openid-configuration"
        deadline = time.monotonic() + 30
        while True:
            try:
                return self._json(urllib.request.Request(url))
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _admin(self, method: str, route: str, body: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        return self._json(urllib.request.Request(
            f"{self.issuer}/_test/{route}", data=data, method=method,
            headers={"Content-Type": "application/json"}))

    def _post_form(self, url: str, form: dict[str, str], *,
                   headers: dict[str, str] | None = None) -> dict[str, Any]:
        return self._json(urllib.request.Request(
            url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}))

    @staticmethod
    def _json(request: urllib.request.Request) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                loaded: dict[str, Any] = json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            raise ProviderRefused(refused.code, refused.read().decode()) from None
        return loaded


class ProviderRefused(RuntimeError):
    """The provider answered an error (its status and body)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
