"""The front door's Lua scripts (model router and hop), run in a real LuaJIT 2.1 (as Envoy runs it) against a fake handle.

The scripts' sources are `modelplane/render/lua/*.lua`; `test_the_lua_sources_compile` checks each as LuaJIT
loads it (the `luac -p` check), and every test here runs the generated script.
"""
from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from lupa import LuaError, luajit21

from envoy_lua import LIMIT, FakeHandle, on_request
from modelplane.render.model_router import MODEL_PATHS, hop_router_lua, model_router_lua, models_list_body
from modelplane.render.types import MODEL_HEADER

MODELS = {
    "ml-team/mock": "ml-team/mock",
    "llama-3-8b": "ml-team/mock",
    "research/qwen": "research/qwen",
    "qwen@2.5:latest": "research/qwen",
    "org_x/emb.v1": "org_x/emb.v1",
}
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


def load(models, engine_names=None, body_limit=LIMIT) -> object:
    return on_request(model_router_lua(models, engine_names, body_limit))


def load_hop(renames, body_limit=LIMIT) -> object:
    return on_request(hop_router_lua(renames, body_limit))


ON_REQUEST = load(MODELS)


def run(path=CHAT, body=None, method="POST", headers=None, on_request=ON_REQUEST) -> FakeHandle:
    handle = FakeHandle(path, method, body.encode() if isinstance(body, str) else body, headers)
    on_request(handle)
    return handle


def outcome(handle: FakeHandle):
    """What the request became: routed to a canonical name, answered, or left alone."""
    if handle.response is not None:
        headers, body = handle.response
        assert headers["content-type"] == "application/json"
        assert not handle.route_cleared
        return "respond", int(headers[":status"]), json.loads(body)  # always valid JSON
    if handle.route_cleared:
        return "route", handle.headers_.text(MODEL_HEADER)
    return "untouched", handle.headers_.text(MODEL_HEADER)


def openai_error(code: str, message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": "model", "code": code}}


def openai_404(name: str) -> dict:
    return openai_error("model_not_found", f"The model `{name}` does not exist or is not served by this front door")


def anthropic_404(name: str) -> dict:
    return {"type": "error", "error": {"type": "not_found_error",
                                       "message": f"model: {name} is not served by this front door"}}


def is_400(result, code: str = "missing_model", anthropic: bool = False) -> bool:
    if result[:2] != ("respond", 400):
        return False
    error = result[2]["error"]
    if anthropic:
        return result[2]["type"] == "error" and error["type"] == "invalid_request_error"
    return error["type"] == "invalid_request_error" and error["code"] == code


def test_the_lua_sources_compile():
    """Each script as LuaJIT loads it (a syntax error here would make Envoy Gateway reject the policy)."""
    for script in (model_router_lua(MODELS, {"ml-team/mock": "mock"}), hop_router_lua({"h": "m"})):
        lua = luajit21.LuaRuntime(encoding=None)
        assert lua.eval(f"loadstring({json.dumps(script)})") is not None


# --- table-driven behaviour ------------------------------------------------------------------------

ROUTED = [
    ("canonical", CHAT, '{"model":"ml-team/mock","messages":[]}', "ml-team/mock"),
    ("alias", CHAT, '{"model":"llama-3-8b"}', "ml-team/mock"),
    ("alias with @ and :", "/v1/completions", '{"model":"qwen@2.5:latest","prompt":"hi"}', "research/qwen"),
    ("embeddings", "/v1/embeddings", '{"input":["a"],"model":"org_x/emb.v1"}', "org_x/emb.v1"),
    ("responses API", "/v1/responses", '{"model":"research/qwen","input":"hi"}', "research/qwen"),
    ("anthropic messages", MESSAGES, '{"model":"research/qwen","max_tokens":5}', "research/qwen"),
    ("nested model keys do not count", CHAT,
     '{"metadata":{"model":"x"},"tools":[{"model":"y"}],"model":"ml-team/mock"}', "ml-team/mock"),
    ("a quoted \\\"model\\\": inside another string", CHAT,
     '{"messages":[{"content":"say \\"model\\": \\"x\\" {[\\\\"}],"model":"llama-3-8b"}', "ml-team/mock"),
    ("a key ending in model", CHAT, '{"notmodel":"x","model":"llama-3-8b"}', "ml-team/mock"),
    ("whitespace and newlines", CHAT, ' \r\n{ \n\t"model" \n:\t "ml-team/mock" \n} \n', "ml-team/mock"),
    ("unicode in other fields", CHAT,
     '{"messages":[{"content":"héllo \\u00e9 \\ud83d\\ude00 😀"}],"model":"research/qwen"}', "research/qwen"),
    ("escaped slash and \\u in the name", CHAT, '{"model":"ml-team\\/m\\u006fck"}', "ml-team/mock"),
    ("escaped key", CHAT, '{"mod\\u0065l":"llama-3-8b"}', "ml-team/mock"),
    ("numbers, literals and empty containers first", CHAT,
     '{"n":-1.5e+3,"t":true,"f":false,"z":null,"o":{},"a":[],"model":"llama-3-8b"}', "ml-team/mock"),
    ("query string on the path", CHAT + "?api-version=2024-10-21", '{"model":"llama-3-8b"}', "ml-team/mock"),
]


@pytest.mark.parametrize("path, body, canonical", [case[1:] for case in ROUTED], ids=[case[0] for case in ROUTED])
def test_routes_by_the_top_level_model(path, body, canonical):
    handle = run(path, body)
    assert outcome(handle) == ("route", canonical)
    assert handle.body_read


DUPLICATES = [
    ("the issue's case", '{"model":"ml-team/mock","messages":[],"model":"research/qwen"}'),
    ("the same name twice", '{"model":"ml-team/mock","model":"ml-team/mock"}'),
    ("an escaped second key", '{"model":"ml-team/mock","mod\\u0065l":"research/qwen"}'),
    ("a second model that is no string", '{"model":"ml-team/mock","model":null}'),
    ("a first model that is no string", '{"model":["research/qwen"],"model":"ml-team/mock"}'),
    ("far apart", '{"model":"ml-team/mock","messages":[' + '{"role":"user","content":"x"},' * 50 + '{}],'
                  '"model":"research/qwen"}'),
]


@pytest.mark.parametrize("body", [case[1] for case in DUPLICATES], ids=[case[0] for case in DUPLICATES])
@pytest.mark.parametrize("path", [CHAT, MESSAGES, "/ml-team/mock/v1/chat/completions"])
def test_a_duplicate_top_level_model_is_400(body, path):
    """Finding 2: engines' JSON parsers keep the last `model`; routing by the first served another model."""
    result = outcome(run(path, body))
    assert is_400(result, "duplicate_model", anthropic=path == MESSAGES), result
    assert "more than once" in result[2]["error"]["message"]


NOT_FOUND = [
    ("plain", "gpt-4o"),
    ("quotes and backslashes", 'we"ird\\name'),
    ("a canonical name in another case", "ML-TEAM/MOCK"),
    ("json and lua delimiters", '"}]]--[==['),
]


@pytest.mark.parametrize("name", [case[1] for case in NOT_FOUND], ids=[case[0] for case in NOT_FOUND])
@pytest.mark.parametrize("path, expected", [(CHAT, openai_404), ("/v1/embeddings", openai_404),
                                            (MESSAGES, anthropic_404)])
def test_an_unknown_model_is_404_in_the_apis_own_shape(name, path, expected):
    handle = run(path, json.dumps({"messages": [], "model": name}))
    assert outcome(handle) == ("respond", 404, expected(name))
    assert handle.headers_.text(MODEL_HEADER) is None


@pytest.mark.parametrize("raw, shown", [
    ('"tab\\there"', "tab\there"),  # control characters come back escaped, still valid JSON
    ('"caf\\u00e9"', "caf\\u00e9"),  # not decoded (names are ASCII): shown as sent
    ('"café"', "caf\ufffd\ufffd"),  # bytes beyond ASCII need not be UTF-8: replaced
    ('"' + "x" * 500 + '"', "x" * 200),  # not a whole body echoed back
])
def test_the_echoed_name_stays_valid_json(raw, shown):
    assert outcome(run(CHAT, '{"model":' + raw + "}")) == ("respond", 404, openai_404(shown))


MISSING = [
    ("no body", None),
    ("empty body", ""),
    ("empty object", "{}"),
    ("no model", '{"messages":[]}'),
    ("only nested models", '{"metadata":{"model":"ml-team/mock"},"x":[{"model":"ml-team/mock"}]}'),
    ("model is a number", '{"model":7}'),
    ("model is null", '{"model":null}'),
    ("model is an object", '{"model":{"name":"ml-team/mock"}}'),
    ("model is an empty string", '{"model":""}'),
]
NOT_AN_OBJECT = [
    ("not JSON", "model=ml-team/mock"),
    ("a JSON array", '["model","ml-team/mock"]'),
    ("a JSON string", '"ml-team/mock"'),
    ("truncated before the model", '{"messages":[{"content":"hi'),
    ("unterminated model", '{"model":"ml-team/mock'),
    ("missing colon", '{"model" "ml-team/mock"}'),
    ("missing comma", '{"a":1 "model":"ml-team/mock"}'),
    ("invalid JSON after the model", '{"model":"llama-3-8b", oops'),
]


@pytest.mark.parametrize("body", [case[1] for case in MISSING], ids=[case[0] for case in MISSING])
@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_a_request_without_a_top_level_model_string_is_400(body, path):
    result = outcome(run(path, body))
    assert is_400(result, "missing_model", anthropic=path == MESSAGES), result
    assert "GET /v1/models" in result[2]["error"]["message"]


@pytest.mark.parametrize("body", [case[1] for case in NOT_AN_OBJECT], ids=[case[0] for case in NOT_AN_OBJECT])
@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_a_body_that_is_no_json_object_is_400(body, path):
    result = outcome(run(path, body))
    assert is_400(result, "invalid_body", anthropic=path == MESSAGES), result
    assert "JSON object" in result[2]["error"]["message"]


@pytest.mark.parametrize("path, method", [
    ("/v1/models", "GET"),
    (CHAT, "GET"),
    (CHAT, "OPTIONS"),
    ("/v1/chat/completions/", "POST"),
    ("/v1/chat", "POST"),
    ("/V1/CHAT/COMPLETIONS", "POST"),
    ("/health", "POST"),
    ("/v1/files", "POST"),
    ("/ml-team/mock/v1/files", "POST"),  # a service path, but not a model path: the engine's own business
    ("/unknown/service/v1/chat/completions", "POST"),
])
def test_other_paths_and_methods_are_not_read(path, method):
    handle = run(path, '{"model":"gpt-4o"}', method, headers={MODEL_HEADER: "ml-team/mock"})
    assert outcome(handle) == ("untouched", None)  # and the client's router header is gone
    assert not handle.body_read


@pytest.mark.parametrize("value", ["ml-team/mock", "research/qwen", "llama-3-8b", "gpt-4o", "",
                                   "ml-team/mock,research/qwen"])
def test_a_client_sent_router_header_is_never_trusted(value):
    """Finding 3: a canonical name in the header skipped the body (and its 400) and overrode the body's model."""
    handle = run(CHAT, '{"model":"research/qwen"}', headers={MODEL_HEADER: value})
    assert outcome(handle) == ("route", "research/qwen") and handle.body_read
    handle = run(CHAT, '{"model":"gpt-4o"}', headers={MODEL_HEADER: value})
    assert outcome(handle)[:2] == ("respond", 404)
    handle = run(CHAT, '{"messages":[]}', headers={MODEL_HEADER: value})
    assert is_400(outcome(handle))


# --- a service's own path (the reference's way in) ---------------------------------------------------

SERVICE_CHAT = "/ml-team/mock/v1/chat/completions"


@pytest.mark.parametrize("body, result", [
    ('{"model":"ml-team/mock"}', ("untouched", None)),  # the path already chose the route
    ('{"model":"llama-3-8b"}', ("untouched", None)),  # an alias of that service
    ('{"model":"research/qwen"}', ("respond", 404)),  # another service's name: never served by this one
    ('{"model":"gpt-4o"}', ("respond", 404)),
    ('{"messages":[]}', ("respond", 400)),
])
def test_a_service_path_takes_only_that_services_names(body, result):
    handle = run(SERVICE_CHAT, body)
    assert outcome(handle)[:2] == result
    assert handle.body_read


# --- the engines' own name -----------------------------------------------------------------------

ENGINES = {"ml-team/mock": "mock", "research/qwen": 'Qwen/Qwen3-8B "x"'}
NAMING = load(MODELS, ENGINES)


@pytest.mark.parametrize("path, sent, served", [
    (CHAT, "ml-team/mock", "mock"),
    (CHAT, "llama-3-8b", "mock"),
    (MESSAGES, "qwen@2.5:latest", 'Qwen/Qwen3-8B "x"'),
    (CHAT, "org_x/emb.v1", "org_x/emb.v1"),  # no engine name known: the body is left as it is
    (SERVICE_CHAT, "llama-3-8b", "mock"),
    (SERVICE_CHAT, "mock", "mock"),  # a service path may use the engines' own name, as the reference's clients do
])
def test_the_engines_own_name_is_put_in_the_body(path, sent, served):
    """Finding 4: a routed name must reach an engine that answers it."""
    body = json.dumps({"model": sent, "messages": [{"role": "user", "content": 'say "model": "x"'}], "stream": True})
    handle = run(path, body, on_request=NAMING)
    assert outcome(handle)[0] in ("route", "untouched")
    sent_on = json.loads(handle.buffer.data)
    assert sent_on == {**json.loads(body), "model": served}
    if sent_on != json.loads(body):
        assert handle.headers_.text("content-length") == str(len(handle.buffer.data))


# --- the request-body limit --------------------------------------------------------------------------

@pytest.mark.parametrize("path, anthropic", [(CHAT, False), (MESSAGES, True), (SERVICE_CHAT, False)])
def test_a_body_declared_over_the_limit_is_413_before_it_is_read(path, anthropic):
    """Finding 9: the router never buffers or scans a body over the limit."""
    small = load(MODELS, body_limit=1024)
    handle = run(path, '{"model":"ml-team/mock"}', headers={"content-length": "1025"}, on_request=small)
    result = outcome(handle)
    assert result[:2] == ("respond", 413) and not handle.body_read
    if anthropic:
        assert result[2]["error"]["type"] == "request_too_large"
    else:
        assert result[2]["error"]["code"] == "request_too_large" and result[2]["error"]["param"] is None
    handle = run(path, '{"model":"ml-team/mock"}', headers={"content-length": "1024"}, on_request=small)
    assert outcome(handle)[0] in ("route", "untouched")


# --- the generated script --------------------------------------------------------------------------

def test_the_script_is_deterministic_and_sorted():
    reversed_models = dict(reversed(list(MODELS.items())))
    script = model_router_lua(MODELS)
    assert script == model_router_lua(reversed_models)
    positions = [script.index(f'["{name}"]') for name in sorted(MODELS)]
    assert positions == sorted(positions)
    assert f'"{MODEL_HEADER}"' in script


def test_no_models_answers_404():
    assert outcome(run(CHAT, '{"model":"ml-team/mock"}', on_request=load({}))) == (
        "respond", 404, openai_404("ml-team/mock"))


HOSTILE = ['a"b', "a]]b", "a]=]b", "x\\", '"', "]]", "a\\\"b", "--[[", "\\u0041", "a'b", "%s%d", "a\x00b",
           "new\nline", "é/ü", "a\\092b", "a\\\n"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_cannot_break_out_of_the_script(name):
    models = {name: name, f"alias-{name}": name, "ml-team/mock": "ml-team/mock"}
    on_request = load(models, {name: name, "ml-team/mock": name})
    for sent, canonical in [(name, name), (f"alias-{name}", name), ("ml-team/mock", "ml-team/mock")]:
        handle = run(CHAT, json.dumps({"model": sent}, ensure_ascii=False), on_request=on_request)
        routed = outcome(handle)
        if all(" " <= c <= "~" for c in sent):  # names are printable ASCII: those must map exactly
            assert routed == ("route", canonical)
            assert json.loads(handle.buffer.data)["model"] == name  # the engine name, spliced in as valid JSON
        else:  # others may not match, but must never break the script
            assert routed[0] in ("route", "respond")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), st.text(), max_size=4))
def test_any_name_table_loads_and_maps_its_printable_names(models):
    on_request = load(models)
    for name, canonical in models.items():
        if name and all(" " <= c <= "~" for c in name):
            assert outcome(run(CHAT, json.dumps({"model": name}), on_request=on_request)) == ("route", canonical)


# --- properties ------------------------------------------------------------------------------------

json_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | json_text | st.sampled_from(['"model": "x"', '\\"model\\":', "{[", "]}", "\\"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text | st.just("model"), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def request_bodies(draw, names=st.sampled_from(sorted(MODELS))):
    """A JSON object with a top-level `model` somewhere among random other members, dumped in a random style."""
    name = draw(names)
    others = list(draw(st.dictionaries(json_text.filter(lambda k: k != "model"), json_values, max_size=5)).items())
    others.insert(draw(st.integers(0, len(others))), ("model", name))
    body = json.dumps(dict(others), ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 0, 2])),
                      separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])))
    return name, body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_bodies(), st.sampled_from(MODEL_PATHS))
def test_the_router_picks_what_json_loads_picks(request, path):
    name, body = request
    assert json.loads(body)["model"] == name
    assert outcome(run(path, body)) == ("route", MODELS[name])


@settings(max_examples=300, deadline=None)
@given(json_text)
def test_any_unknown_name_is_echoed_in_valid_json(name):
    result = outcome(run(CHAT, json.dumps({"model": name})))
    if name in MODELS:
        assert result == ("route", MODELS[name])
    elif name == "":
        assert is_400(result)
    else:
        assert result[:2] == ("respond", 404)
        if all(" " <= c <= "~" for c in name) and len(name) <= 200:
            assert result[2] == openai_404(name)


def _outcome_is_sane(handle: FakeHandle):
    result = outcome(handle)
    assert result[0] == "route" and result[1] in MODELS.values() or result[0] == "respond" and result[1] in (400, 404)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(MODEL_PATHS))
def test_random_bytes_never_raise_a_lua_error(body, path):
    try:
        handle = run(path, body)
    except LuaError as error:  # Envoy would answer 500
        pytest.fail(f"Lua error: {error}")
    _outcome_is_sane(handle)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_bodies(), st.data())
def test_truncated_and_corrupted_bodies_never_raise_a_lua_error(request, data):
    _, body = request
    raw = body.encode()
    cut = data.draw(st.integers(0, len(raw)))
    noise = data.draw(st.binary(max_size=8) | st.sampled_from([b'"', b"\\", b"{", b"[", b"]", b"}", b"\\u12"]))
    _outcome_is_sane(run(CHAT, raw[:cut] + noise + raw[cut:]))
    _outcome_is_sane(run(CHAT, raw[:cut]))


# --- GET /v1/models --------------------------------------------------------------------------------

def test_models_list_body_is_openais_list_shape():
    body = models_list_body([(name, MODELS[name]) for name in reversed(list(MODELS))])
    assert " " not in body  # compact
    parsed = json.loads(body)
    assert parsed == {"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "modelplane"} for name in sorted(MODELS)]}
    assert body == models_list_body(sorted(MODELS.items()))


@given(st.lists(st.tuples(st.text(string.printable), st.text(string.printable))))
def test_models_list_body_lists_every_name_once(pairs):
    ids = [entry["id"] for entry in json.loads(models_list_body(pairs))["data"]]
    assert ids == sorted({name for name, _ in pairs})


# --- a hand-made endpoint's hop ---------------------------------------------------------------------

HOP = "together.ml-team.endpoint.modelplane.internal"
RENAMING = load_hop({HOP: "Qwen/Qwen3-8B-Instruct"})


@pytest.mark.parametrize("body", [
    '{"model": "ml-team/mock", "messages": [{"role": "user", "content": "Hi \\"model\\": x"}], "stream": true}',
    '{"messages": [], "model" : "llama-3-8b"}',
    '{"model": "gpt-4o-mini"}',  # a request routed by path names the provider's model: renamed all the same
])
@pytest.mark.parametrize("host", [HOP, f"{HOP}:80", HOP.upper()])
def test_a_hop_puts_the_endpoints_own_model_name_in_the_body_and_is_not_routed_again(body, host):
    handle = run(body=body, headers={":authority": host, MODEL_HEADER: "ml-team/mock"}, on_request=RENAMING)
    assert outcome(handle) == ("untouched", None)  # and the internal header never reaches the provider
    sent = json.loads(handle.buffer.data)
    assert sent == {**json.loads(body), "model": "Qwen/Qwen3-8B-Instruct"}
    assert handle.headers_.text("content-length") == str(len(handle.buffer.data))


def test_a_hop_without_a_model_of_its_own_passes_the_body_as_it_is():
    body = '{"model": "gpt-4o-mini", "messages": []}'
    handle = run(body=body, headers={":authority": "other.ml-team.endpoint.modelplane.internal"}, on_request=RENAMING)
    assert outcome(handle) == ("untouched", None)  # no 404 for the provider's own model name
    assert handle.buffer.data == body.encode() and not handle.body_read


@pytest.mark.parametrize("body, code", [("not json", "invalid_body"), ('{"model":"a","model":"b"}', "duplicate_model")])
def test_a_hop_refuses_what_the_front_door_refuses(body, code):
    handle = run(body=body, headers={":authority": HOP}, on_request=RENAMING)
    assert is_400(outcome(handle), code)


def test_the_public_host_is_routed_whatever_its_name():
    """A client sending a hop's Host to the public address gets the public router, nothing more (finding 1)."""
    for host in ("api.example.com", HOP):
        handle = run(body='{"model": "llama-3-8b"}', headers={":authority": host})
        assert outcome(handle) == ("route", "ml-team/mock")


# --- the JSON reading agrees with the engines' ------------------------------------------------------

@st.composite
def bodies_with_maybe_duplicate_models(draw):
    """Objects whose top level may repeat `model` (JSON allows it; parsers keep the last), dumped by hand."""
    members = draw(st.lists(st.tuples(st.sampled_from(["model", "messages", "m", "mod\\u0065l", "x"]),
                                       st.sampled_from(sorted(MODELS)) | json_values), min_size=0, max_size=5))
    return "{" + ",".join(f'"{key}":{json.dumps(value)}' for key, value in members) + "}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies_with_maybe_duplicate_models(), st.sampled_from(MODEL_PATHS))
def test_the_router_never_routes_a_model_json_loads_would_not_serve(body, path):
    """Whatever the body, either the engine's parser (json.loads keeps the last `model`) sees the model that was
    routed, or the request is refused."""
    parsed = json.loads(body)
    count = sum(1 for key in _keys(body) if key == "model")
    result = outcome(run(path, body))
    if count > 1:
        assert result[:2] == ("respond", 400) and result[2]["error"].get("code", "duplicate_model") == "duplicate_model"
    elif isinstance(parsed.get("model"), str) and parsed["model"] in MODELS:
        assert result == ("route", MODELS[parsed["model"]])
    else:
        assert result[0] == "respond" and result[1] in (400, 404)


def _keys(body: str) -> list[str]:
    """The top-level keys of a JSON object, duplicates included (the outermost hook call is the top level)."""
    return [key for key, _ in json.loads(body, object_pairs_hook=lambda pairs: pairs)]
