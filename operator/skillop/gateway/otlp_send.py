"""The gateway's own OTLP/HTTP sender: the bytes ``otlp.Batches`` encoded, POSTed over
one persistent connection.

The SDK's exporter sends through ``requests`` (a session, ``urllib3``'s pool,
``http.client``), about 4.5M instructions a POST of 512 spans, a tenth of a traced
call's extra (docs/benchmarks.md, "Traces, third round"). This sender keeps what
that exporter honours, taking its settings as the exporter resolved them from the
``OTEL_EXPORTER_OTLP_[TRACES_]*`` variables: the endpoint, the headers (with its
``User-Agent`` and ``Content-Type``), the timeout, the compression (gzip, deflate),
the server's certificate (``_CERTIFICATE``, else ``REQUESTS_CA_BUNDLE`` or
``CURL_CA_BUNDLE``, else certifi's, as ``requests`` verifies) and the client's
(``_CLIENT_CERTIFICATE``, ``_CLIENT_KEY``); and its retries: a connection error is
tried again at once on a fresh connection (a kept-alive one the receiver closed),
429, 502, 503, 504 and connection errors again after a backoff (1, 2, 4, 8, 16 s,
jittered by a fifth, or the receiver's ``Retry-After``), up to six times within the
timeout. A batch that still fails is dropped, and its spans counted as dropped.

What it does not cover goes on through the SDK's exporter (``sender_of`` answers
None): a credential provider's session, a proxy the environment names for the
endpoint, ``~/.netrc`` credentials for it, credentials in the endpoint's URL, a
scheme other than http and https. The headers can carry secrets: nothing here
logs them, nor an error that could quote one.
"""

from __future__ import annotations

import gzip
import http.client
import logging
import math
import os
import random
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlsplit

_log = logging.getLogger(__name__)
_RETRYABLE: Final = frozenset({429, 502, 503, 504})
_ATTEMPTS: Final = 6
_JITTER: Final = 0.2
#: Errors of the connection (refused, reset, closed by the receiver, timed out, TLS):
#: worth another attempt, as the SDK's transport deems ``requests``' equivalents.
_CONNECTION_ERRORS: Final = (OSError, http.client.HTTPException)
_CREDENTIAL_PROVIDERS: Final = ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                                "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER")


class Sender:
    """POSTs OTLP request bodies to one endpoint; ``send(body)``: whether it was taken.
    Used by one thread at a time (``otlp.Batches`` holds its lock while sending)."""

    def __init__(self, endpoint: str, headers: Mapping[str, str], *, timeout: float,
                 compression: str = "none", context: ssl.SSLContext | None = None,
                 sleep: Callable[[float], bool] | None = None) -> None:
        """``sleep(seconds)``: waits between attempts, True if stopped meanwhile (the
        default: ``close()`` ends the wait)."""
        parts = urlsplit(endpoint)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "localhost", parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = dict(headers)
        self._compress: Callable[[bytes], bytes] | None = (
            gzip.compress if compression == "gzip" else
            zlib.compress if compression == "deflate" else None)
        if self._compress is not None and not any(
                key.lower() == "content-encoding" for key in self._headers):
            self._headers["Content-Encoding"] = compression
        self._timeout = timeout
        self._context = context
        self._stopped = threading.Event()
        self._sleep = sleep or self._stopped.wait
        self._connection: http.client.HTTPConnection | None = None
        self.endpoint = f"{parts.scheme}://{parts.netloc}{parts.path}"

    def send(self, body: bytes) -> bool:
        """``body`` sent, with retries (see above); False: dropped (logged, without its
        headers)."""
        if self._compress is not None:
            body = self._compress(body)
        deadline = time.monotonic() + self._timeout
        for attempt in range(_ATTEMPTS):
            backoff = 2 ** attempt * random.uniform(1 - _JITTER, 1 + _JITTER)
            try:
                status, wait, failure = self._attempt(body, deadline)
            except ValueError:  # ``http.client``'s words would quote the header
                self.close_connection()
                _log.error("exporting spans to %s failed: a header of the OTEL_EXPORTER_OTLP"
                           "_*HEADERS is not a valid HTTP header (not logged)", self.endpoint)
                return False
            if status is not None and 200 <= status < 400:
                return True
            if status is not None and status not in _RETRYABLE:
                _log.error("exporting spans to %s failed: HTTP %s, not retried",
                           self.endpoint, status)
                return False
            if wait is not None:
                backoff = wait
            if (attempt + 1 == _ATTEMPTS or backoff > deadline - time.monotonic()
                    or self._stopped.is_set()):
                break
            _log.warning("exporting spans to %s: %s, again in %.2f s", self.endpoint,
                         failure, backoff)
            if self._sleep(backoff):
                break
        _log.error("exporting spans to %s failed: %s (the batch is dropped)", self.endpoint,
                   failure)
        return False

    def _attempt(self, body: bytes, deadline: float) -> tuple[int | None, float | None, str]:
        """One POST: (its status, the receiver's ``Retry-After``, what failed); a
        connection error is tried once more on a new connection first."""
        for fresh in (False, True):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, None, "timed out"
            try:
                return self._post(body, remaining)
            except _CONNECTION_ERRORS as error:
                self.close_connection()
                failure = _described(error)
                if fresh:
                    return None, None, failure
        raise AssertionError("unreachable")  # pragma: no cover

    def _post(self, body: bytes, timeout: float) -> tuple[int, float | None, str]:
        connection = self._connection
        if connection is None:
            connection = self._connection = self._connect(timeout)
        elif connection.sock is not None:
            connection.sock.settimeout(timeout)
        connection.timeout = timeout
        connection.request("POST", self._path, body, self._headers)
        response = connection.getresponse()
        response.read()
        if response.will_close:
            self.close_connection()
        status = response.status
        wait = _retry_after(response.getheader("retry-after")) if status in _RETRYABLE else None
        return status, wait, f"HTTP {status}"

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """No more retries (a wait ends now); the connection closed."""
        self._stopped.set()
        self.close_connection()


def _described(error: BaseException) -> str:
    """An error as logged: its kind, and an OS error's own words (a reset, a refusal,
    a certificate) which never quote a header."""
    if isinstance(error, OSError) and error.strerror:
        return f"{type(error).__name__}: {error.strerror}"
    if isinstance(error, ssl.SSLError):
        return f"{type(error).__name__}: {error.reason}"
    return type(error).__name__


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (a number of them, or an HTTP date), as the SDK
    reads it; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(at.timestamp() - time.time(), 0.0)


def tls_context(verify: bool | str, cert: str | tuple[str, str] | None,
                environ: Mapping[str, str] = os.environ) -> ssl.SSLContext:
    """The context ``requests`` would verify and present certificates with: ``verify``
    a file or directory of CAs (True: the environment's bundle, else certifi's)."""
    if verify is True:
        verify = (environ.get("REQUESTS_CA_BUNDLE") or environ.get("CURL_CA_BUNDLE")
                  or _certifi())
    if verify is False:
        context = ssl._create_unverified_context()
    elif os.path.isdir(verify):
        context = ssl.create_default_context(capath=verify)
    else:
        context = ssl.create_default_context(cafile=verify)
    if isinstance(cert, tuple):
        context.load_cert_chain(*cert)
    elif cert:
        context.load_cert_chain(cert)
    return context


def _certifi() -> str:
    import certifi

    return str(certifi.where())


def sender_of(client: Any, environ: Mapping[str, str] = os.environ) -> Sender | None:
    """A sender of the settings ``client`` (the SDK exporter's ``_OTLPHTTPClient``)
    resolved, or None where the SDK's must go on (see above)."""
    import requests
    from requests.utils import get_environ_proxies, get_netrc_auth

    session = getattr(getattr(client, "_transport", None), "_session", None)
    endpoint, headers = getattr(client, "_endpoint", None), getattr(client, "_headers", None)
    compression = getattr(getattr(client, "_compression", None), "value", None)
    timeout = getattr(client, "_timeout", None)
    if (type(session) is not requests.Session or not isinstance(endpoint, str)
            or not isinstance(headers, dict) or not isinstance(compression, str)
            or not isinstance(timeout, (int, float))
            or any(environ.get(name) for name in _CREDENTIAL_PROVIDERS)):
        return None
    parts = urlsplit(endpoint)
    if (parts.scheme not in ("http", "https") or parts.username or parts.password
            or session.auth or session.proxies or (session.cert is not None and not isinstance(
                session.cert, (str, tuple)))):
        return None
    if session.trust_env and (get_environ_proxies(endpoint) or get_netrc_auth(endpoint)):
        return None
    context = (tls_context(session.verify, session.cert, environ)
               if parts.scheme == "https" else None)
    return Sender(endpoint, headers, timeout=float(timeout), compression=compression,
                  context=context)
