#!/usr/bin/env python3
"""A token endpoint for docker-registry's `silly` and `token` auth.

usage: token_server.py --port P --log FILE [--mode silly|jwt] [--field token|access_token]
                       [--expires N] [--user U --password W]
                       [--key K --cert C --issuer I --audience A]

GET /token?service=...&scope=...: answers {"<field>": TOKEN, "expires_in": N}.
silly: TOKEN is an opaque string (the registry accepts any). jwt: an RS256 JWT
with x5c = the cert, claims iss/sub/aud/exp/nbf/iat/jti/access from scope,
signed with `openssl dgst -sha256 -sign`. --user/--password require that
Basic auth (else 401). POST /token (OAuth2 refresh_token grant) answers an
access_token too. Every request is logged to FILE as one JSON line:
{"method", "path", "query", "form", "authorization"}.
"""
import argparse
import base64
import json
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
log_lock = threading.Lock()
counter = [0]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(scopes, account):
    der = subprocess.run(["openssl", "x509", "-in", args.cert, "-outform", "DER"],
                         check=True, capture_output=True).stdout
    header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
    access = []
    for scope in scopes:
        parts = scope.split(":")
        if len(parts) >= 3:
            access.append({"type": parts[0], "name": ":".join(parts[1:-1]),
                           "actions": parts[-1].split(",")})
    now = int(time.time())
    counter[0] += 1
    claims = {"iss": args.issuer, "sub": account or "anonymous", "aud": args.audience,
              "exp": now + args.expires, "nbf": now - 10, "iat": now,
              "jti": f"nsbox-test-{counter[0]}", "access": access}
    signing_input = (b64url(json.dumps(header).encode()) + "." +
                     b64url(json.dumps(claims).encode())).encode()
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", args.key], input=signing_input,
                         check=True, capture_output=True).stdout
    return signing_input.decode() + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def record(self, query, form):
        entry = {"method": self.command, "path": urllib.parse.urlsplit(self.path).path,
                 "query": query, "form": form,
                 "authorization": self.headers.get("Authorization")}
        with log_lock, open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def authorized(self):
        if not args.user:
            return True
        want = "Basic " + base64.b64encode(f"{args.user}:{args.password}".encode()).decode()
        return self.headers.get("Authorization") == want

    def answer(self, scopes, account):
        if not self.authorized():
            body = b'{"details":"bad credentials"}'
            self.send_response(401)
        else:
            self.send_response(200)
            counter[0] += 1
            token = jwt(scopes, account) if args.mode == "jwt" else f"silly-{counter[0]}"
            body = json.dumps({args.field: token, "expires_in": args.expires}).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        self.record(query, None)
        self.answer(query.get("scope", []), (query.get("account") or [None])[0])

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        self.record({}, form)
        self.answer(form.get("scope", []), None)


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--mode", default="silly", choices=["silly", "jwt"])
    p.add_argument("--field", default="access_token", choices=["token", "access_token"])
    p.add_argument("--expires", type=int, default=60)
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--key")
    p.add_argument("--cert")
    p.add_argument("--issuer", default="nsbox-test-issuer")
    p.add_argument("--audience", default="nsbox-test")
    args = p.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
