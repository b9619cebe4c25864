#!/usr/bin/env python3
"""A corral daemon client with nothing but Python's standard library.

HTTP/1.1 and JSON over the daemon's unix socket (http.client on an
AF_UNIX socket); the API is described in docs/api/openapi.yaml and served
at GET /v1/openapi.json.

    python3 corral_client.py [--socket /run/corral/corral.sock] --repo DIR

creates a session over DIR, runs a command with its output streamed, reads
and writes a file, prints the change set, reviews it (a dry run: nothing
is written to DIR) and removes the session. The caller's uid owns the
session; DIR must be readable by it.
"""

import argparse
import base64
import http.client
import json
import socket
import sys


class CorralError(Exception):
    """An error answer: kind (invalid, refused, not_found, conflict, busy,
    ...), the HTTP status and the message corral's CLI prints."""

    def __init__(self, status, error):
        super().__init__(error.get("message", ""))
        self.status = status
        self.kind = error.get("kind")
        self.error = error


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=300):
        super().__init__("corral", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Client:
    def __init__(self, path="/run/corral/corral.sock"):
        self.path = path

    def _request(self, method, url, body=None, accept="application/json"):
        conn = UnixHTTPConnection(self.path)
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, url, body=data, headers=headers)
        resp = conn.getresponse()
        if resp.status >= 300:
            payload = json.loads(resp.read() or b"{}")
            conn.close()
            raise CorralError(resp.status, payload.get("error", {}))
        return conn, resp

    def call(self, method, url, body=None):
        conn, resp = self._request(method, url, body)
        try:
            raw = resp.read()
            if resp.getheader("Content-Type", "").startswith("application/json"):
                return json.loads(raw)
            return raw.decode()
        finally:
            conn.close()

    def version(self):
        return self.call("GET", "/v1/version")

    def create_session(self, repo, **capability):
        return self.call("POST", "/v1/sessions", dict(repo=repo, **capability))

    def remove_session(self, sid):
        return self.call("DELETE", "/v1/sessions/" + sid)

    def exec_streamed(self, sid, argv, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer):
        """Runs argv; output is written to stdout/stderr as it arrives.
        Returns the result (exit code, limits hit, the change set)."""
        conn, resp = self._request("POST", "/v1/sessions/%s/exec" % sid,
                                   {"argv": argv, "stream": True}, accept="application/x-ndjson")
        try:
            if not resp.getheader("Content-Type", "").startswith("application/x-ndjson"):
                result = json.loads(resp.read())  # answered before any output
                stdout.write(base64.b64decode(result.get("stdout", "")))
                stderr.write(base64.b64decode(result.get("stderr", "")))
                return result
            for line in resp:
                event = json.loads(line)
                if "stdout" in event:
                    stdout.write(base64.b64decode(event["stdout"]))
                    stdout.flush()
                elif "stderr" in event:
                    stderr.write(base64.b64decode(event["stderr"]))
                    stderr.flush()
                elif "result" in event:
                    return event["result"]
                elif "error" in event:
                    raise CorralError(200, event["error"])
            raise CorralError(0, {"kind": "failed", "message": "the stream ended without a result"})
        finally:
            conn.close()

    def read(self, sid, path, **window):
        return self.call("POST", "/v1/sessions/%s/files:read" % sid, dict(path=path, **window))

    def write(self, sid, path, content, expected_sha256=None):
        body = {"path": path, "content": content}
        if expected_sha256:
            body["expected_sha256"] = expected_sha256
        return self.call("POST", "/v1/sessions/%s/files:write" % sid, body)

    def diff(self, sid, fmt="json"):
        return self.call("GET", "/v1/sessions/%s/diff?format=%s" % (sid, fmt))

    def apply(self, sid, approve=(), dry_run=False):
        return self.call("POST", "/v1/sessions/%s/apply" % sid, {"approve": list(approve), "dry_run": dry_run})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", default="/run/corral/corral.sock")
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    c = Client(args.socket)

    print("daemon:", c.version()["version"])
    s = c.create_session(args.repo)
    sid = s["id"]
    print("session:", sid, "writable:", s["scope"] or "nothing")
    try:
        result = c.exec_streamed(sid, ["ls", "-la"])
        print("exit code:", result["exit_code"])
        try:
            c.exec_streamed(sid, ["sh", "-c", "id"])
        except CorralError as e:
            print("refused as expected:", e.kind, "-", e)
        readme = c.read(sid, "README.md")
        print("README.md:", readme["size"], "bytes, sha256", readme["sha256"][:12])
        w = c.write(sid, "openwiki/python.md", "# Written from Python\n")
        print("wrote", w["path"], "created" if w["created"] else "replaced")
        cs = c.diff(sid)
        print("change set:", [ch["path"] for ch in cs["changes"]])
        print(c.diff(sid, "patch"), end="")
        report = c.apply(sid)
        for item in report["items"]:
            print("review:", item["risk"]["level"], item["kind"], item["path"], "approve with", item["token"])
        tokens = [item["token"] for item in report["items"]]
        report = c.apply(sid, approve=tokens, dry_run=True)
        print("dry run:", [(i["path"], i["status"]) for i in report["items"]], "written:", report["written"])
    finally:
        removed = c.remove_session(sid)
        print("removed", removed["removed"], "patch kept at", removed.get("patch", "-"))
    print("python client: ok")


if __name__ == "__main__":
    main()
