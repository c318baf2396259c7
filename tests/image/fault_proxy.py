#!/usr/bin/env python3
"""A loopback HTTP proxy in front of docker-registry that injects faults.

usage: fault_proxy.py --port P --upstream HOST:PORT --log FILE --mode MODE
                      [--count N] [--rate BYTES_PER_S] [--tick S] [--slow-for S]

Modes (blob = GET /v2/.../blobs/..., manifest = /v2/.../manifests/...):
  pass            forward everything
  cut             the first blob response of more than 64 KiB stops after
                  half its body (Content-Length stays), the rest is forwarded
  cut-then-200    like cut, then Range headers are dropped (the registry
                  answers 200 with the whole blob)
  tamper-manifest flip one byte of manifest bodies fetched by tag
  child-size      by-tag index bodies: first entry's size + 1, with a
                  matching Docker-Content-Digest
  config          flip one byte of the config blob
  layer-plus-one  append one byte to layer blobs (Content-Length too)
  regzip          serve layer blobs decompressed and gzipped again
  content-type    manifest responses carry the other manifest type
  429             the first --count manifest requests (-1: all) answer 429
                  with Retry-After: 1 and ratelimit headers
  500             the first --count requests answer 500
  slow            forward blob bodies at --rate bytes per second, one write
                  every --tick seconds (default 0.1), for the first
                  --slow-for seconds of each body (default: all of it)
  stall           the first --count blob responses (-1: all) of more than
                  64 KiB stop after half their body and send nothing more,
                  keeping the connection open until the client closes it
  warning         manifest responses carry Warning: 299 - "..." headers
  insufficient-scope  the first request carrying a Bearer token answers 401
                  error="insufficient_scope" for a wider scope (--realm)
Every request is logged to FILE as a JSON line:
{"method", "path", "range", "authorization", "status"}.
"""
import argparse
import gzip
import hashlib
import http.client
import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
lock = threading.Lock()
state = {"faults": 0, "cut_done": False, "configs": set(), "layers": set()}

MANIFEST_RE = re.compile(r"^/v2/(.+)/manifests/([^/]+)$")
BLOB_RE = re.compile(r"^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$")
OTHER_TYPE = {
    "application/vnd.oci.image.manifest.v1+json":
        "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json":
        "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json":
        "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json":
        "application/vnd.oci.image.index.v1+json",
}


def take_fault():
    with lock:
        if args.count >= 0 and state["faults"] >= args.count:
            return False
        state["faults"] += 1
        return True


def learn(body):
    """Remembers which blobs are configs and which are layers."""
    try:
        doc = json.loads(body)
    except ValueError:
        return
    with lock:
        if isinstance(doc.get("config"), dict):
            state["configs"].add(doc["config"].get("digest"))
        for layer in doc.get("layers") or []:
            state["layers"].add(layer.get("digest"))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def record(self, status):
        with lock, open(args.log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "range": self.headers.get("Range"),
                                "authorization": self.headers.get("Authorization"),
                                "status": status}) + "\n")

    def reply(self, status, headers, body, send_body=True):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if send_body and body:
            self.wfile.write(body)

    def do_HEAD(self):
        self.handle_request(False)

    def do_GET(self):
        self.handle_request(True)

    def handle_request(self, is_get):
        mode = args.mode
        manifest = MANIFEST_RE.match(self.path)
        blob = BLOB_RE.match(self.path)
        if mode == "429" and manifest and take_fault():
            self.record(429)
            body = b'{"errors":[{"code":"TOOMANYREQUESTS","message":"You have reached your pull rate limit."}]}'
            self.reply(429, [("Content-Type", "application/json"), ("Retry-After", "1"),
                             ("RateLimit-Limit", "100;w=21600"),
                             ("RateLimit-Remaining", "0;w=21600"),
                             ("Docker-RateLimit-Source", "127.0.0.1"),
                             ("Content-Length", str(len(body)))], body, is_get)
            return
        if mode == "500" and take_fault():
            self.record(500)
            body = b'{"errors":[{"code":"UNKNOWN","message":"injected failure"}]}'
            self.reply(500, [("Content-Type", "application/json"),
                             ("Content-Length", str(len(body)))], body, is_get)
            return
        if (mode == "insufficient-scope" and manifest
                and (self.headers.get("Authorization") or "").startswith("Bearer ")
                and take_fault()):
            self.record(401)
            body = b'{"errors":[{"code":"DENIED","message":"insufficient scope"}]}'
            challenge = (f'Bearer realm="{args.realm}",service="test",'
                         f'scope="repository:{manifest.group(1)}:pull,push",'
                         'error="insufficient_scope"')
            self.reply(401, [("Content-Type", "application/json"),
                             ("WWW-Authenticate", challenge),
                             ("Content-Length", str(len(body)))], body, is_get)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        if mode == "cut-then-200" and state["cut_done"]:
            headers.pop("Range", None)
        conn = http.client.HTTPConnection(args.upstream, timeout=60)
        conn.request(self.command, self.path, headers=headers)
        up = conn.getresponse()
        self.record(up.status)
        out_headers = [(k, v) for k, v in up.getheaders()
                       if k.lower() not in ("connection", "transfer-encoding")]
        if not is_get:
            self.reply(up.status, out_headers, None, False)
            conn.close()
            return
        if blob and up.status in (200, 206) and mode == "slow":
            self.stream_slowly(up, out_headers)
            conn.close()
            return
        if blob and up.status in (200, 206) and mode == "stall":
            body = up.read()
            conn.close()
            if len(body) > 65536 and take_fault():
                self.stall(up.status, out_headers, body[:len(body) // 2])
            else:
                self.reply(up.status, out_headers, body)
            return
        body = up.read()
        conn.close()
        if manifest and mode == "warning":
            out_headers.append(("Warning", '299 - "this repository is deprecated"'))
            out_headers.append(("Warning", '199 - "not for users"'))
        if manifest and up.status == 200:
            learn(body)
            body, out_headers = self.tamper_manifest(manifest.group(2), body, out_headers)
        elif blob and up.status in (200, 206):
            body, out_headers, cut = self.tamper_blob(blob.group(2), body, out_headers)
            if cut:
                self.reply(up.status, out_headers, body[:len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
        self.reply(up.status, out_headers, body)

    def tamper_manifest(self, reference, body, headers):
        by_tag = not reference.startswith("sha256:")
        mode = args.mode
        if mode == "tamper-manifest" and by_tag:
            body = body.replace(b'"schemaVersion":2', b'"schemaVersion":2 ', 1) \
                if b'"schemaVersion":2' in body else body + b" "
            headers = set_header(headers, "Content-Length", str(len(body)))
        elif mode == "child-size" and by_tag and b'"manifests"' in body:
            doc = json.loads(body)
            doc["manifests"][0]["size"] += 1
            body = json.dumps(doc).encode()
            headers = set_header(headers, "Content-Length", str(len(body)))
            headers = set_header(headers, "Docker-Content-Digest",
                                 "sha256:" + hashlib.sha256(body).hexdigest())
        elif mode == "content-type":
            ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "")
            headers = set_header(headers, "Content-Type", OTHER_TYPE.get(ctype, ctype))
        return body, headers

    def tamper_blob(self, digest, body, headers):
        mode = args.mode
        with lock:
            is_config = digest in state["configs"]
            is_layer = digest in state["layers"]
        if mode in ("cut", "cut-then-200") and len(body) > 65536:
            with lock:
                if not state["cut_done"]:
                    state["cut_done"] = True
                    return body, headers, True
        if mode == "config" and is_config:
            body = bytes([body[0] ^ 0x01]) + body[1:]
        elif mode == "layer-plus-one" and is_layer:
            body = body + b"\0"
            headers = set_header(headers, "Content-Length", str(len(body)))
        elif mode == "regzip" and is_layer:
            raw = zlib.decompress(body, 16 + zlib.MAX_WBITS)
            body = gzip.compress(raw, compresslevel=1, mtime=12345)
            headers = set_header(headers, "Content-Length", str(len(body)))
        return body, headers, False

    def stream_slowly(self, up, headers):
        self.reply(up.status, headers, None, False)
        chunk = max(1, int(args.rate * args.tick))
        until = time.monotonic() + args.slow_for if args.slow_for >= 0 else None
        try:
            while True:
                fast = until is not None and time.monotonic() >= until
                data = up.read() if fast else up.read(chunk)
                if not data:
                    break
                self.wfile.write(data)
                self.wfile.flush()
                if not fast:
                    time.sleep(args.tick)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def stall(self, status, headers, head):
        """Sends the headers and `head`, then nothing until the client
        hangs up (it never sends more on this connection)."""
        self.reply(status, headers, head)
        self.wfile.flush()
        self.close_connection = True
        self.connection.settimeout(600)
        try:
            while self.connection.recv(65536):
                pass
        except OSError:
            pass


def set_header(headers, name, value):
    return [(k, v) for k, v in headers if k.lower() != name.lower()] + [(name, value)]


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--mode", default="pass")
    p.add_argument("--count", type=int, default=-1)
    p.add_argument("--rate", type=int, default=100000)
    p.add_argument("--tick", type=float, default=0.1)
    p.add_argument("--slow-for", type=float, default=-1)
    p.add_argument("--realm", default="")
    args = p.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
