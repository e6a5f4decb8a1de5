"""An OTLP/HTTP traces endpoint for the tests: it decodes what it is sent
(``opentelemetry-proto``) and answers as the test asks."""

from __future__ import annotations

import gzip
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)


class Receiver:
    """HTTP/1.1 with keep-alive. ``spans``: every span it took, as a dict;
    ``exports``: the span names of each export it took; ``headers``: each request's;
    ``connections``: how many were opened. ``answers``: the statuses to give first
    (then 200; a 503 says ``retry-after: 0``); ``close``: close each connection after
    its answer; ``tls``: serve https."""

    def __init__(self, *, tls: ssl.SSLContext | None = None, answers: tuple[int, ...] = (),
                 close: bool = False) -> None:
        self.spans: list[dict[str, Any]] = []
        self.exports: list[list[str]] = []
        self.headers: list[dict[str, str]] = []
        self.connections = 0
        self.answers = list(answers)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                receiver.connections += 1
                super().setup()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                status = receiver.answers.pop(0) if receiver.answers else 200
                if status == 200:
                    if self.headers.get("content-encoding") == "gzip":
                        body = gzip.decompress(body)
                    receiver.took(ExportTraceServiceRequest.FromString(body))
                self.send_response(status)
                if status == 503:
                    self.send_header("retry-after", "0")
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                if close:
                    self.send_header("connection", "close")
                    self.close_connection = True
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def took(self, request: ExportTraceServiceRequest) -> None:
        spans = [{"name": span.name, "kind": span.kind, "trace_id": span.trace_id.hex(),
                  "span_id": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                  "attributes": {a.key: a.value.string_value for a in span.attributes}}
                 for resource in request.resource_spans
                 for scope in resource.scope_spans for span in scope.spans]
        self.spans.extend(spans)
        self.exports.append([span["name"] for span in spans])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

