"""A local HTTP server that speaks the Messages API (JSON and SSE streaming), driven by a script.

The script is a function of (request number, request body) returning a Reply: a message (text and
tool_use blocks), an HTTP error, a stream that breaks with an error event, or a stall longer than
the client's timeout. Every request is kept (headers and body) for the test to inspect; an
exception in the script is kept too and answered with a 400, so the agent stops and the test fails
with the script's message.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    blocks: list[dict[str, Any]] = field(default_factory=list)  # {"type": "text"|"tool_use", ...}
    stop_reason: str = "end_turn"
    status: int = 200  # an HTTP error when not 200
    error_type: str = "api_error"
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    stall_s: float = 0.0  # sleep before answering (past the client's timeout: a timeout)
    break_stream: bool = False  # SSE: an overloaded error event after message_start
    usage: dict[str, int] = field(
        default_factory=lambda: {
            "input_tokens": 1200,
            "output_tokens": 300,
            "cache_creation_input_tokens": 2000,
            "cache_read_input_tokens": 5000,
        }
    )


def text(body: str) -> dict[str, Any]:
    return {"type": "text", "text": body}


def tool_use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def error(status: int, error_type: str, message: str, **headers: str) -> Reply:
    return Reply(status=status, error_type=error_type, message=message, headers=headers)


@dataclass
class Request:
    headers: dict[str, str]
    body: dict[str, Any]


class MessagesAPI:
    def __init__(self, script: Callable[[int, dict[str, Any]], Reply]) -> None:
        self.script = script
        self.requests: list[Request] = []
        self.failures: list[str] = []
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with api.lock:
                    api.requests.append(Request({k.lower(): v for k, v in self.headers.items()}, body))
                    number = len(api.requests)
                try:
                    reply = api.script(number, body)
                except Exception as exc:  # the script's check failed: stop the agent, keep the reason
                    api.failures.append(f"request {number}: {type(exc).__name__}: {exc}")
                    reply = error(400, "invalid_request_error", f"script: {exc}")
                api.answer(self, reply, number, bool(body.get("stream")))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> MessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- answers -------------------------------------------------------------------------------

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply, number: int, stream: bool) -> None:
        if reply.stall_s:
            time.sleep(reply.stall_s)
        if reply.status != 200:
            payload = {"type": "error", "error": {"type": reply.error_type, "message": reply.message}}
            self._send(handler, reply.status, "application/json", json.dumps(payload).encode(), reply.headers)
            return
        message = {
            "id": f"msg_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": reply.blocks,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": reply.usage,
        }
        if not stream:
            self._send(handler, 200, "application/json", json.dumps(message).encode())
            return
        self._send(handler, 200, "text/event-stream", b"".join(sse_events(message, reply.break_stream)))

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, kind: str, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        handler.send_response(status)
        handler.send_header("content-type", kind)
        handler.send_header("content-length", str(len(data)))
        handler.send_header("request-id", "req_test")
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def sse_events(message: dict[str, Any], break_stream: bool) -> list[bytes]:
    """The stream the API sends for a message: start, each block in pieces, delta with the stop reason, stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [event("message_start", {"type": "message_start", "message": start})]
    if break_stream:
        overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return [*out, event("error", overloaded)]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            out.append(
                event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            words = block["text"].split(" ")
            for i in range(0, len(words), 4):
                piece = " ".join(words[i : i + 4]) + (" " if i + 4 < len(words) else "")
                out.append(
                    event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                    )
                )
        else:
            shell = {**block, "input": {}}
            out.append(
                event("content_block_start", {"type": "content_block_start", "index": index, "content_block": shell})
            )
            raw = json.dumps(block["input"])
            for i in range(0, len(raw), 200):
                out.append(
                    event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": raw[i : i + 200]},
                        },
                    )
                )
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    out.append(event("message_stop", {"type": "message_stop"}))
    return out
