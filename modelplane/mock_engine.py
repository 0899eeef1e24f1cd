"""A mock OpenAI/Anthropic-compatible inference engine, standard library only.

Delivery: the demo stack (stacks/Pulumi.demo.yaml) embeds this file verbatim as the engine
container's args and runs it as `python -u -c <source>` in a pinned `python` image - no image
build. tests/test_mock_engine.py checks the two never drift. Locally:
`python -m modelplane.mock_engine --port 8000`.

Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions, /v1/completions (OpenAI)
and /v1/messages (Anthropic), each optionally streamed as server-sent events. Every reply says
which pod served it (env HOSTNAME). Like vLLM, it answers only the names it is started with
(`--served-model-name NAME [NAME ...]`, default env MODEL_NAME, else "mock"), lists them on
/v1/models and reports the first in replies; another `model` is a 404 (model_not_found).

Requests are checked like the real APIs, and every refusal is a JSON error in the shape of the
API the path belongs to (Anthropic's on /v1/messages, OpenAI's elsewhere): 400 for malformed
JSON, wrong types, missing fields or a bad Content-Length, 404 unknown path or model, 405 wrong
method (with Allow), 408 stalled body, 411 no Content-Length, 413 body over MAX_BODY, 415 non-JSON
Content-Type, 500 anything unexpected - never a traceback or a dropped connection. The listen
backlog holds hundreds of simultaneous clients; each socket read or write times out after
Engine.timeout seconds, so a stalled client cannot hold a thread.
"""
import argparse
import json
import math
import os
import socket
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20  # bytes; a larger request body is a 413
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ANTHROPIC_ROLES = ("user", "assistant")
ANTHROPIC_TYPES = {404: "not_found_error", 413: "request_too_large", 500: "api_error"}


def _text(content):
    """Flatten an OpenAI/Anthropic content value (string or list of parts) to plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join((p.get("text") if isinstance(p.get("text"), str) else "") if isinstance(p, dict)
                        else str(p) for p in content)
    return ""


def _tokens(text):
    return max(1, len(text.split()))


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _strings(v):
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def _prompt(v):
    return isinstance(v, str) or _strings(v) or isinstance(v, list) and (
        all(_int(t) for t in v) or all(isinstance(p, list) and all(_int(t) for t in p) for p in v))


TYPES = {  # expected type, as error messages name it: its check (null always means "not given")
    "a string": lambda v: isinstance(v, str),
    "a boolean": lambda v: isinstance(v, bool),
    "an integer": _int,
    "a number": lambda v: _int(v) or isinstance(v, float) and math.isfinite(v),
    "an object": lambda v: isinstance(v, dict),
    "an array": lambda v: isinstance(v, list),
    "an array of strings": _strings,
    "a string or an array of strings": lambda v: isinstance(v, str) or _strings(v),
    "a string or an array of text blocks": lambda v: isinstance(v, str) or isinstance(v, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in v),
    "a string or an array of strings or tokens": _prompt,
}
_OPENAI = {"model": ("a string",), "stream": ("a boolean",), "stream_options": ("an object",),
           "max_tokens": ("an integer", 1), "temperature": ("a number", 0, 2), "top_p": ("a number", 0, 1),
           "n": ("an integer", 1, 128), "presence_penalty": ("a number", -2, 2),
           "frequency_penalty": ("a number", -2, 2), "seed": ("an integer",),
           "stop": ("a string or an array of strings",), "user": ("a string",)}
FIELDS = {  # path: (required fields, {field: (expected type[, minimum[, maximum]])})
    "/v1/chat/completions": (("model", "messages"), dict(
        _OPENAI, messages=("an array",), max_completion_tokens=("an integer", 1), logprobs=("a boolean",),
        top_logprobs=("an integer", 0, 20), tools=("an array",), response_format=("an object",),
        metadata=("an object",))),
    "/v1/completions": (("model", "prompt"), dict(
        _OPENAI, prompt=("a string or an array of strings or tokens",), echo=("a boolean",),
        suffix=("a string",), logprobs=("an integer", 0, 5), best_of=("an integer", 1, 20))),
    "/v1/messages": (("model", "max_tokens", "messages"), {
        "model": ("a string",), "max_tokens": ("an integer", 1), "messages": ("an array",),
        "system": ("a string or an array of text blocks",), "stream": ("a boolean",),
        "temperature": ("a number", 0, 1), "top_p": ("a number", 0, 1), "top_k": ("an integer", 0),
        "stop_sequences": ("an array of strings",), "metadata": ("an object",), "tools": ("an array",),
        "tool_choice": ("an object",), "thinking": ("an object",)}),
}


def _kind(value):
    if isinstance(value, bool):
        return "a boolean"
    if _int(value):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


class ApiError(Exception):
    """A refused request: HTTP status, message, OpenAI's param and code; close drops keep-alive."""

    def __init__(self, status, message, param=None, code=None, close=False, headers=None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.close, self.headers = close, headers or {}


class Engine(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-engine/1.0"
    timeout = 30  # seconds per socket read or write (the server's conn_timeout overrides it)
    started = body_read = False  # per request: response begun; request body consumed

    def setup(self):
        self.timeout = getattr(self.server, "conn_timeout", None) or self.timeout
        super().setup()

    def __getattr__(self, name):  # every method, known or not, goes through _handle (405, not 501)
        if name.startswith("do_"):
            return self._handle
        raise AttributeError(name)

    @property
    def anthropic(self):
        return getattr(self, "path", "").startswith("/v1/messages")

    def handle_one_request(self):
        self.started = self.body_read = False
        self.path, self.headers = "", {}
        try:
            super().handle_one_request()
        except OSError:  # the client reset or stalled the connection: nobody is left to answer
            self.close_connection = True
        except Exception:
            self.log_error("internal error:\n%s", traceback.format_exc())
            self.send_error(500)

    def send_error(self, code, message=None, explain=None):
        """The http.server's own refusals (bad request line, headers too long...) as JSON."""
        self.log_error("code %d, message %s", code, message)
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":  # answer with a status line
            self.request_version = self.protocol_version
        self._fail(ApiError(code, message or self.responses.get(code, ("error",))[0], close=True))

    def _json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.started = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _unread(self):
        """Whether request body bytes may be left unread (then the connection cannot be reused)."""
        length = self.headers.get("Content-Length", "0").strip()
        return not self.body_read and (length != "0" or "Transfer-Encoding" in self.headers)

    def _fail(self, exc):
        """Answer an ApiError in the shape of the path's API, unless a response has already begun."""
        closing = exc.close or self._unread()  # an unread body would be parsed as the next request
        drain = closing and not self.body_read and exc.status != 408
        if closing or self.started:
            self.close_connection = True
        if self.started:
            return
        if self.anthropic:
            kind = ANTHROPIC_TYPES.get(exc.status, "invalid_request_error")
            body = {"type": "error", "error": {"type": kind, "message": exc.message}}
        else:
            kind = "server_error" if exc.status >= 500 else "invalid_request_error"
            body = {"error": {"message": exc.message, "type": kind, "param": exc.param, "code": exc.code}}
        try:
            self._json(exc.status, body, exc.headers)
            if drain:
                self._linger()
        except OSError:
            self.close_connection = True

    def _linger(self):
        """Stop sending, then drain what the client still sends (briefly), so that closing with
        unread bytes does not reset the connection before the client has read the error."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(min(self.timeout, 1))
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and self.connection.recv(65536):
                pass
        except OSError:
            pass

    def _sse(self, events):
        """Stream (event name or None, payload) pairs as server-sent events, then close."""
        self.started = True
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

    def _handle(self):
        try:
            self._route(self.path.split("?", 1)[0])
            if self._unread():  # a GET with a body
                self._linger()
        except ApiError as exc:
            self._fail(exc)
        except socket.timeout:
            self._fail(ApiError(408, "timed out reading the request", code="request_timeout", close=True))
        except ConnectionError:
            self.close_connection = True
        except Exception:
            self.log_error("internal error on %s %s:\n%s", self.command, self.path, traceback.format_exc())
            self._fail(ApiError(500, "internal server error", code="internal_error", close=True))

    def _route(self, path):
        routes = {"/health": "GET", "/v1/models": "GET", "/v1/chat/completions": "POST",
                  "/v1/completions": "POST", "/v1/messages": "POST"}
        if path not in routes:
            raise ApiError(404, f"Invalid URL ({self.command} {path})")
        allowed = "GET, HEAD" if routes[path] == "GET" else "POST"
        if self.command not in allowed.split(", "):
            raise ApiError(405, f"Method {self.command} not allowed for {path}; allowed: {allowed}",
                           headers={"Allow": allowed})
        if routes[path] == "GET" and self._unread():  # a GET with a body: answer, then close
            self.close_connection = True
        if path == "/health":
            return self._json(200, {"status": "ok"})
        if path == "/v1/models":
            models = [{"id": name, "object": "model", "created": self.server.started, "owned_by": "modelplane"}
                      for name in self.server.models]
            return self._json(200, {"object": "list", "data": models})
        req = self._body()
        self._validate(path, req)
        if req["model"] not in self.server.models:
            raise self._unknown_model(req["model"])
        model = self.server.models[0]  # as vLLM: replies name the first served name
        reply = f"Hello from {model}: served by {self.server.pod}"
        words = [w + " " for w in reply.split(" ")]
        words[-1] = words[-1].rstrip()
        {"/v1/chat/completions": self._chat, "/v1/completions": self._completion,
         "/v1/messages": self._messages}[path](req, model, reply, words)

    def _body(self):
        """Read and parse the JSON object body, within MAX_BODY."""
        if "Transfer-Encoding" in self.headers:
            raise ApiError(411, "Transfer-Encoding is not supported: send the body with a Content-Length",
                           close=True)
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

    def _unknown_model(self, model):
        """A name this engine does not serve: a 404 as vLLM and OpenAI (and Anthropic on /v1/messages) answer it."""
        shown = model if len(model) <= 100 else model[:100] + "..."
        message = f"model: {shown}" if self.anthropic else f"The model `{shown}` does not exist."
        return ApiError(404, message, "model", "model_not_found")

    def _missing(self, param):
        message = f"{param}: Field required" if self.anthropic else f"Missing required parameter: '{param}'."
        return ApiError(400, message, param, "missing_required_parameter")

    def _invalid(self, param, expected, value, code="invalid_type"):
        if self.anthropic:
            message = f"{param}: Input should be {expected}"
        elif code == "invalid_type":
            message = f"Invalid type for '{param}': expected {expected}, but got {_kind(value)} instead."
        else:
            message = f"Invalid value for '{param}': expected {expected}."
        return ApiError(400, message, param, code)

    def _field(self, obj, key, param, expected, required=False):
        value = obj.get(key)
        if value is None:
            if required:
                raise self._missing(param)
        elif not TYPES[expected](value):
            raise self._invalid(param, expected, value)
        return value

    def _validate(self, path, req):
        required, fields = FIELDS[path]
        for name, (expected, *bounds) in fields.items():
            value = self._field(req, name, name, expected, name in required)
            low, high = (bounds + [None, None])[:2]
            if value is not None and (low is not None and value < low or high is not None and value > high):
                expected = f"a value >= {low}" if high is None else f"a value from {low} to {high}"
                raise self._invalid(name, expected, value, "invalid_value")
        if not req["model"]:
            raise self._missing("model")
        options = req.get("stream_options") or {}
        self._field(options, "include_usage", "stream_options.include_usage", "a boolean")
        if "messages" not in fields:
            return
        if not req["messages"]:
            raise self._invalid("messages", "at least one message", [], "empty_array")
        roles = ANTHROPIC_ROLES if self.anthropic else OPENAI_ROLES
        for i, message in enumerate(req["messages"]):
            at = f"messages[{i}]"
            if not isinstance(message, dict):
                raise self._invalid(at, "an object", message)
            role = self._field(message, "role", at + ".role", "a string", True)
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

    def _part(self, part, at):
        if not isinstance(part, dict):
            raise self._invalid(at, "an object", part)
        if self._field(part, "type", at + ".type", "a string", True) == "text":
            self._field(part, "text", at + ".text", "a string", True)

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


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a thread per connection, never waited for
    request_queue_size = 1024  # listen backlog (socketserver's default, 5, resets bursts of clients)


def make_server(host="0.0.0.0", port=8000, pod=None, models=None, timeout=None):
    """Bind (but do not start) the engine; pod defaults to env HOSTNAME, models (the names it answers,
    the first reported in replies) to [env MODEL_NAME or "mock"], timeout (seconds per socket read or
    write) to Engine.timeout."""
    server = Server((host, port), Engine)
    server.conn_timeout = timeout
    server.pod = pod or os.environ.get("HOSTNAME") or socket.gethostname()
    server.models = list(models or [os.environ.get("MODEL_NAME") or "mock"])
    server.model = server.models[0]
    server.started = int(time.time())
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(description="Mock OpenAI/Anthropic-compatible inference engine")
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--served-model-name", nargs="+", metavar="NAME", dest="models",
                        help="the model names it answers, as vLLM's flag (default: env MODEL_NAME, else mock)")
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, models=args.models)
    print(f"mock engine {server.model!r} on {args.host}:{server.server_address[1]} as pod {server.pod}",
          flush=True)  # a pipe or a log file would otherwise hold the line until the engine stops
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
