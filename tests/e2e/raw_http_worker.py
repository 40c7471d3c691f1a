#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A raw-socket HTTP/1.1 worker for the framing e2e tests (tests/e2e/http_framing_test.cc): it
# serves the listening socket bulkheadd passes as fd 3 (LISTEN_FDS), one thread per connection,
# and sends exactly the bytes a test asks for, however wrong. It is the naive server the tests
# need: it never reads the body of a GET or HEAD (it takes those bytes as the next request), and
# it keeps every connection open whatever the request's Connection field says.
#   GET  /hello                 200 "hello"
#   POST /echo-head             reads the body as framed (Content-Length, or chunked with its
#                               trailer section) and answers 200 with the request's head as it
#                               arrived, then "--body--", then the body bytes as they arrived
#   GET  /raw/HEX               sends the bytes HEX encodes (hex digits), nothing else
#   GET  /raw/HEX/later/HEX2    the same; the bytes of HEX2 go out on this connection only when the
#                               next request comes on it, just before that request's answer (a
#                               worker whose bytes arrive after bulkheadd took its response whole)
#   GET  /wait?file=P           answers "released" once the file P exists
# Every answer it makes itself (not /raw) carries X-Worker-Connection: N, the number of the
# connection it went out on (counted from 1 in the order the worker accepted them).
import itertools
import os
import socket
import sys
import threading
import time
import urllib.parse

CONNECTIONS = itertools.count(1)


class Connection:
    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.number = next(CONNECTIONS)
        self.later = b""  # bytes owed before the next answer (/raw/.../later/...)

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buffer += data

    def take_until(self, marker):
        while marker not in self.buffer:
            self.fill()
        end = self.buffer.index(marker) + len(marker)
        taken, self.buffer = self.buffer[:end], self.buffer[end:]
        return taken

    def take(self, n):
        while len(self.buffer) < n:
            self.fill()
        taken, self.buffer = self.buffer[:n], self.buffer[n:]
        return taken

    def body(self, fields):
        """The body as it arrived: Content-Length bytes, or chunked up to its trailer section."""
        if fields.get("transfer-encoding", "").lower() == "chunked":
            raw = b""
            while True:
                line = self.take_until(b"\r\n")
                raw += line
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    break
                raw += self.take(size + 2)
            while True:  # the trailer section, up to its empty line
                line = self.take_until(b"\r\n")
                raw += line
                if line == b"\r\n":
                    return raw
        return self.take(int(fields.get("content-length", "0")))

    def send(self, data):
        if self.later:
            data, self.later = self.later + data, b""
        self.sock.sendall(data)

    def answer(self, body, status="200 OK"):
        self.send(
            b"HTTP/1.1 %s\r\nContent-Length: %d\r\nX-Worker-Connection: %d\r\n\r\n%s"
            % (status.encode(), len(body), self.number, body)
        )

    def serve_one(self):
        head = self.take_until(b"\r\n\r\n")
        request_line, _, rest = head.partition(b"\r\n")
        method, target, _ = request_line.decode("latin-1").split(" ", 2)
        fields = {}
        for line in rest.decode("latin-1").split("\r\n"):
            name, colon, value = line.partition(":")
            if colon:
                fields[name.strip().lower()] = value.strip()
        # Naive: a GET or HEAD never has a body read; whatever follows is the next request.
        body = b"" if method in ("GET", "HEAD") else self.body(fields)
        path = urllib.parse.urlsplit(target).path
        if path == "/hello":
            self.answer(b"hello")
        elif path == "/echo-head":
            self.answer(head + b"--body--" + body)
        elif path.startswith("/raw/"):
            parts = path[len("/raw/"):].split("/later/")
            self.send(bytes.fromhex(parts[0]))
            if len(parts) > 1:
                self.later = bytes.fromhex(parts[1])
        elif path == "/wait":
            gate = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)["file"][0]
            while not os.path.exists(gate):
                time.sleep(0.01)
            self.answer(b"released")
        else:
            self.answer(b"not found\n", "404 Not Found")

    def serve(self):
        try:
            while True:
                self.serve_one()
        except (EOFError, ConnectionError):
            pass
        finally:
            self.sock.close()


def main():
    listener = socket.socket(fileno=3)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=Connection(sock).serve, daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
