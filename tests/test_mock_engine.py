"""The demo's mock inference engine (modelplane/mock_engine.py), driven by the official clients.

Loopback only: every server binds 127.0.0.1 on a free port, every wait is bounded, and every
server is shut down at the end.
"""
from __future__ import annotations

import http.client
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anthropic
import openai
import pytest
import yaml

from modelplane import mock_engine

REPO = Path(__file__).resolve().parent.parent
SOURCE = (REPO / "modelplane" / "mock_engine.py").read_text()
POD = "mock-demo-be445-engine-0"
TIMEOUT = 10.0
ANTHROPIC_EVENTS = ["message_start", "content_block_start", "ping", "content_block_delta",
                    "content_block_stop", "message_delta", "message_stop"]


@pytest.fixture(scope="module")
def engine():
    server = mock_engine.make_server("127.0.0.1", 0, pod=POD)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)


@pytest.fixture
def oai(engine):
    with openai.OpenAI(base_url=f"http://127.0.0.1:{engine}/v1", api_key="sk-mock", max_retries=0,
                       timeout=TIMEOUT) as client:
        yield client


@pytest.fixture
def claude(engine):
    with anthropic.Anthropic(base_url=f"http://127.0.0.1:{engine}", api_key="sk-ant-mock", max_retries=0,
                             timeout=TIMEOUT) as client:
        yield client


def request(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_health(engine):
    status, headers, body = request(engine, "GET", "/health")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"status": "ok"}


def test_models_list(oai):
    assert [m.id for m in oai.models.list()] == ["mock"]


def test_chat_completion(oai):
    reply = oai.chat.completions.create(model="mock", messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who served this?"}])
    assert reply.object == "chat.completion" and reply.model == "mock"
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    assert f"served by {POD}" in choice.message.content
    assert reply.usage.prompt_tokens == 5 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_chat_completion_stream(oai):
    stream = oai.chat.completions.create(model="mock", messages=[{"role": "user", "content": "hi"}],
                                         stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert f"served by {POD}" in text and len(chunks) > 4
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 1


def test_chat_completion_stream_helper(oai):
    with oai.chat.completions.stream(model="mock", messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_completion()
    assert f"served by {POD}" in final.choices[0].message.content


def test_completion(oai):
    reply = oai.completions.create(model="mock", prompt="Say hello")
    assert reply.object == "text_completion" and reply.choices[0].finish_reason == "stop"
    assert f"served by {POD}" in reply.choices[0].text
    assert reply.usage.prompt_tokens == 2


def test_completion_stream(oai):
    chunks = list(oai.completions.create(model="mock", prompt="Say hello", stream=True))
    assert f"served by {POD}" in "".join(c.choices[0].text for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_messages(claude):
    reply = claude.messages.create(model="mock", max_tokens=64, system="Be brief.",
                                   messages=[{"role": "user", "content": [{"type": "text", "text": "Who?"}]}])
    assert reply.type == "message" and reply.role == "assistant" and reply.model == "mock"
    assert [block.type for block in reply.content] == ["text"]
    assert f"served by {POD}" in reply.content[0].text
    assert reply.stop_reason == "end_turn"
    assert reply.usage.input_tokens == 3 and reply.usage.output_tokens > 0


def test_messages_stream(claude):
    with claude.messages.stream(model="mock", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert f"served by {POD}" in text and final.content[0].text == text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0


def test_messages_stream_event_order(claude, engine):
    events = list(claude.messages.create(model="mock", max_tokens=64, stream=True,
                                         messages=[{"role": "user", "content": "hi"}]))
    kinds = [e.type for e in events]  # the SDK drops pings
    assert dedupe(kinds) == [k for k in ANTHROPIC_EVENTS if k != "ping"] and kinds.count("content_block_delta") > 1
    body = json.dumps({"model": "mock", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    status, headers, raw = request(engine, "POST", "/v1/messages", body, {"Content-Type": "application/json"})
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    wire = []
    for block in filter(None, raw.decode().split("\n\n")):
        event, data = block.split("\n")
        assert event.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data.removeprefix("data: "))["type"] == event.removeprefix("event: ")
        wire.append(event.removeprefix("event: "))
    assert dedupe(wire) == ANTHROPIC_EVENTS


def dedupe(kinds):
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]


def test_stream_headers(engine):
    body = json.dumps({"model": "mock", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    status, headers, raw = request(engine, "POST", "/v1/chat/completions", body,
                                   {"Content-Type": "application/json"})
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    assert "Content-Length" not in headers and headers["Connection"] == "close"
    lines = [line for line in raw.decode().split("\n\n") if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"


@pytest.mark.parametrize("method, path", [("GET", "/nope"), ("POST", "/v1/nope"), ("GET", "/v1/messages/nope")])
def test_unknown_paths_are_json_404s(engine, method, path):
    status, headers, body = request(engine, method, path, b"{}" if method == "POST" else None)
    assert status == 404 and headers["Content-Type"] == "application/json"
    assert "error" in json.loads(body)


@pytest.mark.parametrize("path, shape", [("/v1/chat/completions", {"error"}), ("/v1/completions", {"error"}),
                                         ("/v1/messages", {"type", "error"})])
def test_bad_json_is_a_400(engine, path, shape):
    status, _, body = request(engine, "POST", path, b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and set(json.loads(body)) == shape


@pytest.mark.parametrize("model", ["ml-team/mock", "Mock", "mock ", "qwen3-8b"])
def test_other_model_names_are_404s_as_vllm_answers_them(oai, claude, model):
    with pytest.raises(openai.NotFoundError) as chat:
        oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert chat.value.body == {"message": f"The model `{model}` does not exist.", "type": "invalid_request_error",
                               "param": "model", "code": "model_not_found"}
    with pytest.raises(openai.NotFoundError) as completion:
        oai.completions.create(model=model, prompt="hi", stream=True)
    assert completion.value.body["code"] == "model_not_found"
    with pytest.raises(anthropic.NotFoundError) as messages:
        claude.messages.create(model=model, max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert messages.value.body == {"type": "error", "error": {"type": "not_found_error", "message": f"model: {model}"}}


def test_a_malformed_request_is_a_400_before_its_model_is_looked_up(engine):
    body = json.dumps({"model": "other", "messages": []})
    status, _, raw = request(engine, "POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    assert status == 400 and json.loads(raw)["error"]["param"] == "messages"


@pytest.fixture(scope="module")
def two_names():
    """Started as vLLM is with `--served-model-name first second`: it answers both and reports the first."""
    server = mock_engine.make_server("127.0.0.1", 0, pod=POD, models=["qwen3-8b", "ml-team/chat"])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        with openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="sk-mock",
                           max_retries=0, timeout=TIMEOUT) as client:
            yield client
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)


def test_an_engine_answers_every_name_it_serves_and_reports_the_first(two_names):
    assert [m.id for m in two_names.models.list()] == ["qwen3-8b", "ml-team/chat"]
    for model in ("qwen3-8b", "ml-team/chat"):
        reply = two_names.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        assert reply.model == "qwen3-8b" and reply.choices[0].message.content.startswith("Hello from qwen3-8b: ")
    with pytest.raises(openai.NotFoundError):
        two_names.chat.completions.create(model="mock", messages=[{"role": "user", "content": "hi"}])


def test_demo_stack_inlines_exactly_this_file(repo):
    stack = yaml.safe_load((repo / "stacks" / "Pulumi.demo.yaml").read_text())
    deployment = stack["config"]["modelplane:modelDeployments"]["ml-team"]["mock-demo"]
    (engine,) = deployment["template"]["spec"]["engines"]
    (container,) = engine["members"][0]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-u", "-c"]
    assert container["args"] == [SOURCE, "--served-model-name", "mock"]  # after the source: its own argv


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("how", ["inline", "module"])
def test_engine_starts_as_a_process(how, tmp_path):
    """`python -S -u -c <source> --served-model-name ...` (no site-packages: stdlib only) as in the pod (the flag
    wins over env MODEL_NAME), and `python -m` with env MODEL_NAME."""
    port, pod = free_port(), f"mock-demo-{how}-pod"
    env = {**os.environ, "HOSTNAME": pod, "MODEL_NAME": "ignored" if how == "inline" else "tiny"}
    if how == "inline":
        argv = [sys.executable, "-S", "-u", "-c", SOURCE, "--host", "127.0.0.1", "--port", str(port),
                "--served-model-name", "tiny", "tiny-alias"]
    else:
        argv = [sys.executable, "-u", "-m", "modelplane.mock_engine", "--host", "127.0.0.1"]
        env["PORT"] = str(port)
    log = tmp_path / "engine.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=tmp_path if how == "inline" else REPO, env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert process.poll() is None, log.read_text()
            try:
                status, _, body = request(port, "GET", "/health")
                break
            except OSError:
                assert time.monotonic() < deadline, f"engine did not come up:\n{log.read_text()}"
                time.sleep(0.05)
        assert status == 200 and json.loads(body) == {"status": "ok"}
        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-mock", max_retries=0,
                           timeout=TIMEOUT) as client:
            assert [m.id for m in client.models.list()] == (["tiny", "tiny-alias"] if how == "inline" else ["tiny"])
            reply = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model="ignored", messages=[{"role": "user", "content": "hi"}])
        assert f"served by {pod}" in reply.choices[0].message.content
    finally:
        process.terminate()
        try:
            process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(TIMEOUT)
    assert f"as pod {pod}" in log.read_text()


def documented_refusals():
    """The `curl -s -w '  (HTTP %{http_code})\\n' ...` examples of docs/mock-engine.md and the line each prints."""
    lines = (REPO / "docs" / "mock-engine.md").read_text().splitlines()
    for command, printed in zip(lines, lines[1:]):
        if command.startswith("$ curl -s -w "):
            yield pytest.param(shlex.split(command[2:]), printed, id=printed.split("(HTTP ")[-1].rstrip(")"))


@pytest.mark.parametrize("argv, printed", list(documented_refusals()))
def test_the_documented_refusals_are_what_the_engine_answers(engine, argv, printed):
    url = next(a for a in argv if a.startswith("http://127.0.0.1:8000/"))
    headers = dict(h.split(": ", 1) for flag, h in zip(argv, argv[1:]) if flag == "-H")
    body = next((b for flag, b in zip(argv, argv[1:]) if flag == "-d"), None)
    status, _, raw = request(engine, "POST" if body else "GET", url.removeprefix("http://127.0.0.1:8000"), body, headers)
    assert f"{raw.decode()}  (HTTP {status})" == printed


def test_the_documentation_shows_a_refused_model_in_both_apis():
    refused = [printed for _, printed in (p.values for p in documented_refusals()) if "404" in printed]
    assert any('"code": "model_not_found"' in p for p in refused) and any("not_found_error" in p for p in refused)
