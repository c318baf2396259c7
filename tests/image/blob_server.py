#!/usr/bin/env python3
"""Serves a directory like `python3 -m http.server`, logging every request
as a JSON line {"method", "path", "authorization"}, for the redirect test.

usage: blob_server.py --port P --dir D --log FILE
"""
import argparse
import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

log_lock = threading.Lock()


class Handler(SimpleHTTPRequestHandler):
    log_path = None

    def log_message(self, *a):
        pass

    def send_head(self):
        with log_lock, open(self.log_path, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "authorization": self.headers.get("Authorization")}) + "\n")
        return super().send_head()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--log", required=True)
    a = p.parse_args()
    Handler.log_path = a.log
    handler = functools.partial(Handler, directory=a.dir)
    ThreadingHTTPServer(("127.0.0.1", a.port), handler).serve_forever()


if __name__ == "__main__":
    main()
