#!/usr/bin/python3
"""A stand-in for the Kubernetes API server, enough for the router's k8s:// discovery: HTTPS,
GET /api/v1/namespaces/NS/pods?labelSelector=... as a PodList, and with watch=1 as a chunked
stream of watch events that stays open. The test sends events with
POST /control/ROLE (body: one watch event's JSON), where ROLE is the value of the selector's
"role" label. Every request's Authorization header is appended to AUTH_LOG.

Usage: fake_kube_api.py PORT CERT KEY AUTH_LOG PODS_JSON
PODS_JSON: {"prefill": [["name", "ip", ready], ...], "decode": [...]}
"""
import json
import queue
import ssl
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, cert, key, auth_log, pods_file = sys.argv[1:6]
pods = json.load(open(pods_file))
events = {role: queue.Queue() for role in pods}
version = [1000]
lock = threading.Lock()


def pod(name, ip, ready):
    with lock:
        version[0] += 1
        rv = str(version[0])
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "yoco", "resourceVersion": rv},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with open(auth_log, "a") as f:
            f.write(self.headers.get("Authorization", "") + "\n")
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        role = q["labelSelector"][0].split("=")[-1]
        if "watch" not in q:
            items = [pod(*p) for p in pods[role]]
            for i in items:
                del i["kind"], i["apiVersion"]  # a list's items carry neither
            body = json.dumps({"kind": "PodList", "apiVersion": "v1",
                               "metadata": {"resourceVersion": str(version[0])},
                               "items": items}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while True:
            try:
                line = events[role].get(timeout=1).encode() + b"\n"
            except queue.Empty:
                continue
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

    def do_POST(self):
        role = self.path.rsplit("/", 1)[-1]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        event = {"type": body["type"], "object": pod(body["name"], body["ip"], body["ready"])}
        events[role].put(json.dumps(event))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
server.daemon_threads = True
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
