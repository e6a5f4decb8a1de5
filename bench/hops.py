"""Reference hops for bench/gateway.py: what one more loopback hop costs with no checks.

The gateway's targets (p50 at most 1.3x direct, throughput with 50 clients at
least 0.9x) are ratios against calling the upstream directly, so they include
what any proxy in between costs on the machine: one more process to wake (twice
a call: the request, then the upstream's answer), two more loopback
connections, and the cores it shares with the agents and the upstream. These
hops measure that part alone, in the same run and the same turns as the
gateway, so that a figure can be read as "the hop" plus "the gateway's work":

* ``python``: a forwarder in this file (``--serve UPSTREAM_URL``), asyncio on
  uvloop with httptools, as the gateway is: each request's method, headers and
  body sent on, over kept-alive connections, and the answer's status, content
  type, session id and body sent back in one write, once it has ended. It
  checks nothing, parses no JSON and writes no audit line: the floor for a
  gateway written as this one is.
* ``nginx``: nginx as a reverse proxy (one worker, kept-alive upstream
  connections, no buffering, no access log), when ``nginx`` is on PATH: a
  proxy in C, next to no CPU of its own.

Both are for the benchmark's client alone (the python hop holds an answer until
it ends: an event stream that stays open, such as a handshake-era client's
GET, is never answered, which that client tolerates); neither is part of skillop.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HOPS = ("python", "nginx")
#: What the python hop sends back of an answer's head (besides its length).
_ANSWER_HEADERS = (b"content-type", b"mcp-session-id")
#: What the python hop writes itself of a request's head (the rest is sent on).
_REQUEST_HEADERS_MADE = (b"host", b"content-length", b"connection")


def available(hop: str) -> str | None:
    """Why ``hop`` cannot run here (None: it can)."""
    if hop == "nginx" and shutil.which("nginx") is None:
        return "nginx is not on PATH (Debian: apt-get install nginx-light)"
    return None


@contextmanager
def running(hop: str, upstream_url: str) -> Iterator[tuple[subprocess.Popen[Any], str]]:
    """The hop's process, forwarding to ``upstream_url``, and the URL to call it at."""
    if hop == "python":
        proc = subprocess.Popen([sys.executable, __file__, "--serve", upstream_url],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            if not url:
                raise RuntimeError("the python hop did not start")
            yield proc, url
        finally:
            _stop(proc)
        return
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        authority = urlsplit(upstream_url).netloc
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(_NGINX.replace("@UPSTREAM@", authority).replace("@PORT@", str(port)))
        log = Path(tmp) / "nginx.stderr"
        with log.open("wb") as stderr:  # a file: a pipe nobody reads could fill and stall it
            proc = subprocess.Popen(["nginx", "-c", str(conf), "-p", tmp],
                                    stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            _wait_for(port, proc, log)
            yield proc, f"http://127.0.0.1:{port}{urlsplit(upstream_url).path}"
        finally:
            _stop(proc)


_NGINX = """daemon off; master_process off; worker_processes 1;
error_log stderr warn; pid nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  upstream mcp { server @UPSTREAM@; keepalive 128; }
  server {
    listen 127.0.0.1:@PORT@;
    location / {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host @UPSTREAM@;
      proxy_buffering off;
    }
  }
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(port: int, proc: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited: {log.read_text(errors='replace')[-500:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("nginx did not start listening")


def _stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


# --------------------------------------------------------------------------- the python hop


def serve(upstream_url: str) -> None:
    """``--serve``: forward to ``upstream_url`` until killed; prints its own URL."""
    import httptools
    import uvloop

    parts = urlsplit(upstream_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    start = f" {parts.path or '/'} HTTP/1.1\r\nhost: {parts.netloc}\r\n".encode()
    idle: list[_Upstream] = []

    class _Message(asyncio.Protocol):
        """One side's connection: its parser's body and the headers it keeps."""

        def __init__(self, parser: Any, kept: Callable[[bytes], bool]) -> None:
            self.parser = parser
            self._kept = kept  # of a header's lower-cased name: whether it is sent on
            self.transport: Any = None
            self._body: list[bytes] = []
            self._headers: list[bytes] = []

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_header(self, name: bytes, value: bytes) -> None:
            if self._kept(name.lower()):
                self._headers += [name, b": ", value, b"\r\n"]

        def on_body(self, body: bytes) -> None:
            self._body.append(bytes(body))

        def _taken(self) -> tuple[bytes, bytes]:
            """The message's headers and body, the buffers emptied for the next one."""
            taken = b"".join(self._headers), b"".join(self._body)
            self._headers, self._body = [], []
            return taken

    class _Upstream(_Message):
        def __init__(self) -> None:
            super().__init__(httptools.HttpResponseParser(self), _ANSWER_HEADERS.__contains__)
            self.answer: asyncio.Future[tuple[int, bytes, bytes, bool]] | None = None

        def on_message_complete(self) -> None:
            assert self.answer is not None
            headers, body = self._taken()
            self.answer.set_result((self.parser.get_status_code(), headers, body,
                                    self.parser.should_keep_alive()))

    class _Front(_Message):
        def __init__(self) -> None:
            super().__init__(httptools.HttpRequestParser(self),
                             lambda name: name not in _REQUEST_HEADERS_MADE)

        def on_message_complete(self) -> None:
            headers, body = self._taken()
            method = self.parser.get_method()
            asyncio.get_running_loop().create_task(self._forward(method, body, headers))

        async def _forward(self, method: bytes, body: bytes, headers: bytes) -> None:
            loop = asyncio.get_running_loop()
            while idle and idle[-1].transport.is_closing():
                idle.pop()
            if idle:
                upstream = idle.pop()
            else:
                _, upstream = await loop.create_connection(_Upstream, host, port)
            upstream.answer = loop.create_future()
            upstream.transport.write(method + start + headers + b"content-length: %d\r\n\r\n"
                                     % len(body) + body)
            status, answer_headers, answer, keep_alive = await upstream.answer
            if keep_alive and not upstream.transport.is_closing():
                idle.append(upstream)
            if self.transport.is_closing():
                return  # the client went away meanwhile (a session's end)
            self.transport.write(b"HTTP/1.1 %d -\r\n%scontent-length: %d\r\n\r\n"
                                 % (status, answer_headers, len(answer)) + answer)

    async def main() -> None:
        # IPPROTO_TCP, as bench/gateway.py's upstream: asyncio then sets TCP_NODELAY.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        print(f"http://127.0.0.1:{sock.getsockname()[1]}{parts.path}", flush=True)
        server = await asyncio.get_running_loop().create_server(_Front, sock=sock)
        await server.serve_forever()

    uvloop.run(main())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="UPSTREAM_URL", required=True)
    serve(parser.parse_args().serve)
