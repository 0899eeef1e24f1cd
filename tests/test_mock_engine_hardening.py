"""The mock engine (modelplane/mock_engine.py) under malformed, hostile and concurrent traffic.

Every refusal is a JSON error in the shape of the API the path belongs to, with the right 4xx,
and the server keeps serving. Loopback only: every server binds 127.0.0.1 on a free port, every
socket has a timeout, every wait is bounded, and every server is shut down at the end.
"""
from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import anthropic
import openai
import pytest

from modelplane import mock_engine

POD = "mock-demo-hardening-engine-0"
TIMEOUT = 10.0
CHAT, COMPLETIONS, MESSAGES = "/v1/chat/completions", "/v1/completions", "/v1/messages"
HI = [{"role": "user", "content": "hi"}]
DROP = object()  # a field left out of the request


def serve(timeout=None):
    server = mock_engine.make_server("127.0.0.1", 0, pod=POD, timeout=timeout)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, thread


def stop(server, thread):
    server.shutdown()
    server.server_close()
    thread.join(TIMEOUT)


@pytest.fixture(scope="module")
def engine():
    server, thread = serve(timeout=5)
    try:
        yield server.server_address[1]
    finally:
        stop(server, thread)


def body(path, **fields):
    """A valid request for path, with fields overridden (DROP leaves one out)."""
    base = {"model": "mock"}
    base.update({CHAT: {"messages": HI}, COMPLETIONS: {"prompt": "hi"},
                 MESSAGES: {"max_tokens": 16, "messages": HI}}[path])
    base.update(fields)
    return {k: v for k, v in base.items() if v is not DROP}


def exchange(port, data: bytes, method="POST"):
    """Send raw bytes, read one response: (status, headers, body bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def post(port, path, payload, content_type="application/json"):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
    return exchange(port, head.encode() + b"Content-Length: %d\r\n\r\n" % len(data) + data)


def assert_json_error(status, headers, raw, path):
    """The error body of the API path belongs to: Anthropic's on /v1/messages, OpenAI's elsewhere."""
    assert 400 <= status < 600 and headers["content-type"] == "application/json"
    error = json.loads(raw)
    if path.startswith(MESSAGES):
        assert set(error) == {"type", "error"} and error["type"] == "error"
        assert set(error["error"]) == {"type", "message"}
    else:
        assert set(error) == {"error"} and set(error["error"]) == {"message", "type", "param", "code"}
    assert isinstance(error["error"]["message"], str) and error["error"]["message"]
    if path.startswith(MESSAGES):
        kind = {404: "not_found_error", 413: "request_too_large"}.get(status, "invalid_request_error")
    else:
        kind = "invalid_request_error" if status < 500 else "server_error"
    assert error["error"]["type"] == kind
    return error["error"]


def assert_alive(port):
    status, _, raw = post(port, CHAT, body(CHAT))
    assert status == 200 and f"served by {POD}" in json.loads(raw)["choices"][0]["message"]["content"]


NESTED = b'{"model": "mock", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
MALFORMED = [  # id, path, body (dict or raw bytes), status, what the message names
    ("bad-json", CHAT, b"{not json", 400, "JSON"),
    ("empty-body", CHAT, b"", 400, "JSON"),
    ("body-not-an-object", CHAT, b"[1, 2]", 400, "object"),
    ("nested-json", CHAT, NESTED, 400, "nested"),
    ("nested-json", MESSAGES, NESTED, 400, "nested"),
    ("nan", CHAT, b'{"model": "mock", "messages": [], "temperature": NaN}', 400, "NaN"),
    ("not-utf8", CHAT, b'{"model": "\xff\xfe"}', 400, "JSON"),
    ("model-missing", CHAT, body(CHAT, model=DROP), 400, "model"),
    ("model-empty", CHAT, body(CHAT, model=""), 400, "model"),
    ("model-not-a-string", CHAT, body(CHAT, model=5), 400, "model"),
    ("messages-missing", CHAT, body(CHAT, messages=DROP), 400, "messages"),
    ("messages-not-a-list", CHAT, body(CHAT, messages=5), 400, "messages"),
    ("messages-an-object", CHAT, body(CHAT, messages={"role": "user"}), 400, "messages"),
    ("messages-empty", CHAT, body(CHAT, messages=[]), 400, "messages"),
    ("message-not-an-object", CHAT, body(CHAT, messages=["hi"]), 400, "messages[0]"),
    ("message-without-role", CHAT, body(CHAT, messages=[{"content": "hi"}]), 400, "messages[0].role"),
    ("message-unknown-role", CHAT, body(CHAT, messages=[{"role": "wizard", "content": "hi"}]), 400, "role"),
    ("message-role-not-a-string", CHAT, body(CHAT, messages=[{"role": ["user"], "content": "hi"}]), 400, "role"),
    ("message-without-content", CHAT, body(CHAT, messages=[{"role": "user"}]), 400, "messages[0].content"),
    ("content-a-number", CHAT, body(CHAT, messages=[{"role": "user", "content": 5}]), 400, "content"),
    ("content-part-a-string", CHAT, body(CHAT, messages=[{"role": "user", "content": ["hi"]}]), 400,
     "content[0]"),
    ("content-part-without-type", CHAT, body(CHAT, messages=[{"role": "user", "content": [{"text": "hi"}]}]),
     400, "content[0].type"),
    ("text-part-without-text", CHAT, body(CHAT, messages=[{"role": "user", "content": [{"type": "text"}]}]),
     400, "content[0].text"),
    ("stream-not-a-bool", CHAT, body(CHAT, stream="yes"), 400, "stream"),
    ("stream-options-a-string", CHAT, body(CHAT, stream=True, stream_options="include_usage"), 400,
     "stream_options"),
    ("stream-options-a-list", CHAT, body(CHAT, stream=True, stream_options=[]), 400, "stream_options"),
    ("include-usage-not-a-bool", CHAT, body(CHAT, stream=True, stream_options={"include_usage": "yes"}), 400,
     "include_usage"),
    ("max-tokens-negative", CHAT, body(CHAT, max_tokens=-1), 400, "max_tokens"),
    ("max-tokens-zero", CHAT, body(CHAT, max_tokens=0), 400, "max_tokens"),
    ("max-tokens-a-float", CHAT, body(CHAT, max_tokens=1.5), 400, "max_tokens"),
    ("max-tokens-a-string", CHAT, body(CHAT, max_tokens="16"), 400, "max_tokens"),
    ("max-tokens-a-bool", CHAT, body(CHAT, max_tokens=True), 400, "max_tokens"),
    ("temperature-a-string", CHAT, body(CHAT, temperature="hot"), 400, "temperature"),
    ("temperature-out-of-range", CHAT, body(CHAT, temperature=3), 400, "temperature"),
    ("n-zero", CHAT, body(CHAT, n=0), 400, "'n'"),
    ("stop-a-number", CHAT, body(CHAT, stop=5), 400, "stop"),
    ("non-json-content-type", CHAT, b'{"model": "mock", "messages": []}', 415, "Content-Type"),
    ("prompt-missing", COMPLETIONS, body(COMPLETIONS, prompt=DROP), 400, "prompt"),
    ("prompt-an-object", COMPLETIONS, body(COMPLETIONS, prompt={"text": "hi"}), 400, "prompt"),
    ("prompt-mixed-list", COMPLETIONS, body(COMPLETIONS, prompt=["hi", {"a": 1}]), 400, "prompt"),
    ("model-missing", COMPLETIONS, body(COMPLETIONS, model=DROP), 400, "model"),
    ("echo-not-a-bool", COMPLETIONS, body(COMPLETIONS, echo="yes"), 400, "echo"),
    ("stream-not-a-bool", COMPLETIONS, body(COMPLETIONS, stream=1), 400, "stream"),
    ("model-missing", MESSAGES, body(MESSAGES, model=DROP), 400, "model"),
    ("max-tokens-missing", MESSAGES, body(MESSAGES, max_tokens=DROP), 400, "max_tokens"),
    ("max-tokens-negative", MESSAGES, body(MESSAGES, max_tokens=-5), 400, "max_tokens"),
    ("max-tokens-a-string", MESSAGES, body(MESSAGES, max_tokens="many"), 400, "max_tokens"),
    ("messages-missing", MESSAGES, body(MESSAGES, messages=DROP), 400, "messages"),
    ("messages-not-a-list", MESSAGES, body(MESSAGES, messages=5), 400, "messages"),
    ("messages-empty", MESSAGES, body(MESSAGES, messages=[]), 400, "messages"),
    ("message-system-role", MESSAGES, body(MESSAGES, messages=[{"role": "system", "content": "hi"}]), 400,
     "role"),
    ("message-without-content", MESSAGES, body(MESSAGES, messages=[{"role": "assistant"}]), 400, "content"),
    ("content-a-number", MESSAGES, body(MESSAGES, messages=[{"role": "user", "content": 5}]), 400, "content"),
    ("content-block-without-type", MESSAGES, body(MESSAGES, messages=[{"role": "user", "content": [{}]}]), 400,
     "type"),
    ("system-a-number", MESSAGES, body(MESSAGES, system=5), 400, "system"),
    ("system-block-not-text", MESSAGES, body(MESSAGES, system=[{"type": "image"}]), 400, "system"),
    ("stream-not-a-bool", MESSAGES, body(MESSAGES, stream="true"), 400, "stream"),
    ("temperature-out-of-range", MESSAGES, body(MESSAGES, temperature=1.5), 400, "temperature"),
    ("top-k-negative", MESSAGES, body(MESSAGES, top_k=-1), 400, "top_k"),
    ("stop-sequences-a-string", MESSAGES, body(MESSAGES, stop_sequences="END"), 400, "stop_sequences"),
    ("bad-json", MESSAGES, b"{not json", 400, "JSON"),
    ("non-json-content-type", MESSAGES, b"model=mock", 415, "Content-Type"),
]


@pytest.mark.parametrize("path, payload, status, named", [
    pytest.param(path, payload, status, named, id=f"{case}-{path.rsplit('/', 1)[1]}")
    for case, path, payload, status, named in MALFORMED])
def test_malformed_request_gets_json_4xx(engine, capsys, path, payload, status, named):
    content_type = "text/plain" if status == 415 else "application/json"
    got, headers, raw = post(engine, path, payload, content_type)
    assert got == status, raw
    error = assert_json_error(got, headers, raw, path)
    assert named in error["message"]
    if not path.startswith(MESSAGES) and error["code"] is not None:  # a parameter's fault: OpenAI names it
        assert named.strip("'") in error["param"]
        assert error["code"] in ("invalid_type", "invalid_value", "missing_required_parameter", "empty_array")
    assert_alive(engine)
    assert "Traceback" not in capsys.readouterr().err


BIG = mock_engine.MAX_BODY + 1
FRAMING = [  # id, raw request (after the request line's path), status
    ("content-length-missing", MESSAGES, b"", 411),
    ("content-length-negative", MESSAGES, b"Content-Length: -5\r\n", 400),
    ("content-length-not-a-number", CHAT, b"Content-Length: abc\r\n", 400),
    ("content-length-a-float", CHAT, b"Content-Length: 1.5\r\n", 400),
    ("content-length-huge", CHAT, b"Content-Length: 99999999999999999999999999999\r\n", 413),
    ("content-length-conflicting", CHAT, b"Content-Length: 2\r\nContent-Length: 3\r\n", 400),
    ("chunked", COMPLETIONS, b"Transfer-Encoding: chunked\r\n", 411),
]


@pytest.mark.parametrize("path, headers, status", [
    pytest.param(path, headers, status, id=case) for case, path, headers, status in FRAMING])
def test_bad_framing_gets_json_4xx_and_closes(engine, capsys, path, headers, status):
    got, response_headers, raw = exchange(
        engine, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + headers + b"\r\n{}")
    assert got == status, raw
    assert_json_error(got, response_headers, raw, path)
    assert response_headers["connection"] == "close"  # the body's extent is unknown
    assert_alive(engine)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_body_over_the_bound_is_a_413_not_a_reset(engine, path):
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {BIG}\r\n\r\n".encode()
    status, headers, raw = exchange(engine, head + b" " * BIG)
    assert status == 413 and headers["connection"] == "close"
    assert str(mock_engine.MAX_BODY) in assert_json_error(status, headers, raw, path)["message"]
    assert_alive(engine)


@pytest.mark.parametrize("request_line", [b"GARBAGE", b"GET /health HTTP/9.9", b"GET /" + b"x" * 70_000 + b" HTTP/1.1"])
def test_unparsable_request_gets_json_error(engine, request_line):
    status, headers, raw = exchange(engine, request_line + b"\r\nHost: 127.0.0.1\r\n\r\n")
    assert status in (400, 414, 505)
    assert_json_error(status, headers, raw, "/")
    assert_alive(engine)


def test_too_many_headers_gets_json_431(engine):
    status, headers, raw = exchange(engine, b"GET /health HTTP/1.1\r\n" + b"X-Pad: 1\r\n" * 200 + b"\r\n", "GET")
    assert status == 431
    assert_json_error(status, headers, raw, "/health")
    assert_alive(engine)


@pytest.mark.parametrize("method, path, allow", [
    ("PUT", CHAT, "POST"), ("DELETE", CHAT, "POST"), ("PATCH", COMPLETIONS, "POST"), ("GET", CHAT, "POST"),
    ("GET", MESSAGES, "POST"), ("DELETE", MESSAGES, "POST"), ("OPTIONS", MESSAGES, "POST"),
    ("POST", "/v1/models", "GET, HEAD"), ("PUT", "/health", "GET, HEAD"), ("BREW", "/v1/models", "GET, HEAD")])
def test_wrong_method_gets_json_405_with_allow(engine, method, path, allow):
    status, headers, raw = exchange(
        engine, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{{}}".encode(), method)
    assert status == 405 and headers["allow"] == allow
    assert method in assert_json_error(status, headers, raw, path)["message"]
    assert_alive(engine)


@pytest.mark.parametrize("method, path", [("GET", "/nope"), ("POST", "/v1/nope"), ("DELETE", "/v1/nope"),
                                          ("POST", "/v1/messages/nope"), ("GET", "/v1/models/mock/x")])
def test_unknown_path_gets_json_404_in_its_api_shape(engine, method, path):
    status, headers, raw = exchange(
        engine, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{{}}".encode(), method)
    assert status == 404
    assert path in assert_json_error(status, headers, raw, path)["message"]


def test_head_answers_headers_without_a_body(engine):
    status, headers, raw = exchange(engine, b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "HEAD")
    assert status == 200 and headers["content-type"] == "application/json" and raw == b""
    status, headers, raw = exchange(engine, f"HEAD {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(), "HEAD")
    assert status == 405 and headers["allow"] == "POST" and raw == b""


def test_get_with_a_body_is_answered_then_closed(engine):
    status, headers, raw = exchange(
        engine, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello", "GET")
    assert status == 200 and headers["connection"] == "close" and json.loads(raw) == {"status": "ok"}


def test_a_refused_request_keeps_the_connection_alive(engine):
    conn = http.client.HTTPConnection("127.0.0.1", engine, timeout=TIMEOUT)
    try:
        for payload, status in [(b"{not json", 400), (json.dumps(body(CHAT, messages=5)), 400),
                                (json.dumps(body(CHAT)), 200), (json.dumps(body(CHAT, stream=1)), 400),
                                (json.dumps(body(CHAT)), 200)]:
            conn.request("POST", CHAT, body=payload, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == status and response.getheader("Connection") != "close"
            response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path, fields", [
    (CHAT, {"stream": None, "stream_options": None, "max_tokens": None, "temperature": None}),
    (CHAT, {"messages": [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                         {"role": "assistant", "content": None, "tool_calls": []},
                         {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            "max_tokens": 5, "max_completion_tokens": 5, "temperature": 0.5, "top_p": 1, "n": 1, "stop": ["x"]}),
    (COMPLETIONS, {"prompt": ["a", "b"], "max_tokens": 5, "echo": False, "stop": "x"}),
    (COMPLETIONS, {"prompt": [1, 2, 3]}),
    (COMPLETIONS, {"prompt": [[1, 2], [3]]}),
    (MESSAGES, {"system": [{"type": "text", "text": "Be brief."}], "temperature": 1, "top_k": 0,
                "stop_sequences": ["END"], "metadata": {"user_id": "u"},
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                             {"role": "user", "content": [{"type": "text", "text": "again"}]}]}),
])
def test_valid_variants_are_served(engine, path, fields):
    status, headers, raw = post(engine, path, body(path, **fields))
    assert status == 200 and POD in raw.decode()


def test_official_clients_see_bad_request_errors(engine):
    with openai.OpenAI(base_url=f"http://127.0.0.1:{engine}/v1", api_key="sk-mock", max_retries=0,
                       timeout=TIMEOUT) as client:
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="mock", messages=[])
        assert raised.value.code == "empty_array" and raised.value.param == "messages"
        with pytest.raises(openai.BadRequestError) as raised:
            client.completions.create(model="mock", prompt="hi", max_tokens=-1)
        assert raised.value.param == "max_tokens"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("mock")
    with anthropic.Anthropic(base_url=f"http://127.0.0.1:{engine}", api_key="sk-ant-mock", max_retries=0,
                             timeout=TIMEOUT) as client:
        with pytest.raises(anthropic.BadRequestError) as raised:
            client.messages.create(model="mock", max_tokens=0, messages=HI)
        assert raised.value.body["error"]["type"] == "invalid_request_error"
        assert "max_tokens" in raised.value.body["error"]["message"]


@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_unexpected_error_is_a_json_500(engine, monkeypatch, capsys, path):
    def boom(self, *args):
        raise RuntimeError("boom")
    monkeypatch.setattr(mock_engine.Engine, "_chat", boom)
    monkeypatch.setattr(mock_engine.Engine, "_messages", boom)
    status, headers, raw = post(engine, path, body(path))
    assert status == 500 and headers["content-type"] == "application/json"
    error = json.loads(raw)["error"]
    assert error["type"] == ("api_error" if path == MESSAGES else "server_error") and "boom" not in error["message"]
    monkeypatch.undo()
    assert_alive(engine)
    assert "RuntimeError: boom" in capsys.readouterr().err  # logged on the server, not sent to the client


def test_bounds():
    assert mock_engine.Server.request_queue_size >= 1024 and mock_engine.Server.daemon_threads
    assert mock_engine.Engine.timeout == 30 and mock_engine.MAX_BODY == 1 << 20


CLIENTS = 200


def test_concurrent_clients_are_all_served(engine):
    """200 clients connect at once (the listen backlog must hold them) and each gets its completion."""
    start = threading.Barrier(CLIENTS, timeout=TIMEOUT)
    results, errors = [], []
    payload = json.dumps(body(CHAT))

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", engine, timeout=TIMEOUT)
        try:
            start.wait()
            conn.request("POST", CHAT, body=payload, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            results.append((response.status, response.read()))
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            errors.append(repr(exc))
        finally:
            conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, began + 3 * TIMEOUT - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "clients still running"
    assert errors == []
    assert len(results) == CLIENTS and all(status == 200 and POD.encode() in raw for status, raw in results)


SLOW = 1.5  # seconds: the per-socket timeout of the engine the slow-client tests start


@pytest.fixture
def slow_engine():
    server, thread = serve(timeout=SLOW)
    try:
        yield server.server_address[1]
    finally:
        stop(server, thread)


def still_open(sock):
    sock.settimeout(0.05)
    try:
        return sock.recv(1) != b""
    except socket.timeout:
        return True


@pytest.mark.parametrize("half", [
    pytest.param(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le", id="half-headers"),
    pytest.param(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
                 b'{"model": "mo', id="half-body"),
])
def test_slow_client_is_timed_out_without_blocking_others(slow_engine, half):
    with socket.create_connection(("127.0.0.1", slow_engine), timeout=TIMEOUT) as slow:
        slow.sendall(half)
        began = time.monotonic()
        for _ in range(5):
            assert_alive(slow_engine)
        assert time.monotonic() - began < SLOW and still_open(slow)  # others are served meanwhile
        slow.settimeout(SLOW + TIMEOUT)
        reply = b""
        while True:
            chunk = slow.recv(65536)
            if not chunk:
                break
            reply += chunk
        waited = time.monotonic() - began
    assert SLOW * 0.5 < waited < SLOW + TIMEOUT  # closed by the engine, after about its timeout
    if b"Content-Length: 100" in half:  # the request line was read: the client is told why
        status_line, _, rest = reply.partition(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 408")
        error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
        assert error["code"] == "request_timeout"
    else:
        assert reply == b""
    assert_alive(slow_engine)


def test_idle_keep_alive_connection_is_closed_after_the_timeout(slow_engine):
    conn = http.client.HTTPConnection("127.0.0.1", slow_engine, timeout=TIMEOUT)
    try:
        conn.request("GET", "/health")
        assert conn.getresponse().read() == b'{"status": "ok"}'
        sock, began = conn.sock, time.monotonic()
        sock.settimeout(SLOW + TIMEOUT)
        assert sock.recv(1) == b"" and time.monotonic() - began < SLOW + TIMEOUT
    finally:
        conn.close()
