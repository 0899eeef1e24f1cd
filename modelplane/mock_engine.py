"""A mock OpenAI/Anthropic-compatible inference engine, standard library only.

Delivery: the demo stack (stacks/Pulumi.demo.yaml) embeds this file verbatim as the engine
container's args and runs it as `python -u -c <source>` in a pinned `python` image - no image
build. tests/test_mock_engine.py checks the two never drift. Locally:
`python -m modelplane.mock_engine --port 8000`.

Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions, /v1/completions (OpenAI)
and /v1/messages (Anthropic), each optionally streamed as server-sent events. Every reply says
which pod served it (env HOSTNAME); the model id is env MODEL_NAME (default "mock").
"""
import argparse
import json
import os
import socket
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _text(content):
    """Flatten an OpenAI/Anthropic content value (string or list of parts) to plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return ""


def _tokens(text):
    return max(1, len(text.split()))


class Engine(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-engine/1.0"

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, message, kind="invalid_request_error"):
        if self.path.startswith("/v1/messages"):
            body = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            body = {"error": {"message": message, "type": kind, "code": status}}
        self._json(status, body)

    def _sse(self, events):
        """Stream (event name or None, payload) pairs as server-sent events, then close."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event, payload in events:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            self.wfile.write((f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode())
            self.wfile.flush()

    def do_GET(self):
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            model = {"id": self.server.model, "object": "model", "created": self.server.started,
                     "owned_by": "modelplane"}
            self._json(200, {"object": "list", "data": [model]})
        else:
            self._error(404, f"no route for GET {self.path}", "not_found_error")

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        routes = {"/v1/chat/completions": self._chat, "/v1/completions": self._completion,
                  "/v1/messages": self._messages}
        route = routes.get(self.path.split("?")[0])
        if route is None:
            return self._error(404, f"no route for POST {self.path}", "not_found_error")
        try:
            req = json.loads(raw or b"{}")
            if not isinstance(req, dict):
                raise ValueError("request body must be a JSON object")
        except ValueError as exc:
            return self._error(400, f"invalid JSON body: {exc}")
        model = req.get("model") or self.server.model
        reply = f"Hello from {model}: served by {self.server.pod}"
        words = [w + " " for w in reply.split(" ")]
        words[-1] = words[-1].rstrip()
        route(req, model, reply, words)

    def _chat(self, req, model, reply, words):
        prompt = " ".join(_text(m.get("content")) for m in req.get("messages") or [] if isinstance(m, dict))
        usage = {"prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(reply)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": model}
        if not req.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            return self._json(200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})

        def chunk(delta, finish=None):
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return None, {**base, "object": "chat.completion.chunk", "choices": [choice]}
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": w}) for w in words] + [chunk({}, "stop")]
        if (req.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
        self._sse(events + [(None, "[DONE]")])

    def _completion(self, req, model, reply, words):
        prompt = _text(req.get("prompt"))
        usage = {"prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(reply)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": f"cmpl-{uuid.uuid4().hex[:24]}", "object": "text_completion",
                "created": int(time.time()), "model": model}
        if not req.get("stream"):
            choice = {"index": 0, "text": reply, "logprobs": None, "finish_reason": "stop"}
            return self._json(200, {**base, "choices": [choice], "usage": usage})

        def chunk(text, finish=None):
            return None, {**base, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]}
        self._sse([chunk(w) for w in words] + [chunk("", "stop"), (None, "[DONE]")])

    def _messages(self, req, model, reply, words):
        prompt = _text(req.get("system")) + " " + " ".join(
            _text(m.get("content")) for m in req.get("messages") or [] if isinstance(m, dict))
        usage = {"input_tokens": _tokens(prompt), "output_tokens": _tokens(reply)}
        message = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                   "model": model, "content": [{"type": "text", "text": reply}],
                   "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}
        if not req.get("stream"):
            return self._json(200, message)
        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        events = [("message_start", {"type": "message_start", "message": start}),
                  ("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}),
                  ("ping", {"type": "ping"})]
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": w}}) for w in words]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "usage": {"output_tokens": usage["output_tokens"]},
                                      "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
                   ("message_stop", {"type": "message_stop"})]
        self._sse(events)


def make_server(host="0.0.0.0", port=8000, pod=None, model=None):
    """Bind (but do not start) the engine; pod and model default to env HOSTNAME and MODEL_NAME."""
    server = ThreadingHTTPServer((host, port), Engine)
    server.daemon_threads = True
    server.pod = pod or os.environ.get("HOSTNAME") or socket.gethostname()
    server.model = model or os.environ.get("MODEL_NAME") or "mock"
    server.started = int(time.time())
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(description="Mock OpenAI/Anthropic-compatible inference engine")
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port)
    print(f"mock engine {server.model!r} on {args.host}:{server.server_address[1]} as pod {server.pod}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
