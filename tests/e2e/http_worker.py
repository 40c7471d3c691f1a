#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# An HTTP/1.1 worker for the e2e tests of protocol = "http" cells (docs/http.md): Python's
# http.server serving the listening socket bulkheadd passes as fd 3, one thread per connection.
#   GET  /hello        200 "hello"
#   POST /echo         200 with the request body; X-Seen-* headers echo what the worker got
#   GET  /headers      200, the request's header fields, one "name: value" per line
#   GET  /stall        never answers (until the worker is killed)
#   GET  /sleep/MS     answers "slept" after MS milliseconds
#   GET  /die          sends a head promising 100 bytes and 10 of them, then exits (status 3)
#   GET  /exit         exits (status 3) without answering
#   GET  /status/N     answers status N with a short body
#   GET  /big/N        N bytes of a repeating pattern, Content-Length
#   POST|PUT /verify[?pace=MS]
#                      reads the body as it comes (Content-Length or chunked; MS ms of sleep after
#                      each piece of up to 64 KiB: a slow reader) and checks it against the test
#                      pattern (4096-byte blocks, block K is K as 8 little-endian bytes, 512 times):
#                      200 "LENGTH FIRST_BAD_OFFSET" (-1: byte-identical). Appends "complete LENGTH"
#                      or, when the connection ended before the body did, "incomplete LENGTH" to
#                      $WORKER_BODY_LOG if set
#   GET  /wait?file=P  answers "released" once the file P exists
#   POST /early        413 "too big" and Connection: close from the head, the body left unread
#   POST /drop         appends a line to the file $WORKER_DROP_LOG, then closes the connection
#                      without answering (a worker killed with the request in hand)
# Every response carries X-Worker-Connection: N, the number of the connection it went out on (the
# worker counts the connections it accepted from 1).
# With WORKER_CLOSE=1 every response carries "Connection: close" and the connection is closed
# after it (as gunicorn's sync workers do). With WORKER_RUDE=1 the connection is closed after each
# response without a word (as a server whose keep-alive timeout just passed): bulkheadd may find
# out only when it sends the next request there.
import http.server
import itertools
import os
import socket
import sys
import time
import urllib.parse

CLOSE = os.environ.get("WORKER_CLOSE") == "1"
RUDE = os.environ.get("WORKER_RUDE") == "1"
PATTERN = bytes(range(256)) * 256


BLOCK = 4096


class BlockChecker:
    """Checks a body against the test pattern as it comes, without keeping it."""

    def __init__(self):
        self.length = 0
        self.bad = -1
        self.pending = b""

    def feed(self, data):
        self.pending += data
        full = len(self.pending) - len(self.pending) % BLOCK
        view = memoryview(self.pending)
        for at in range(0, full, BLOCK):
            self.check(view[at : at + BLOCK])
        self.pending = bytes(view[full:])

    def finish(self):
        if self.pending:
            self.check(memoryview(self.pending))
            self.pending = b""

    def check(self, block):
        expected = ((self.length // BLOCK).to_bytes(8, "little") * (BLOCK // 8))[: len(block)]
        if self.bad < 0 and block != expected:
            self.bad = self.length + next(i for i in range(len(block)) if block[i] != expected[i])
        self.length += len(block)


CONNECTIONS = itertools.count(1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection_number = next(CONNECTIONS)

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        # Which of the connections the worker accepted carried this request, counting from 1.
        self.send_header("X-Worker-Connection", str(self.connection_number))
        for name, value in extra:
            self.send_header(name, value)
        if CLOSE:
            self.send_header("Connection", "close")
            self.close_connection = True
        if RUDE:
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def pieces(self, size):
        """The next `size` bytes of the request, in pieces; EOFError when the connection ends first."""
        while size > 0:
            piece = self.rfile.read1(min(size, 65536))
            if not piece:
                raise EOFError
            size -= len(piece)
            yield piece

    def body_pieces(self):
        """The request body in pieces, decoded (trailers skipped); EOFError as pieces()."""
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            yield from self.pieces(int(self.headers.get("Content-Length", "0")))
            return
        while True:
            line = self.rfile.readline()
            if not line.endswith(b"\n"):
                raise EOFError
            size = int(line.split(b";")[0], 16)
            if size == 0:
                break
            yield from self.pieces(size)
            if self.rfile.readline() != b"\r\n":
                raise EOFError
        while (line := self.rfile.readline()) not in (b"\r\n", b"\n"):
            if not line:
                raise EOFError

    def verify(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        pace = int(query.get("pace", ["0"])[0]) / 1000
        checker = BlockChecker()
        complete = True
        try:
            for piece in self.body_pieces():
                checker.feed(piece)
                if pace:
                    time.sleep(pace)
        except (EOFError, ConnectionError):
            complete = False
        checker.finish()
        if os.environ.get("WORKER_BODY_LOG"):
            with open(os.environ["WORKER_BODY_LOG"], "a") as log:
                log.write(f"{'complete' if complete else 'incomplete'} {checker.length}\n")
        if not complete:
            self.close_connection = True
            return
        self.reply(200, f"{checker.length} {checker.bad}".encode())

    do_PUT = verify

    def do_GET(self):
        if self.path == "/hello":
            self.reply(200, b"hello")
        elif self.path == "/headers":
            text = "".join(f"{k.lower()}: {v}\n" for k, v in self.headers.items())
            self.reply(200, text.encode())
        elif self.path == "/stall":
            time.sleep(3600)
        elif self.path.startswith("/sleep/"):
            time.sleep(int(self.path[7:]) / 1000)
            self.reply(200, b"slept")
        elif self.path == "/exit":
            os._exit(3)
        elif self.path == "/die":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            os._exit(3)
        elif self.path.startswith("/wait?file="):
            while not os.path.exists(self.path[11:]):
                time.sleep(0.01)
            self.reply(200, b"released")
        elif self.path.startswith("/status/"):
            self.reply(int(self.path[8:]), b"from the worker\n")
        elif self.path.startswith("/big/"):
            n = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n > 0:
                chunk = PATTERN[: min(n, len(PATTERN))]
                self.wfile.write(chunk)
                n -= len(chunk)
        else:
            self.reply(404, b"not found\n")

    def do_POST(self):
        if self.path.startswith("/verify"):
            self.verify()
            return
        if self.path == "/early":
            # Refuses the upload from its head, without reading the body, and closes.
            self.close_connection = True
            self.send_response(413)
            self.send_header("Content-Length", "8")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"too big\n")
            return
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path == "/drop":
            with open(os.environ["WORKER_DROP_LOG"], "a") as log:
                log.write("POST /drop\n")
            self.close_connection = True
            return
        self.reply(200, body, [("X-Seen-Content-Length", str(length))])


def main():
    listener = socket.socket(fileno=3)
    server = http.server.ThreadingHTTPServer(("", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
