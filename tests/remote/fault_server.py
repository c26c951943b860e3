#!/usr/bin/python3
"""A small HTTP server for the remote tests, on 127.0.0.1 only: it serves
the files of a folder with Range, ETag and If-Match as a static server does,
and injects one fault chosen by the first path segment:

  /ok/FILE              no fault
  /drop/FILE            the first answer for each range sends half its body, then closes
  /503/FILE             the first two answers for each range are 503
  /503-always/FILE      every range answer is 503
  /slow/FILE            the first answer for each range sends its headers, then nothing
  /slow-always/FILE     every range answer sends its headers, then nothing
  /norange/FILE         Range is ignored: 200 with the whole file
  /change/FILE          after the first request the file is another (new ETag; If-Match honoured: 412)
  /change-noifmatch/FILE  the same, If-Match ignored (the new ETag and bytes are sent)
  /redirect/FILE        302 to http://localhost:PORT/ok/FILE (another origin)
  /wrongrange/FILE      206 with the bytes of another range than asked for

Every request is logged, one JSON object a line, to --log: path, range,
status, body bytes sent, and whether credentials came with it.

  fault_server.py --root DIR --port-file FILE --log FILE [--tls CERT KEY]
"""
import argparse
import hashlib
import http.server
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time

lock = threading.Lock()
seen = {}  # (fault, path, range) -> answers given
args = None


def log(entry):
    with lock, open(args.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def count(self, fault, path, rng):
        with lock:
            k = (fault, path, rng)
            seen[k] = seen.get(k, 0) + 1
            return seen[k]

    def send_bytes(self, status, headers, body, cut=None, stall=False):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        sent = 0
        if stall:
            self.wfile.flush()
            time.sleep(30)
            self.close_connection = True
        elif cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            sent = cut
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif not self.command == "HEAD":
            self.wfile.write(body)
            sent = len(body)
        return sent

    def serve(self, head):
        parts = self.path.split("?")[0].lstrip("/").split("/", 1)
        fault, name = (parts[0], parts[1]) if len(parts) == 2 else ("ok", parts[0])
        rng = self.headers.get("Range", "")
        creds = bool(self.headers.get("Authorization") or self.headers.get("x-amz-security-token"))
        entry = {"path": self.path, "fault": fault, "range": rng, "credentials": creds,
                 "host": self.headers.get("Host", "")}
        file = os.path.realpath(os.path.join(args.root, name))
        if not file.startswith(os.path.realpath(args.root) + os.sep) or not os.path.isfile(file):
            entry.update(status=404, sent=self.send_bytes(404, {}, b"not found\n"))
            return log(entry)
        if fault == "redirect":
            to = f"http://localhost:{self.server.server_address[1]}/ok/{name}"
            entry.update(status=302, sent=self.send_bytes(302, {"Location": to}, b""))
            return log(entry)
        data = open(file, "rb").read()
        n = self.count(fault, name, "any")
        if fault.startswith("change") and n > 1:
            data = bytes((b ^ 0x5A) for b in data)  # another version of the object
        etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        if_match = self.headers.get("If-Match")
        if fault == "change" and if_match and if_match != etag:
            entry.update(status=412, sent=self.send_bytes(412, {"ETag": etag}, b""))
            return log(entry)
        headers = {"ETag": etag, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if not rng or fault == "norange":
            entry.update(status=200, sent=self.send_bytes(200, headers, data))
            return log(entry)
        first, last = rng.split("=", 1)[1].split("-")
        first = int(first)
        last = min(int(last) if last else len(data) - 1, len(data) - 1)
        if first >= len(data):
            entry.update(status=416, sent=self.send_bytes(416, {"Content-Range": f"bytes */{len(data)}"}, b""))
            return log(entry)
        k = self.count(fault, name, rng)
        if fault == "503" and k <= 2 or fault == "503-always":
            entry.update(status=503, sent=self.send_bytes(503, {}, b"busy\n"))
            return log(entry)
        if fault == "wrongrange":
            first, last = max(0, first - 1), max(0, last - 1)
        body = data[first:last + 1]
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        cut = len(body) // 2 if fault == "drop" and k == 1 and len(body) > 1 else None
        stall = fault == "slow-always" or (fault == "slow" and k == 1)
        entry.update(status=206, sent=self.send_bytes(206, headers, body, cut=cut, stall=stall))
        log(entry)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that drops a stalled or cut answer is the point of the fault


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--tls", nargs=2)
    args = ap.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls[0], args.tls[1])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    # Bounded: the test stops it, and it stops by itself after 10 minutes.
    threading.Timer(600, lambda: os._exit(0)).start()
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
