"""A scripted stand-in for the Anthropic Messages API, for tests that drive the real SDK.

    python scripted_anthropic.py SCRIPT.json REQUESTS.jsonl

Binds 127.0.0.1 on a free port and prints the port as the first line of stdout (the caller's only
synchronisation). Each POST /v1/messages pops the next entry of SCRIPT (a JSON list) and answers with it:
{"status": 200, "body": {...}, "delay_s": 0.0, "headers": {"retry-after-ms": "1"}} (all keys optional;
an error status without a body gets an API-shaped error body). Every request is appended to REQUESTS as one
JSON line {"path", "headers", "body", "entry"} before it is answered, so tests can assert what was sent.
An exhausted script answers 500 with an error naming it. Runs until killed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class _State:
    def __init__(self, script: list[dict[str, Any]], log_path: Path) -> None:
        self.script = script
        self.log_path = log_path
        self.lock = threading.Lock()
        self.count = 0


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: stdout carries only the port
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            with state.lock:
                index = state.count
                state.count += 1
                entry = state.script.pop(0) if state.script and self.path.startswith("/v1/messages") else None
                record = {"path": self.path, "headers": dict(self.headers.items()), "body": body, "entry": index}
                with state.log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
            if entry is None:
                entry = {"status": 500, "body": _error(500, f"script exhausted at request {index} ({self.path})")}
            if entry.get("delay_s"):
                time.sleep(float(entry["delay_s"]))
            status = int(entry.get("status", 200))
            payload = entry.get("body")
            if payload is None and status >= 400:
                payload = _error(status, f"scripted HTTP {status}")
            data = json.dumps(payload if payload is not None else {}).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_scripted_{index}")
                for k, v in (entry.get("headers") or {}).items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                pass

    return Handler


def _error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def main(argv: list[str]) -> int:
    script = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    state = _State(list(script), Path(argv[2]))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
