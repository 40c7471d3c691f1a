#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Regenerates the checked-in seed corpora tests/fuzz/corpus/<fuzzer>/ from what the project itself
# says is valid or interesting: frames of every type, status and reason (docs/protocol.md) and
# their broken forms; the config files of examples/ and docs/ and the TOML strings of
# tests/config/; sd_notify(3) datagrams. Deterministic: running it twice gives the same files.
# Usage: python3 tests/fuzz/make_seed_corpus.py   (from anywhere; rewrites the seed files)
import pathlib
import re
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"

REQUEST, REPLY = 1, 2
# (status, reason) pairs a reply can carry (ipc/frame.h).
REPLY_KINDS = [(0, 0), (1, 1), (1, 2), (1, 3), (2, 16), (2, 17), (2, 18), (2, 19), (2, 20),
               (3, 32), (3, 33)]


def header(ftype, status=0, reason=0, request_id=1, payload_size=0, version=1, length=None):
    if length is None:
        length = 12 + payload_size
    return struct.pack(">IBBBBQ", length & 0xFFFFFFFF, version, ftype, status, reason, request_id)


def frame(ftype, payload=b"", **kw):
    return header(ftype, payload_size=len(payload), **kw) + payload


def write(fuzzer, name, data):
    directory = CORPUS / fuzzer
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def frame_seeds():
    # ipc_frame_fuzzer reads byte 0 as (max_payload / 4) << 1 | (1 if REPLY accepted) and byte 1 as
    # the seed of the piece sizes; the rest is the byte stream (tests/ipc/frame_fuzzer.cc).
    def emit(name, accepted, stream, max_payload=508, pieces=0x5A):
        control = ((max_payload // 4) << 1) | (1 if accepted == REPLY else 0)
        write("ipc_frame_fuzzer", name, bytes([control & 0xFF, pieces]) + stream)

    emit("request_empty", REQUEST, frame(REQUEST))
    emit("request_hello", REQUEST, frame(REQUEST, b"hello", request_id=42))
    emit("request_max_id", REQUEST, frame(REQUEST, b"x", request_id=2**64 - 1))
    emit("requests_pipelined", REQUEST,
         b"".join(frame(REQUEST, b"p%d" % i, request_id=i) for i in range(1, 9)), pieces=0x07)
    emit("request_at_max_payload", REQUEST, frame(REQUEST, b"A" * 508))
    emit("request_one_past_max", REQUEST, frame(REQUEST, b"A" * 509))
    emit("request_payload_with_zero_max", REQUEST, frame(REQUEST, b"x"), max_payload=0)
    for status, reason in REPLY_KINDS:
        emit("reply_%d_%d" % (status, reason), REPLY,
             frame(REPLY, b"reply body", status=status, reason=reason, request_id=7))
    emit("replies_pipelined", REPLY,
         b"".join(frame(REPLY, b"r" * i, status=s, reason=r, request_id=i)
                  for i, (s, r) in enumerate(REPLY_KINDS)), pieces=0x33)
    # Broken forms, one per check of FrameDecoder, in its order.
    emit("truncated_header", REQUEST, frame(REQUEST, b"abc")[:7])
    emit("truncated_payload", REQUEST, frame(REQUEST, b"abcdef")[:19])
    emit("bad_version", REQUEST, frame(REQUEST, b"v", version=7))
    emit("version_zero", REQUEST, frame(REQUEST, version=0))
    emit("length_below_header", REQUEST, header(REQUEST, length=11))
    emit("length_zero", REQUEST, header(REQUEST, length=0))
    emit("announces_4gib", REQUEST, header(REQUEST, length=0xFFFFFFFF) + b"partial")
    emit("announces_4gib_reply", REPLY, header(REPLY, length=0xFFFFFFFF))
    emit("wrong_type_request", REQUEST, frame(REPLY, b"x"))
    emit("wrong_type_reply", REPLY, frame(REQUEST, b"x"))
    emit("unknown_type", REQUEST, frame(9, b"x"))
    emit("request_with_status", REQUEST, frame(REQUEST, b"x", status=1, reason=1))
    emit("request_with_reason", REQUEST, frame(REQUEST, b"x", reason=32))
    emit("reply_bad_status", REPLY, frame(REPLY, b"x", status=4))
    emit("reply_unknown_reason", REPLY, frame(REPLY, b"x", status=2, reason=200))
    emit("good_then_bad", REQUEST, frame(REQUEST, b"ok") + frame(REQUEST, version=2) +
         frame(REQUEST, b"after"))
    emit("empty_stream", REQUEST, b"")


def config_seeds():
    def emit(name, text):
        write("config_fuzzer", name, text.encode())

    for example in sorted((ROOT / "examples").glob("*.toml")):
        emit("examples_" + example.name, example.read_text())
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", doc.read_text(), re.S)):
            emit("docs_%s_%d.toml" % (doc.stem, i), block)
    for test in sorted((ROOT / "tests" / "config").glob("*_test.cc")):
        if test.name == "config_keys_test.cc":
            continue  # its strings are single values; every_key.toml below uses them
        strings = re.findall(r'R"\((.*?)\)"', test.read_text(), re.S)
        for i, text in enumerate(strings):
            emit("%s_%02d.toml" % (test.stem, i), text)
    # Every key of [supervisor] and [cells.NAME] at once, with the example value
    # tests/config/config_keys_test.cc gives it (one per key of config/config_keys.h).
    keys_test = (ROOT / "tests" / "config" / "config_keys_test.cc").read_text()
    def examples(table):
        body = keys_test[keys_test.index(table):]
        body = body[:body.index("};")]
        return [(key, raw if raw else plain) for key, raw, plain in
                re.findall(r'\{"(\w+)", (?:R"\((.*?)\)"|"(.*?)")\}', body)]
    every = "[supervisor]\n"
    every += "".join("%s = %s\n" % kv for kv in examples("kSupervisorExamples ="))
    every += "\n[cells.every_key]\n"
    every += "".join("%s = %s\n" % kv for kv in examples("kCellExamples ="))
    emit("every_key.toml", every)
    # Edge cases the tests may not spell out.
    emit("edge_recent_keys.toml",
         "[supervisor]\ncgroup_parent = \"/\"\n[cells.a]\ncommand = [\"/bin/true\"]\n"
         "max_concurrent = 1\nready = \"notify\"\nstart_timeout = \"infinity\"\n"
         "kill_mode = \"control-group\"\noom_policy = \"kill\"\noom_score_adjust = -1000\n"
         "max_unsent_bytes = 4194320\nclient_write_timeout = \"0s\"\n")
    emit("edge_empty.toml", "")
    emit("edge_only_comment.toml", "# nothing\n")
    emit("edge_nul.toml", "[cells.a]\ncommand = [\"/bin/true\0\"]\n")
    emit("edge_bad_utf8.toml", "[cells.\xff]\n")
    emit("edge_deep_nesting.toml", "a = " + "[" * 200 + "]" * 200 + "\n")
    emit("edge_huge_integers.toml",
         "[cells.a]\ncommand = [\"/bin/true\"]\nmax_concurrent = 9223372036854775807\n"
         "max_queue = -9223372036854775808\nqueue_timeout = \"99999999999999999999ms\"\n")
    emit("edge_crlf.toml", "[cells.a]\r\ncommand = [\"/bin/true\"]\r\n")
    emit("edge_unterminated.toml", "[cells.a]\ncommand = [\"/bin/true\n")


def notify_seeds():
    def emit(name, text):
        write("notify_message_fuzzer", name, text if isinstance(text, bytes) else text.encode())

    emit("ready", "READY=1")
    emit("ready_status_mainpid", "READY=1\nSTATUS=serving\nMAINPID=4242\n")
    emit("reloading", "RELOADING=1\n")
    emit("stopping", "STOPPING=1\n")
    emit("watchdog", "WATCHDOG=1")
    emit("watchdog_trigger", "WATCHDOG=trigger\n")
    emit("errno", "ERRNO=2\nSTATUS=failed: ENOENT\n")
    emit("status_empty", "STATUS=\n")
    emit("status_utf8", "STATUS=caf\xc3\xa9 \xf0\x9f\x9a\x80".encode("latin-1"))
    emit("status_bad_utf8", b"STATUS=\xed\xa0\x80\n")
    emit("mainpid_big", "MAINPID=2147483648\n")
    emit("mainpid_19_digits", "MAINPID=1234567890123456789\n")
    emit("errno_negative", "ERRNO=-1\n")
    emit("unknown_names", "FDSTORE=1\nEXTEND_TIMEOUT_USEC=5000000\nlower=1\n=x\nNOEQUALS\n\n")
    emit("duplicates", "STATUS=a\nSTATUS=b\nMAINPID=1\nMAINPID=2\nREADY=1\nREADY=1\n")
    emit("nul_byte", b"READY=1\0STATUS=x")
    emit("at_limit", "STATUS=" + "x" * (4096 - 7))
    emit("past_limit", "STATUS=" + "x" * (4096 - 6))


def http_seeds():
    # http_request_fuzzer reads byte 0 as its limits and byte 1 as the seed of the piece sizes; the
    # rest is the byte stream (tests/http/request_parser_fuzzer.cc). 0xff: the largest limits.
    def emit(name, stream, limits=0xFF, pieces=0x5A):
        write("http_request_fuzzer", name, bytes([limits, pieces]) + stream)

    emit("get", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    emit("curl_post", b"POST /charge HTTP/1.1\r\nHost: 127.0.0.1:8081\r\nUser-Agent: curl/7.88.1\r\n"
         b"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"order\": 42}")
    emit("pipelined", b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\n"
         b"Content-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    emit("chunked", b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer-Field: t\r\n\r\n")
    emit("expect", b"PUT /f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc")
    emit("http10", b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    emit("cl_te", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
    emit("obs_fold", b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n")
    emit("small_limits", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde", limits=0x11)
    # The request line's version: none (HTTP/0.9), another major (505), HTTP/1.x above 1.1, and
    # HTTP/1.0 without Host (forwarded with one added).
    emit("http09_no_version", b"GET /x\r\n\r\n")
    emit("http2_version", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n")
    emit("http12_version", b"GET / HTTP/1.2\r\nHost: x\r\n\r\n")
    emit("http10_no_host", b"GET /items HTTP/1.0\r\nAccept: */*\r\n\r\n")
    # Issue 23's classes: trailer fields that would repeat or frame the head, bare CR in the head
    # and in chunk lines, a LF in a chunk extension, a TAB in the target, a GET with a body.
    emit("trailer_fields", b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"2\r\nok\r\n0\r\nHost: evil\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
    emit("bare_cr_head", b"GET / HTTP/1.1\r\nHost: x\r\nX-A:\rX-B: 1\r\n\r\n")
    emit("bare_cr_chunk", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"2\rXok\r\n0\r\n\r\n")
    emit("lf_in_chunk_ext", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"2;a\nb\r\nok\r\n0\r\n\r\n")
    emit("no_crlf_after_data", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"2\r\nokXY0\r\n\r\n")
    emit("tab_in_target", b"GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n")
    emit("get_with_body", b"GET /search HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n"
         b"GET /admin HTTP/1.1\r\nA: b\r\n")


def relay_seeds():
    # http_response_relay_fuzzer reads byte 0 as the request and client (bit 0 HEAD, bit 1 the client
    # keeps alive, bit 2 it speaks HTTP/1.1, bit 3 the worker closes after its last byte) and byte 1
    # as the seed of the piece sizes; the rest is what the worker sends
    # (tests/http/response_relay_fuzzer.cc). 0x06: a GET from a keep-alive HTTP/1.1 client.
    def emit(name, stream, flags=0x06, pieces=0x5A):
        write("http_response_relay_fuzzer", name, bytes([flags, pieces]) + stream)

    emit("gunicorn_close", b"HTTP/1.1 200 OK\r\nServer: gunicorn\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
         b"Connection: close\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
         flags=0x0E)
    emit("node_keep_alive", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
         b"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"a\r\nitem list\n\r\n0\r\n\r\n")
    emit("http_server_close_delimited", b"HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6 Python/3.11.2\r\n\r\nall of it",
         flags=0x0A)
    emit("http10_client_chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
         flags=0x02)
    emit("chunked_ext_trailers", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
         b"5;ext=\"v\"\r\nhello\r\n6\r\n world\r\n0\r\nX-T: t\r\n\r\n")
    emit("keep_alive_twice", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
         b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nb", pieces=0x07)
    emit("head_with_length", b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", flags=0x07)
    emit("head_with_body_sent", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", flags=0x07)
    emit("no_content", b"HTTP/1.1 204 No Content\r\n\r\n")
    emit("no_content_with_body", b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\nContent-Length: 44\r\n\r\n"
         b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled")
    emit("no_content_chunked", b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    emit("not_modified_with_length", b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 8\r\n\r\nsmuggled")
    emit("interims", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
         b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", pieces=0x03)
    emit("interim_with_length", b"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nhello"
         b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    emit("switching_protocols", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n")
    emit("space_before_colon", b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"2\r\nok\r\n0\r\n\r\n")
    emit("space_before_colon_alone", b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok")
    emit("cl_and_te", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    emit("te_not_chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nbytes until close", flags=0x0E)
    emit("bare_cr_status", b"HTTP/1.1 200 OK\rContent-Length: 2\r\n\r\nok")
    emit("bare_cr_head_end", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\rXok")
    emit("bare_cr_chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\rXok\r\n0\r\n\r\n")
    emit("obs_fold", b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok")
    emit("connection_names_field", b"HTTP/1.1 200 OK\r\nConnection: X-Private\r\nX-Private: 1\r\nProxy-Foo: 2\r\n"
         b"Content-Length: 0\r\n\r\n")
    emit("short_status", b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n")
    emit("cut_short", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", flags=0x0E)


if __name__ == "__main__":
    frame_seeds()
    http_seeds()
    relay_seeds()
    config_seeds()
    notify_seeds()
