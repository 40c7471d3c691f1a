#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A small HTTP/1.1 worker for the ready = "http:/PATH" tests: Python's http.server on the listening
# Unix socket bulkheadd passes as fd 3 (sd_listen_fds(3)), one connection at a time, in the order
# they were accepted (so the log below is in probe order).
#
# GET /healthz answers 503 for the first --fail-first probes, then 200 for the next --ok-for
# probes (unbounded without it), then 503 again (--then hang: no answer at all, the connection
# left open). Each probe appends its status code (or "hang") and a newline to --log, so a test sees
# what the probe was told and in which order. Any other path answers 200 "hello PATH".
# --notify-ready sends READY=1 to NOTIFY_SOCKET (sd_notify(3)) before serving, as gunicorn's
# arbiter does once it has booted, whether or not its app answers yet.
# --slow-body writes the head of each answer, then its body in three writes 20 ms apart (as an app
# that streams its answer), and logs "write failed: ERROR" for a write the probe's connection
# refused (EPIPE, ECONNRESET: the probe had closed before the whole answer was written).
import argparse
import http.server
import os
import socket
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--fail-first", type=int, default=0)
parser.add_argument("--ok-for", type=int, default=-1)
parser.add_argument("--then", choices=["503", "hang"], default="503")
parser.add_argument("--log", default="")
parser.add_argument("--notify-ready", action="store_true")
parser.add_argument("--slow-body", action="store_true")
args = parser.parse_args()

if os.environ.get("LISTEN_FDS") != "1":
    sys.exit("expected LISTEN_FDS=1 (run by bulkheadd)")

probes = 0


def log(line):
    if args.log:
        with open(args.log, "a") as f:
            f.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        global probes
        if self.path != "/healthz":
            self.answer(200, "hello " + self.path)
            return
        probes += 1
        n = probes
        if n <= args.fail_first:
            code = 503
        elif args.ok_for < 0 or n <= args.fail_first + args.ok_for:
            code = 200
        elif args.then == "hang":
            log("hang")
            threading.Event().wait()  # this probe and every later one wait forever
            return
        else:
            code = 503
        log(str(code))
        self.answer(code, "probe %d" % n)

    def answer(self, code, text):
        body = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not args.slow_body:
            self.wfile.write(body)
            return
        third = (len(body) + 2) // 3
        try:
            for at in range(0, len(body), third):
                time.sleep(0.02)
                self.wfile.write(body[at : at + third])
        except OSError as e:
            log("write failed: " + os.strerror(e.errno))
            self.close_connection = True

    def address_string(self):
        return "bulkheadd"  # a Unix socket peer has no address

    def log_message(self, format, *args):
        pass


class Server(http.server.HTTPServer):
    def server_bind(self):
        pass  # the socket comes bound and listening

    def server_activate(self):
        pass


if args.notify_ready:
    address = os.environ["NOTIFY_SOCKET"]
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.sendto(b"READY=1", address)

server = Server(("", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.serve_forever()
