"""Local HTTP servers speaking the OpenAI and Anthropic streaming wire protocols, for tests.

Driven through the official SDKs by the generator and loop tests: a real socket, real SSE.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = Callable[[BaseHTTPRequestHandler, threading.Event], None]


@dataclass
class FakeServer:
    """A local HTTP server answering each POST with the next step (the last step repeats)."""

    steps: list[Step]
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # ends slow steps at teardown

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                step = server.steps.pop(0) if len(server.steps) > 1 else server.steps[0]
                with contextlib.suppress(OSError):  # the client hung up (a timeout test): nothing to answer
                    step(self, server.release)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def sse(events: list[str], gap_s: float = 0.0) -> Step:
    def step(handler: BaseHTTPRequestHandler, release: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        for event in events:
            if gap_s and release.wait(gap_s):
                return
            handler.wfile.write(event.encode())
            handler.wfile.flush()

    return step


def status(code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Step:
    def step(handler: BaseHTTPRequestHandler, release: threading.Event) -> None:
        data = json.dumps(body).encode()
        handler.send_response(code)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return step


def silent(seconds: float) -> Step:
    def step(handler: BaseHTTPRequestHandler, release: threading.Event) -> None:
        release.wait(seconds)

    return step


# --- the two wire protocols -------------------------------------------------------------------


def openai_events(deltas: list[str], prompt_tokens: int = 1000, completion_tokens: int = 500) -> list[str]:
    def chunk(choices: list[Any], usage: Any = None) -> str:
        body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o", "choices": choices}
        return f"data: {json.dumps(body | ({'usage': usage} if usage else {}))}\n\n"

    events = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    events += [chunk([{"index": 0, "delta": {"content": d}, "finish_reason": None}]) for d in deltas]
    events.append(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": 1500}
    return [*events, chunk([], usage), "data: [DONE]\n\n"]


def anthropic_events(deltas: list[str], input_tokens: int = 1000, output_tokens: int = 500) -> list[str]:
    def event(name: str, body: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **body})}\n\n"

    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-test-1",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return [
        event("message_start", {"message": message}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        *[event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": d}}) for d in deltas],
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta",
            {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": output_tokens}},
        ),
        event("message_stop", {}),
    ]


def error_body(provider: str, kind: str, message: str) -> dict[str, Any]:
    if provider == "openai":
        return {"error": {"message": message, "type": kind, "code": None}}
    return {"type": "error", "error": {"type": kind, "message": message}}
