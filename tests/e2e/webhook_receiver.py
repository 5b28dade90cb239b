#!/usr/bin/env python3
"""A webhook receiver on loopback for tests/e2e/webhooks_test.sh.

Usage: webhook_receiver.py DIR [PORT]
Listens on 127.0.0.1, on PORT or a free port (written to DIR/port), and appends every call it gets to
DIR/calls.jsonl as {"path", "headers", "body"}. Behaviour by path:
  /ok...     200
  /flaky...  500 to the first two calls of each delivery id, then 200
  /hold...   the first call ever: writes DIR/held, then waits (up to 60 s) for DIR/release
             before answering 200 (the test kills the engine meanwhile); then 200
  /gone...   410
"""
import http.server
import json
import os
import sys
import threading
import time

out = sys.argv[1]
lock = threading.Lock()
seen = {}
held = [False]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode("utf-8")
        delivery = self.headers.get("X-Baton-Delivery", "")
        with lock:
            with open(os.path.join(out, "calls.jsonl"), "a") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers),
                                    "body": body}) + "\n")
            seen[delivery] = seen.get(delivery, 0) + 1
            n = seen[delivery]
            hold = self.path.startswith("/hold") and not held[0]
            if hold:
                held[0] = True
        status = 200
        if self.path.startswith("/flaky") and n <= 2:
            status = 500
        elif self.path.startswith("/gone"):
            status = 410
        elif hold:
            open(os.path.join(out, "held"), "w").close()
            deadline = time.time() + 60
            while not os.path.exists(os.path.join(out, "release")) and time.time() < deadline:
                time.sleep(0.05)
        try:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the caller is gone (killed): what the test wants


server = http.server.ThreadingHTTPServer(
    ("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Handler)
with open(os.path.join(out, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(out, "port.tmp"), os.path.join(out, "port"))
server.serve_forever()
