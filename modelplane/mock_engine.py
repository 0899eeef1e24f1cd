"""A mock OpenAI/Anthropic-compatible inference engine, standard library only: its endpoints, the model names
it answers (vLLM's --served-model-name) and how it refuses a request are in docs/mock-engine.md.

The demo stack (stacks/Pulumi.demo.yaml) embeds this file verbatim as the engine container's args and runs it
as `python -u -c <source>` in a pinned `python` image: no image build, and no other module to import.
tests/test_mock_engine.py checks the two never drift. Locally: `python -m modelplane.mock_engine`.
"""

import argparse
import contextlib
import json
import math
import os
import socket
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 1 << 20  # bytes; a larger request body is a 413
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ANTHROPIC_ROLES = ("user", "assistant")
ANTHROPIC_TYPES = {404: "not_found_error", 413: "request_too_large", 500: "api_error"}
GET_PATHS = ("/health", "/v1/models")  # the other paths (POST) are those of FIELDS
Event = tuple[str | None, Any]  # a server-sent event: its name (or None) and its payload


def _text(content: Any) -> str:
    """Flatten an OpenAI/Anthropic content value (string or list of parts) to plain text."""
    if isinstance(content, list):
        texts = (p.get("text") if isinstance(p, dict) else str(p) for p in content)
        return " ".join(t if isinstance(t, str) else "" for t in texts)
    return content if isinstance(content, str) else ""


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(map(check, v))


_strings, _token_ids = _list_of(lambda s: isinstance(s, str)), _list_of(_int)
_text_blocks = _list_of(lambda b: isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))

STR, BOOL, INT, NUM, OBJ, ARR = "a string", "a boolean", "an integer", "a number", "an object", "an array"
STR_OR_STRS = "a string or an array of strings"
TYPES: dict[str, Callable[[Any], bool]] = {  # expected type, as error messages name it: its check (null: not given)
    STR: lambda v: isinstance(v, str),
    BOOL: lambda v: isinstance(v, bool),
    INT: _int,
    NUM: lambda v: _int(v) or (isinstance(v, float) and math.isfinite(v)),
    OBJ: lambda v: isinstance(v, dict),
    ARR: lambda v: isinstance(v, list),
    "an array of strings": _strings,
    STR_OR_STRS: lambda v: isinstance(v, str) or _strings(v),
    "a string or an array of text blocks": lambda v: isinstance(v, str) or _text_blocks(v),
    "a string or an array of strings or tokens": lambda v: (  # or of token ids, or of arrays of token ids
        isinstance(v, str) or _strings(v) or _token_ids(v) or _list_of(_token_ids)(v)
    ),
}
Fields = dict[str, tuple[Any, ...]]  # field: (expected type[, minimum[, maximum]]), checked in this order
_OPENAI: Fields = {"model": (STR,), "stream": (BOOL,), "stream_options": (OBJ,), "max_tokens": (INT, 1)}
_OPENAI |= {"temperature": (NUM, 0, 2), "top_p": (NUM, 0, 1), "n": (INT, 1, 128), "presence_penalty": (NUM, -2, 2)}
_OPENAI |= {"frequency_penalty": (NUM, -2, 2), "seed": (INT,), "stop": (STR_OR_STRS,), "user": (STR,)}
_CHAT: Fields = {"messages": (ARR,), "max_completion_tokens": (INT, 1), "logprobs": (BOOL,)}
_CHAT |= {"top_logprobs": (INT, 0, 20), "tools": (ARR,), "response_format": (OBJ,), "metadata": (OBJ,)}
_COMPLETION: Fields = {"prompt": ("a string or an array of strings or tokens",), "echo": (BOOL,), "suffix": (STR,)}
_COMPLETION |= {"logprobs": (INT, 0, 5), "best_of": (INT, 1, 20)}
_MESSAGES: Fields = {"model": (STR,), "max_tokens": (INT, 1), "messages": (ARR,)}
_MESSAGES |= {"system": ("a string or an array of text blocks",), "stream": (BOOL,), "temperature": (NUM, 0, 1)}
_MESSAGES |= {"top_p": (NUM, 0, 1), "top_k": (INT, 0), "stop_sequences": ("an array of strings",), "metadata": (OBJ,)}
_MESSAGES |= {"tools": (ARR,), "tool_choice": (OBJ,), "thinking": (OBJ,)}
FIELDS: dict[str, tuple[tuple[str, ...], Fields]] = {  # path: (required fields, its fields)
    "/v1/chat/completions": (("model", "messages"), _OPENAI | _CHAT),
    "/v1/completions": (("model", "prompt"), _OPENAI | _COMPLETION),
    "/v1/messages": (("model", "max_tokens", "messages"), _MESSAGES),
}


def _kind(value: Any) -> str:
    """A JSON value's type, as error messages name it (a boolean first: Python's bool is an int)."""
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a decimal"), (str, "a string"), (list, "an array"))
    return next((kind for cls, kind in kinds if isinstance(value, cls)), "an object")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _event(kind: str, **fields: Any) -> Event:
    """An Anthropic server-sent event: its name, and the same as the payload's type."""
    return kind, {"type": kind, **fields}


@dataclass(eq=False)
class ApiError(Exception):
    """A refused request: HTTP status, message, OpenAI's param and code; close drops keep-alive."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None
    close: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)


class Engine(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-engine/1.0"
    timeout = 30  # seconds per socket read or write (the server's conn_timeout overrides it)
    started = body_read = False  # per request: response begun; request body consumed
    server: "Server"
    wait: float  # this connection's timeout: the server's conn_timeout, else Engine.timeout

    def setup(self) -> None:
        super().setup()
        self.wait = self.server.conn_timeout or self.timeout
        self.connection.settimeout(self.wait)

    def __getattr__(self, name: str) -> Callable[[], None]:  # every method, known or not, goes through _handle
        if name.startswith("do_"):  # (a 405, not http.server's 501)
            return self._handle
        raise AttributeError(name)

    @property
    def anthropic(self) -> bool:
        return getattr(self, "path", "").startswith("/v1/messages")

    def handle_one_request(self) -> None:
        self.started, self.body_read, self.path, self.headers = False, False, "", HTTPMessage()
        try:
            super().handle_one_request()
        except OSError:  # the client reset or stalled the connection: nobody is left to answer
            self.close_connection = True
        except Exception:
            self.log_error("internal error:\n%s", traceback.format_exc())
            self.send_error(500)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The http.server's own refusals (bad request line, headers too long...) as JSON."""
        self.log_error("code %d, message %s", code, message)
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":  # answer with a status line
            self.request_version = self.protocol_version
        self._fail(ApiError(code, message or self.responses.get(code, ("error",))[0], close=True))

    def _start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.started = True
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        content = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        close = [("Connection", "close")] if self.close_connection else []
        self._start(status, [*content, *(headers or {}).items(), *close])
        if self.command != "HEAD":
            self.wfile.write(data)

    def _unread(self) -> bool:
        """Whether request body bytes may be left unread (then the connection cannot be reused)."""
        length = self.headers.get("Content-Length", "0").strip()
        return not self.body_read and (length != "0" or "Transfer-Encoding" in self.headers)

    def _fail(self, exc: ApiError) -> None:
        """Answer an ApiError in the shape of the path's API, unless a response has already begun."""
        closing = exc.close or self._unread()  # an unread body would be parsed as the next request
        drain = closing and not self.body_read and exc.status != 408
        if closing or self.started:
            self.close_connection = True
        if self.started:
            return
        if self.anthropic:
            kind = ANTHROPIC_TYPES.get(exc.status, "invalid_request_error")
            body: Any = {"type": "error", "error": {"type": kind, "message": exc.message}}
        else:
            kind = "server_error" if exc.status >= 500 else "invalid_request_error"
            body = {"error": {"message": exc.message, "type": kind, "param": exc.param, "code": exc.code}}
        try:
            self._json(exc.status, body, exc.headers)
            if drain:
                self._linger()
        except OSError:
            self.close_connection = True

    def _linger(self) -> None:
        """Stop sending, then drain what the client sends for a moment (a close with bytes unread resets)."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(min(self.wait, 1))
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and self.connection.recv(65536):
                pass

    def _sse(self, events: list[Event]) -> None:
        """Stream (event name or None, payload) pairs as server-sent events, then close."""
        headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close")]
        self._start(200, headers)
        self.close_connection = True
        for event, payload in events:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            self.wfile.write((f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode())
            self.wfile.flush()

    def _handle(self) -> None:
        try:
            self._route(self.path.split("?", 1)[0])
            if self._unread():  # a GET with a body
                self._linger()
        except ApiError as exc:
            self._fail(exc)
        except TimeoutError:
            self._fail(ApiError(408, "timed out reading the request", code="request_timeout", close=True))
        except ConnectionError:
            self.close_connection = True
        except Exception:
            self.log_error("internal error on %s %s:\n%s", self.command, self.path, traceback.format_exc())
            self._fail(ApiError(500, "internal server error", code="internal_error", close=True))

    def _route(self, path: str) -> None:
        if path not in GET_PATHS and path not in FIELDS:
            raise ApiError(404, f"Invalid URL ({self.command} {path})")
        allowed = "GET, HEAD" if path in GET_PATHS else "POST"
        if self.command not in allowed.split(", "):
            message = f"Method {self.command} not allowed for {path}; allowed: {allowed}"
            raise ApiError(405, message, headers={"Allow": allowed})
        if path in GET_PATHS and self._unread():  # a GET with a body: answer, then close
            self.close_connection = True
        if path == "/health":
            return self._json(200, {"status": "ok"})
        server = self.server
        if path == "/v1/models":
            data = [
                {"id": n, "object": "model", "created": server.started, "owned_by": "modelplane"} for n in server.models
            ]
            return self._json(200, {"object": "list", "data": data})
        req = self._body()
        self._validate(path, req)
        if req["model"] not in server.models:  # a 404 as vLLM and OpenAI (and Anthropic on /v1/messages) answer it
            shown = req["model"] if len(req["model"]) <= 100 else req["model"][:100] + "..."
            message = f"model: {shown}" if self.anthropic else f"The model `{shown}` does not exist."
            raise ApiError(404, message, "model", "model_not_found")
        model = server.models[0]  # as vLLM: replies name the first served name
        reply = f"Hello from {model}: served by {server.pod}"
        words = [w + " " for w in reply.split(" ")]
        words[-1] = words[-1].rstrip()
        answer = {"/v1/chat/completions": self._chat, "/v1/completions": self._completion}.get(path, self._messages)
        answer(req, model, reply, words)

    def _body(self) -> dict[str, Any]:
        """Read and parse the JSON object body, within MAX_BODY."""
        if "Transfer-Encoding" in self.headers:
            raise ApiError(411, "Transfer-Encoding is not supported: send the body with a Content-Length", close=True)
        lengths = {v.strip() for v in self.headers.get_all("Content-Length") or []}
        if not lengths:
            raise ApiError(411, "a request body with a Content-Length is required", close=True)
        length = lengths.pop()
        if lengths or not length or not set(length) <= set("0123456789"):
            raise ApiError(400, "Content-Length must be a single non-negative integer", close=True)
        if len(length) > 15 or int(length) > MAX_BODY:
            raise ApiError(413, f"request body over {MAX_BODY} bytes", close=True)
        raw = self.rfile.read(int(length))
        self.body_read = True
        if len(raw) < int(length):
            raise ApiError(400, "request body shorter than its Content-Length", close=True)
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype and ctype != "application/json" and not ctype.endswith("+json"):
            raise ApiError(415, f"Content-Type must be application/json, not {ctype[:100]}")
        try:
            req = json.loads(raw, parse_constant=_no_constant)
        except RecursionError:
            raise ApiError(400, "invalid JSON body: nested too deeply") from None
        except ValueError as exc:
            raise ApiError(400, f"invalid JSON body: {exc}") from None
        if not isinstance(req, dict):
            raise ApiError(400, f"the request body must be a JSON object, not {_kind(req)}")
        return req

    def _missing(self, param: str) -> ApiError:
        message = f"{param}: Field required" if self.anthropic else f"Missing required parameter: '{param}'."
        return ApiError(400, message, param, "missing_required_parameter")

    def _invalid(self, param: str, expected: str, value: Any, code: str = "invalid_type") -> ApiError:
        if self.anthropic:
            message = f"{param}: Input should be {expected}"
        elif code == "invalid_type":
            message = f"Invalid type for '{param}': expected {expected}, but got {_kind(value)} instead."
        else:
            message = f"Invalid value for '{param}': expected {expected}."
        return ApiError(400, message, param, code)

    def _field(self, obj: dict[str, Any], key: str, param: str, expected: str, required: bool = False) -> Any:
        value = obj.get(key)
        if value is None:
            if required:
                raise self._missing(param)
        elif not TYPES[expected](value):
            raise self._invalid(param, expected, value)
        return value

    def _validate(self, path: str, req: dict[str, Any]) -> None:
        required, fields = FIELDS[path]
        for name, (expected, *bounds) in fields.items():
            value = self._field(req, name, name, expected, name in required)
            low, high = ([*bounds, None, None])[:2]
            if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
                expected = f"a value >= {low}" if high is None else f"a value from {low} to {high}"
                raise self._invalid(name, expected, value, "invalid_value")
        if not req["model"]:
            raise self._missing("model")
        self._field(req.get("stream_options") or {}, "include_usage", "stream_options.include_usage", BOOL)
        if "messages" not in fields:
            return
        if not req["messages"]:
            raise self._invalid("messages", "at least one message", [], "empty_array")
        roles = ANTHROPIC_ROLES if self.anthropic else OPENAI_ROLES
        for i, message in enumerate(req["messages"]):
            at = f"messages[{i}]"
            if not isinstance(message, dict):
                raise self._invalid(at, OBJ, message)
            role = self._field(message, "role", at + ".role", STR, True)
            if role not in roles:
                raise self._invalid(at + ".role", "one of " + ", ".join(roles), role, "invalid_value")
            content = message.get("content")
            if content is None and role == "assistant" and not self.anthropic:
                continue  # an assistant turn that only calls tools
            if isinstance(content, list):
                for j, part in enumerate(content):
                    self._part(part, f"{at}.content[{j}]")
            elif content is None:
                raise self._missing(at + ".content")
            elif not isinstance(content, str):
                raise self._invalid(at + ".content", "a string or an array of content parts", content)

    def _part(self, part: Any, at: str) -> None:
        if not isinstance(part, dict):
            raise self._invalid(at, OBJ, part)
        if self._field(part, "type", at + ".type", STR, True) == "text":
            self._field(part, "text", at + ".text", STR, True)

    def _chat(self, req: dict[str, Any], model: str, reply: str, words: list[str]) -> None:
        prompt = " ".join(_text(m.get("content")) for m in req.get("messages") or [] if isinstance(m, dict))
        usage = {"prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(reply)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": model}
        if not req.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            return self._json(200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})

        def chunk(delta: dict[str, str], finish: str | None = None) -> Event:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return None, {**base, "object": "chat.completion.chunk", "choices": [choice]}

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": w}) for w in words] + [chunk({}, "stop")]
        if (req.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
        self._sse([*events, (None, "[DONE]")])

    def _completion(self, req: dict[str, Any], model: str, reply: str, words: list[str]) -> None:
        usage = {"prompt_tokens": _tokens(_text(req.get("prompt"))), "completion_tokens": _tokens(reply)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": f"cmpl-{uuid.uuid4().hex[:24]}", "object": "text_completion", "created": int(time.time())}
        base["model"] = model
        if not req.get("stream"):
            choice = {"index": 0, "text": reply, "logprobs": None, "finish_reason": "stop"}
            return self._json(200, {**base, "choices": [choice], "usage": usage})
        choices = [{"index": 0, "text": w, "logprobs": None, "finish_reason": None} for w in words]
        choices.append({"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"})
        self._sse([*((None, {**base, "choices": [choice]}) for choice in choices), (None, "[DONE]")])

    def _messages(self, req: dict[str, Any], model: str, reply: str, words: list[str]) -> None:
        turns = " ".join(_text(m.get("content")) for m in req.get("messages") or [] if isinstance(m, dict))
        usage = {"input_tokens": _tokens(_text(req.get("system")) + " " + turns), "output_tokens": _tokens(reply)}
        message: dict[str, Any] = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant"}
        message |= {"model": model, "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn"}
        message |= {"stop_sequence": None, "usage": usage}
        if not req.get("stream"):
            return self._json(200, message)
        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        end = {"stop_reason": "end_turn", "stop_sequence": None}
        events = [
            _event("message_start", message=start),
            _event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            _event("ping"),
            *(_event("content_block_delta", index=0, delta={"type": "text_delta", "text": w}) for w in words),
            _event("content_block_stop", index=0),
            _event("message_delta", usage={"output_tokens": usage["output_tokens"]}, delta=end),
            _event("message_stop"),
        ]
        self._sse(events)


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a thread per connection, never waited for
    request_queue_size = 1024  # listen backlog (socketserver's default, 5, resets bursts of clients)

    def __init__(self, address: tuple[str, int], models: list[str], pod: str, timeout: float | None) -> None:
        super().__init__(address, Engine)
        self.models, self.model, self.pod, self.conn_timeout = models, models[0], pod, timeout
        self.started = int(time.time())  # the models' `created`


def make_server(
    host: str = "0.0.0.0",
    port: int = 8000,
    pod: str | None = None,
    models: list[str] | None = None,
    timeout: float | None = None,
) -> Server:
    """Bind (but do not start) the engine; pod defaults to env HOSTNAME, models (the names it answers, the first
    reported in replies) to [env MODEL_NAME or "mock"], timeout (seconds per socket read or write) to Engine.timeout."""
    models = list(models or [os.environ.get("MODEL_NAME") or "mock"])
    return Server((host, port), models, pod or os.environ.get("HOSTNAME") or socket.gethostname(), timeout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Mock OpenAI/Anthropic-compatible inference engine")
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    names = "the model names it answers, as vLLM's flag (default: env MODEL_NAME, else mock)"
    parser.add_argument("--served-model-name", nargs="+", metavar="NAME", dest="models", help=names)
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, models=args.models)
    # flushed: a pipe or a log file would otherwise hold the line until the engine stops
    print(f"mock engine {server.model!r} on {args.host}:{server.server_address[1]} as pod {server.pod}", flush=True)
    with server, contextlib.suppress(KeyboardInterrupt):  # on Ctrl-C: stop, and close the socket
        server.serve_forever()


if __name__ == "__main__":
    main()
