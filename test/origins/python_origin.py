"""A tool-call origin whose messages are decoded by Python's json module (the last of two equal
keys kept, names matched exactly), as Python MCP servers read them. It runs every tools/call it
decodes, counting it by tool name, and reports what it ran and every request line it was sent
(GET /__report). Standard library only; listens on 127.0.0.1, prints its port."""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
ran = {}
lines = []


def answer(message):
    reply = {"jsonrpc": "2.0", "id": message.get("id")}
    method = message.get("method")
    if method == "tools/call":
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        name = params.get("name") if isinstance(params.get("name"), str) else ""
        with lock:
            ran[name] = ran.get(name, 0) + 1
        reply["result"] = {"content": [{"type": "text", "text": "ran " + name}]}
    elif method == "initialize":
        reply["result"] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "python-origin", "version": "1.0.0"},
        }
    else:
        reply["result"] = {}
    return reply


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with lock:
            lines.append("GET " + self.path)
            report = {"ran": dict(ran), "lines": list(lines)}
        if self.path == "/__report":
            self.send_json(200, report)
        else:
            self.send_json(405, {})

    def do_POST(self):
        with lock:
            lines.append("POST " + self.path)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            parsed = json.loads(body)
        except ValueError:
            self.send_json(400, {})
            return
        messages = parsed if isinstance(parsed, list) else [parsed]
        replies = [answer(m) for m in messages if isinstance(m, dict) and m.get("id") is not None]
        if not replies:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_json(200, replies if isinstance(parsed, list) else replies[0])

    def do_DELETE(self):
        self.send_json(200, {})


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
