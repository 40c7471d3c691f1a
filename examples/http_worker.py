#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The worker of examples/http.toml: Python's http.server on the listening socket bulkheadd passes
# as fd 3 (sd_listen_fds(3): LISTEN_FDS=1), one thread per connection, keep-alive (docs/http.md,
# "The worker"). GET /healthz answers 200 "ok" (the cell's ready = "http:/healthz"); any other
# GET, POST or PUT answers 200 "hello PATH" with the request body after it, whether the body came
# with Content-Length or chunked (bulkheadd streams a large or slow chunked body on as chunks);
# HEAD answers GET's head without its body. Exits on SIGTERM.
import http.server
import os
import signal
import socket
import sys

LISTEN_FD = 3  # SD_LISTEN_FDS_START


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def read_body(self):
        # RFC 9112 section 7.1: chunk-size [; ext] CRLF data CRLF ... 0 CRLF [trailers] CRLF.
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields, dropped
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()  # the CRLF after the data
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def serve(self, with_body=True):
        body = self.read_body()
        text = b"ok\n" if self.path == "/healthz" else b"hello " + self.path.encode() + b"\n" + body
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        if with_body:
            self.wfile.write(text)

    def do_HEAD(self):
        self.serve(with_body=False)

    do_GET = serve
    do_POST = serve
    do_PUT = serve

    # The default log_message starts with self.client_address[0], which is "" on a Unix socket:
    # log without it (bulkheadd logs the worker's stderr under the cell's name).
    def log_message(self, format, *args):
        sys.stderr.write(format % args + "\n")


def main():
    if os.environ.get("LISTEN_FDS") != "1":
        sys.exit("http_worker.py: expected LISTEN_FDS=1: run it from bulkheadd (examples/http.toml)")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    server = http.server.ThreadingHTTPServer(("", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=LISTEN_FD)
    server.serve_forever()


if __name__ == "__main__":
    main()
