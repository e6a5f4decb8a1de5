"""Misbehaving HTTP servers on loopback, written on raw asyncio sockets.

Real MCP servers (``mcp_servers.py``) behave; these do not, the way broken
deployments, proxies and login pages do. Each ``CannedServer`` answers every
request with one canned behaviour:

    with CannedServer(Behaviour.GARBAGE_JSON) as srv:
        srv.url("/mcp")              # http://127.0.0.1:<port>/mcp
        srv.connections              # TCP connections accepted so far

With ``tls=`` (an ``ssl.SSLContext``) the same behaviours are served over https.
``self_signed_tls()`` makes a context with a throw-away self-signed certificate;
``make_ca()`` / ``CertificateAuthority.server_context()`` a private CA and a
certificate it signs (for the private-CA tests).
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import ipaddress
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


class Behaviour(enum.Enum):
    HANG = "hang"  # accepts, reads, never answers
    STATUS_500 = "500"  # an error page with several lines of text
    GARBAGE_JSON = "garbage-json"  # 200 application/json, body is not JSON-RPC
    HTML = "html"  # 200 text/html: a login page or a proxy's error page
    RAW_BYTES = "raw-bytes"  # not HTTP at all
    SSE_SILENCE = "sse-silence"  # 200 text/event-stream, then nothing, ever
    REDIRECT = "redirect"  # 302 to another host
    NOT_FOUND = "404"  # the path does not exist (wrong transport's endpoint)
    METHOD_NOT_ALLOWED = "405"  # the method is not served here (wrong transport)


_MULTILINE = "Internal Server Error\nTraceback (most recent call last):\n  File \"app.py\"\n"
_HTML = "<html>\n<head><title>Sign in</title></head>\n<body>Please sign in</body>\n</html>\n"


def _response(status: str, content_type: str, body: str, extra: str = "") -> bytes:
    data = body.encode()
    head = (f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(data)}\r\n{extra}connection: close\r\n\r\n")
    return head.encode() + data


_CANNED = {
    Behaviour.STATUS_500: _response("500 Internal Server Error", "text/plain", _MULTILINE),
    Behaviour.GARBAGE_JSON: _response("200 OK", "application/json",
                                      '{"jsonrpc": "2.0", "result": \n  oops not json\n'),
    Behaviour.HTML: _response("200 OK", "text/html", _HTML),
    Behaviour.RAW_BYTES: b"\x00\xffSSH-2.0-OpenSSH\r\n\x16\x03garbage\n\n",
    Behaviour.REDIRECT: _response("302 Found", "text/plain", "moved\n",
                                  "location: http://login.example.com/sso?next=x\r\n"),
    Behaviour.NOT_FOUND: _response("404 Not Found", "text/plain", "Not Found\n"),
    Behaviour.METHOD_NOT_ALLOWED: _response("405 Method Not Allowed", "text/plain",
                                            "Method Not Allowed\n"),
}
_SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
             b"cache-control: no-cache\r\n\r\n")


class CannedServer:
    """One misbehaving server in a background thread (its own event loop)."""

    def __init__(self, behaviour: Behaviour, *, tls: ssl.SSLContext | None = None) -> None:
        self.behaviour = behaviour
        self.tls = tls
        self.connections = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> CannedServer:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        started.result(timeout=5)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def url(self, path: str = "/mcp") -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{LOOPBACK}:{self.port}{path}"

    async def _start(self) -> None:
        self._closing = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, LOOPBACK, 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self._closing.set()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await _read_request(reader)
            if self.behaviour is Behaviour.HANG:
                await self._closing.wait()
            elif self.behaviour is Behaviour.SSE_SILENCE:
                writer.write(_SSE_HEAD)
                await writer.drain()
                await self._closing.wait()
            else:
                writer.write(_CANNED[self.behaviour])
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> None:
    """Read one request head and its body (by content-length), ignoring both."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    if length:
        await reader.readexactly(length)


# --------------------------------------------------------------------------- TLS


@dataclass(frozen=True)
class CertificateAuthority:
    """A private CA (PEM) and the files of one server certificate it signed for 127.0.0.1."""

    ca_pem: str
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _key() -> object:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> object:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(directory: Path | None = None, *, self_signed_leaf: bool = False,
            ) -> CertificateAuthority:
    """A CA and a 127.0.0.1/localhost server certificate it signed (or, with
    ``self_signed_leaf``, one that signed itself: then ``ca_pem`` is that certificate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    directory = directory or Path(tempfile.mkdtemp(prefix="skillop-ca-"))
    now = datetime.datetime.now(datetime.UTC)
    ca_key: object = _key()
    ca_cert = (x509.CertificateBuilder()
               .subject_name(_name("skillop test CA")).issuer_name(_name("skillop test CA"))
               .public_key(ca_key.public_key())  # type: ignore[attr-defined]
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                            crl_sign=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    leaf_key: object = ca_key if self_signed_leaf else _key()
    issuer = _name("127.0.0.1") if self_signed_leaf else ca_cert.subject
    builder = (x509.CertificateBuilder()
               .subject_name(_name("127.0.0.1")).issuer_name(issuer)  # type: ignore[arg-type]
               .public_key(leaf_key.public_key())  # type: ignore[attr-defined]
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.SubjectAlternativeName([
                   x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.DNSName("localhost")]),
                   critical=False))
    leaf = builder.sign(ca_key if not self_signed_leaf else leaf_key,  # type: ignore[arg-type]
                        hashes.SHA256())
    cert_file, key_file = directory / "server.crt", directory / "server.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(leaf_key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    trusted = leaf if self_signed_leaf else ca_cert
    return CertificateAuthority(trusted.public_bytes(serialization.Encoding.PEM).decode(),
                                cert_file, key_file)


def self_signed_tls() -> ssl.SSLContext:
    """A server context whose certificate nobody trusts."""
    return make_ca(self_signed_leaf=True).server_context()
