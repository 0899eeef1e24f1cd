"""Hostile input: stack files and previous placements built to hang, exhaust memory or slip through.

Every case is a real `modelplane` subprocess with a time limit and an address-space limit (so a
regression fails here instead of swapping the machine): exit code 2, a clear message, no traceback.
Names that end in a newline and counts no cloud accepts are checked in-process, through the loader.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders import fleet_config
from modelplane.api import ConfigError, load_fleet, syntax
from modelplane.api.errors import format_path

REPO = Path(__file__).resolve().parent.parent
DEMO = (REPO / "stacks" / "Pulumi.demo.yaml").read_text()
MEMORY_LIMIT = 1536 << 20  # well above a normal run (~100 MB resident), well below a runaway parse
TIME_LIMIT = 30  # seconds; each case takes one or two on an idle machine


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def modelplane(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    script = shutil.which("modelplane", path=os.path.dirname(sys.executable))
    command = [script] if script else [sys.executable, "-m", "modelplane"]
    start = time.monotonic()
    result = subprocess.run(command + list(args), cwd=REPO, capture_output=True, text=True, timeout=2 * TIME_LIMIT,
                            preexec_fn=_limit_memory)
    return result, time.monotonic() - start


def assert_refused(result: subprocess.CompletedProcess, elapsed: float, *expected: str) -> None:
    assert result.returncode == 2, f"exit {result.returncode}\nstdout: {result.stdout[:2000]}\nstderr: {result.stderr[:2000]}"
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr[-3000:]
    assert "valid:" not in result.stdout
    for text in expected:
        assert text in result.stderr, f"{text!r} not in:\n{result.stderr[:3000]}"
    assert elapsed < TIME_LIMIT, f"took {elapsed:.1f} s"


def billion_laughs() -> str:
    lines = ["config:", "  modelplane:servingStack:", "    versions:", "      a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in "bcdefghij":
        previous = chr(ord(level) - 1)
        lines.append(f"      {level}: &{level} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


def demo_with(old: str, new: str) -> str:
    assert old in DEMO
    return DEMO.replace(old, new, 1)


# (test id, file content (text or bytes), what the error says)
HOSTILE_STACK_FILES = [
    ("alias_bomb", billion_laughs(), ["YAML aliases (*a) are not supported", ":5:"]),
    ("a_single_alias", "config:\n  x: &n 2\n  modelplane:servingStack: {nvidiaDriverRoot: *n}\n",
     ["YAML aliases (*n) are not supported"]),
    ("deep_flow_sequences", "config:\n  modelplane:servingStack: " + "[" * 100_000 + "\n",
     ["values nest more than 64 levels deep"]),
    ("deep_flow_mappings", "config:\n  modelplane:servingStack: " + "{a: " * 100_000 + "\n",
     ["values nest more than 64 levels deep"]),
    ("deep_block_sequences", "config:\n  modelplane:servingStack:\n    " + "- " * 50_000 + "x\n",
     ["values nest more than 64 levels deep"]),
    ("latin1_bytes", "config:\n  modelplane:servingStack: {nvidiaDriverRoot: caf\xe9}\n".encode("latin-1"),
     ["is not UTF-8 text: byte 0xe9 at line 2, column 50 (byte offset 57)", "save the file as UTF-8"]),
    ("utf16_file", "config: {}\n".encode("utf-16"), ["is UTF-16 text; save it as UTF-8"]),
    ("nul_byte", b"config:\n  modelplane:servingStack: {nvidiaDriverRoot: a\x00b}\n",
     ["control character U+0000 (NUL) at line 2, column 48"]),
    ("escape_character", b"config:\n  modelplane:servingStack: {nvidiaDriverRoot: a\x1b[31mb}\n",
     ["control character U+001B", "line 2"]),
    ("integer_past_python_conversion_limit", demo_with("replicas: 2", "replicas: " + "9" * 5000),
     ["modelplane:modelDeployments.ml-team.mock-demo.replicas: the number (5,000 digits) is too large for any field"]),
    ("file_of_50_megabytes", "config:\n  modelplane:servingStack: {}\n" + ("#" * 99 + "\n") * 500_000,
     ["is 50,000,038 bytes; the limit is 16 MiB", "about 2 MiB"]),
    ("second_config_section", "config:\n  modelplane:servingStack: {}\nconfig:\n  modelplane:servingStack: {}\n",
     ["key 'config' is defined twice (first at line 1)"]),
    ("duplicate_key_outside_modelplane", "config:\n  aws:region: us-east-1\n  aws:region: eu-west-1\n",
     [":3: key 'aws:region' is defined twice (first at line 2)"]),
    ("namespaces_123_and_quoted_123", demo_with("    ml-team:\n      mock-demo:",
                                                "    123:\n      other: {replicas: 1}\n    \"123\":\n      mock-demo:"),
     ['modelplane:modelDeployments.123: key must be a string (got 123); quote it in YAML ("123")',
      "modelplane:modelDeployments.123: is defined twice"]),
    ("namespace_no_read_as_false", demo_with("    ml-team:\n      mock-demo:", "    no:\n      mock-demo:"),
     ['modelplane:modelDeployments.no: key must be a string (got no); quote it in YAML ("no")']),
    ("empty_secure_value", "config:\n  modelplane:inferenceClusters:\n    rack:\n      cluster:\n        source: Existing\n"
                           "        existing: {kubeconfig: {secure: ''}}\n",
     ["modelplane:inferenceClusters.rack.cluster.existing.kubeconfig: is a `secure:` entry without ciphertext"]),
    ("node_count_of_10_to_the_30", demo_with("nodeCount: 1}", "nodeCount: 1000000000000000000000000000000}"),
     ["modelplane:inferenceClusters.gpu-eu-west.nodePools[0].nodeCount: must be at most 1000 "
      "(got 1000000000000000000000000000000)"]),
    ("too_many_values", "config:\n  modelplane:servingStack: [" + "1, " * 600_000 + "1]\n",
     ["more than 500,000 values"]),
    ("merge_key", "config:\n  modelplane:servingStack:\n    <<: {nvidiaDriverRoot: /x}\n",
     ["YAML merge keys (<<) are not supported"]),
    ("impossible_date", "config:\n  modelplane:servingStack: {nvidiaDriverRoot: 2024-13-01}\n",
     [":2: '2024-13-01' cannot be read as a date (month must be in 1..12); quote it if it is text"]),
    ("two_documents", "config: {}\n---\nconfig: {}\n", [":2: a second YAML document starts here"]),
    ("list_as_a_key", "config:\n  ? [a, b]\n  : 1\n", ["a mapping key is itself a list or a mapping"]),
    ("python_tag_on_a_mapping", "config:\n  modelplane:servingStack: !!python/object:os.system {}\n",
     [":2: the YAML tag 'tag:yaml.org,2002:python/object:os.system' is not supported"]),
    ("python_tag_on_a_scalar", "config:\n  modelplane:servingStack: !!python/name:os.system ''\n",
     ["is not valid YAML at line 2", "could not determine a constructor"]),
]


@pytest.mark.parametrize("content, expected", [case[1:] for case in HOSTILE_STACK_FILES],
                         ids=[f"{case[0]}_is_refused_quickly" for case in HOSTILE_STACK_FILES])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_hostile_stack_file_is_refused_quickly(tmp_path, command, content, expected):
    path = tmp_path / "Pulumi.hostile.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert_refused(*modelplane(command, "--config", str(path)), *expected)


def test_alias_bomb_is_refused_quickly(tmp_path):
    path = tmp_path / "Pulumi.bomb.yaml"
    path.write_text(billion_laughs())
    result, elapsed = modelplane("validate", "--config", str(path))
    assert_refused(result, elapsed, "YAML aliases")
    assert elapsed < 10


def test_config_naming_a_folder_is_refused(tmp_path):
    assert_refused(*modelplane("validate", "--config", str(tmp_path)), f"stack file {tmp_path} is a folder")


def test_config_naming_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "Pulumi.fifo.yaml"
    os.mkfifo(fifo)
    assert_refused(*modelplane("validate", "--config", str(fifo)), "is not a regular file")


def test_config_naming_a_device_is_refused_without_reading_forever():
    assert_refused(*modelplane("validate", "--config", "/dev/zero"), "stack file /dev/zero is not a regular file")


def test_unreadable_config_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_refused(*modelplane("validate", "--config", str(blocker / "Pulumi.x.yaml")), "cannot read stack file",
                   "Not a directory")


def test_a_large_real_fleet_is_well_within_the_bounds(tmp_path):
    """200 clusters x 2,000 deployments reads in seconds: the bounds refuse only what no fleet needs."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from bench_scheduler import synthetic_fleet
    finally:
        sys.path.pop(0)
    import yaml

    class NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    config = {f"modelplane:{key}": value for key, value in synthetic_fleet(200, 2000).items()}
    path = tmp_path / "Pulumi.large.yaml"
    path.write_text(yaml.dump({"config": config}, Dumper=NoAliases, sort_keys=False))
    assert path.stat().st_size < 4 << 20
    result, elapsed = modelplane("validate", "--config", str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2000 ModelDeployments" in result.stdout and elapsed < TIME_LIMIT


# ---- --previous FILE ------------------------------------------------------------------------------

HOSTILE_PREVIOUS_FILES = [
    ("binary", bytes(range(256)) * 64, ["is not UTF-8 text: byte 0x80"]),
    ("latin1", '{"kind": "Placem\xe9nt"}'.encode("latin-1"), ["is not UTF-8 text: byte 0xe9 at line 1, column 17"]),
    ("deep_json", "[" * 100_000 + "]" * 100_000, ["is JSON nested too deeply to read"]),
    ("moderately_deep_json", '{"replicas": ' + "[" * 500 + "]" * 500 + "}", ["nests more than 64 levels deep"]),
    ("integer_past_python_conversion_limit", '{"replicas": [{"index": ' + "9" * 5000 + "}]}",
     ["holds a number too large to read"]),
    ("huge_file", '{"replicas": [' + ", ".join(["{}"] * 5_000_000) + "]}", ["the limit is 16 MiB", "about 5 MiB"]),
    ("a_million_engines", '{"replicas": [{"engines": [' + ", ".join(["{}"] * 900_000) + "]}]}",
     ["a list of 900,000 entries", "the limit is 1,000"]),
    ("many_empty_replicas", '{"replicas": [' + ", ".join(["{}"] * 99_000) + "]}",
     ["is not a placement document: replicas.0.namespace: Field required"]),
    ("not_an_object", "[1, 2, 3]", ["is not a placement document: it must be a JSON object (got a list)"]),
    ("kind_of_many_lines", '{"kind": "' + "x\\n" * 1000 + '"}', ["has kind 'x\\nx\\n", "(2,000 characters)"]),
]


@pytest.mark.parametrize("content, expected", [case[1:] for case in HOSTILE_PREVIOUS_FILES],
                         ids=[f"{case[0]}_is_refused_quickly" for case in HOSTILE_PREVIOUS_FILES])
def test_hostile_previous_placement_is_refused_quickly(tmp_path, content, expected):
    path = tmp_path / "previous.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result, elapsed = modelplane("plan", "--stack", "demo", "--previous", str(path))
    assert_refused(result, elapsed, *expected)
    assert len(result.stderr) < 2000  # one line, not an echo of the file


@pytest.mark.parametrize("where, expected", [
    ("folder", "is a folder; name the file itself"),
    ("/dev/zero", "previous placement /dev/zero is not a regular file"),
])
def test_previous_that_is_not_a_file_is_refused(tmp_path, where, expected):
    path = str(tmp_path) if where == "folder" else where
    assert_refused(*modelplane("plan", "--stack", "demo", "--previous", path), expected)


# ---- names must match their grammar exactly --------------------------------------------------------

NEWLINE_NAMES = [
    syntax.dns_label_problem, syntax.dns_1035_label_problem, syntax.dns_subdomain_problem,
    syntax.qualified_name_problem, syntax.label_value_problem, syntax.device_attribute_name_problem,
    syntax.quantity_problem, syntax.semver_problem, syntax.cidr_problem, syntax.ip_range_problem,
    syntax.env_var_name_problem, syntax.config_key_problem, syntax.http_header_problem, syntax.single_line_problem,
]
VALID_SAMPLES = {
    syntax.dns_label_problem: "ml-team", syntax.dns_1035_label_problem: "mock-demo",
    syntax.dns_subdomain_problem: "gpu.example.com", syntax.qualified_name_problem: "modelplane.ai/region",
    syntax.label_value_problem: "eu-west", syntax.device_attribute_name_problem: "memory",
    syntax.quantity_problem: "80Gi", syntax.semver_problem: "1.2.3", syntax.cidr_problem: "10.0.0.0/16",
    syntax.ip_range_problem: "172.18.255.200-172.18.255.250", syntax.env_var_name_problem: "HF_TOKEN",
    syntax.config_key_problem: "token", syntax.http_header_problem: "Authorization",
    syntax.single_line_problem: "v1.2.3",
}


@pytest.mark.parametrize("check", NEWLINE_NAMES, ids=[c.__name__ for c in NEWLINE_NAMES])
@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "\t"])
def test_a_grammar_refuses_a_valid_value_with_a_trailing_newline_or_blank(check, suffix):
    valid = VALID_SAMPLES[check]
    assert check(valid) is None
    assert check(valid + suffix) is not None
    assert "\n" not in check(valid + suffix)  # the message stays on one line


def _set(config: dict, path: tuple, value) -> dict:
    target = config
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return config


def _rename(config: dict, path: tuple, new: str) -> dict:
    target = config
    for part in path[:-1]:
        target = target[part]
    target[new] = target.pop(path[-1])
    return config


def _with_labels(config: dict) -> dict:
    config["modelDeployments"]["ml-team"]["mock-demo"]["template"]["metadata"] = {"labels": {"app": "x"}}
    return config


NEWLINE_FIELDS = [  # (what, how to break the config, the path the error names)
    ("namespace", lambda c: _rename(c, ("modelDeployments", "ml-team"), "ml-team\n"), ("modelDeployments", "ml-team\n")),
    ("deployment name", lambda c: _rename(c, ("modelDeployments", "ml-team", "mock-demo"), "mock-demo\n"),
     ("modelDeployments", "ml-team", "mock-demo\n")),
    ("cluster name", lambda c: _rename(c, ("inferenceClusters", "gpu-eu-west"), "gpu-eu-west\n"),
     ("inferenceClusters", "gpu-eu-west\n")),
    ("class name", lambda c: _rename(c, ("inferenceClasses", "synthetic-gpu"), "synthetic-gpu\n"),
     ("inferenceClasses", "synthetic-gpu\n")),
    ("cluster label value", lambda c: _set(c, ("inferenceClusters", "gpu-eu-west", "labels"),
                                           {"modelplane.ai/region": "eu-west\n"}),
     ("inferenceClusters", "gpu-eu-west", "labels", "modelplane.ai/region")),
    ("cluster label key", lambda c: _set(c, ("inferenceClusters", "gpu-eu-west", "labels"), {"region\n": "eu"}),
     ("inferenceClusters", "gpu-eu-west", "labels", "region\n")),
    ("pool name", lambda c: _set(c, ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "name"), "gpu\n"),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "name")),
    ("engine name", lambda c: _set(c, ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0,
                                       "name"), "mock\n"),
     ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0, "name")),
    ("deployment label value", lambda c: _set(_with_labels(c), ("modelDeployments", "ml-team", "mock-demo", "template",
                                                                "metadata", "labels", "app"), "x\n"),
     ("modelDeployments", "ml-team", "mock-demo", "template", "metadata", "labels", "app")),
    ("capacity quantity", lambda c: _set(c, ("inferenceClasses", "synthetic-gpu", "devices", 0, "capacity"),
                                         {"memory": {"value": "80Gi\n"}}),
     ("inferenceClasses", "synthetic-gpu", "devices", 0, "capacity", "memory", "value")),
    ("driver", lambda c: _set(c, ("inferenceClasses", "synthetic-gpu", "devices", 0, "driver"), "gpu.example.com\n"),
     ("inferenceClasses", "synthetic-gpu", "devices", 0, "driver")),
    ("kind cluster name", lambda c: _set(c, ("inferenceClusters", "gpu-eu-west", "cluster"),
                                         {"source": "Kind", "kind": {"clusterName": "eu\n"}}),
     ("inferenceClusters", "gpu-eu-west", "cluster", "kind", "clusterName")),
    ("capacity block id", lambda c: _set(c, ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "capacityBlock"),
                                         {"capacityReservationId": "cr-abcd\n"}),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "capacityBlock", "capacityReservationId")),
    ("container image", lambda c: _set(c, ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0,
                                           "members", 0, "template", "spec", "containers", 0, "image"), "vllm\n"),
     ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0, "members", 0, "template", "spec",
      "containers", 0, "image")),
]


@pytest.mark.parametrize("break_config, path", [f[1:] for f in NEWLINE_FIELDS],
                         ids=[f"{f[0].replace(' ', '_')}_ending_in_a_newline_is_refused" for f in NEWLINE_FIELDS])
def test_a_name_ending_in_a_newline_is_refused(break_config, path):
    with pytest.raises(ConfigError) as error:
        load_fleet(break_config(fleet_config()))
    paths = [issue.path for issue in error.value.issues]
    assert path in paths, [str(i) for i in error.value.issues]
    for issue in error.value.issues:
        assert "\n" not in str(issue), str(issue)  # paths and values are escaped: one line per issue


def test_a_path_with_a_newline_in_a_key_is_printed_escaped():
    assert format_path(("modelDeployments", "ml-team\n", 'a"b')) == 'modelplane:modelDeployments["ml-team\\n"]["a\\"b"]'


# ---- counts are bounded by what clouds and Kubernetes accept ----------------------------------------

def _deployment(c: dict) -> dict:
    return c["modelDeployments"]["ml-team"]["mock-demo"]


def _engine(c: dict) -> dict:
    return _deployment(c)["template"]["spec"]["engines"][0]


def _pool(c: dict) -> dict:
    return c["inferenceClusters"]["gpu-eu-west"]["nodePools"][0]


def _worker(c: dict) -> dict:
    engine = _engine(c)
    engine["members"].append({"role": "Worker", "worker": {"nodes": 64},
                              "template": {"spec": {"containers": [{"name": "engine", "image": "x"}]}}})
    engine["members"][0]["role"] = "Leader"
    return c


BOUNDS = [  # (field, set it just past its bound, the path, the message)
    ("nodeCount", lambda c: _pool(c).update(nodeCount=1001), ("inferenceClusters", "gpu-eu-west", "nodePools", 0,
                                                               "nodeCount"), "must be at most 1000 (got 1001)"),
    ("nodeCount_of_10_to_the_30", lambda c: _pool(c).update(nodeCount=10**30),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "nodeCount"), f"must be at most 1000 (got {10**30})"),
    ("nodeCount_of_5000_digits", lambda c: _pool(c).update(nodeCount=10**4999),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "nodeCount"), "must be at most 1000 (got a number of about"),
    ("minNodeCount", lambda c: _pool(c).update(minNodeCount=1001, nodeCount=1000, maxNodeCount=1000),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "minNodeCount"), "must be at most 1000 (got 1001)"),
    ("maxNodeCount", lambda c: _pool(c).update(maxNodeCount=1001),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "maxNodeCount"), "must be at most 1000 (got 1001)"),
    ("replicas", lambda c: _deployment(c).update(replicas=11), ("modelDeployments", "ml-team", "mock-demo", "replicas"),
     "must be at most 10 (got 11)"),
    ("copies", lambda c: _engine(c).update(copies=65), ("modelDeployments", "ml-team", "mock-demo", "template", "spec",
                                                        "engines", 0, "copies"), "must be at most 64 (got 65)"),
    ("worker_nodes", _worker, ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0, "members",
                               1, "worker", "nodes"), "must be at most 63 (got 64)"),
    ("device_count", lambda c: c["inferenceClasses"]["synthetic-gpu"]["devices"][0].update(count=65),
     ("inferenceClasses", "synthetic-gpu", "devices", 0, "count"), "must be at most 64 (got 65)"),
    ("request_count", lambda c: _engine(c)["members"][0]["nodeSelector"]["devices"][0].update(count=65),
     ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0, "members", 0, "nodeSelector",
      "devices", 0, "count"), "must be at most 64 (got 65)"),
    ("zones", lambda c: _pool(c).update(zones=[f"z{i}" for i in range(17)]),
     ("inferenceClusters", "gpu-eu-west", "nodePools", 0, "zones"), "must have at most 16 items (got 17)"),
    ("container_args", lambda c: _engine(c)["members"][0]["template"]["spec"]["containers"][0].update(args=["a"] * 1025),
     ("modelDeployments", "ml-team", "mock-demo", "template", "spec", "engines", 0, "members", 0, "template", "spec",
      "containers", 0, "args"), "must have at most 1024 items (got 1025)"),
    ("serving_stack_versions", lambda c: c.update(servingStack={"versions": {f"v{i}": "1" for i in range(1000)}}),
     ("servingStack", "versions"), "must have at most 10 items (got 1000)"),
]


@pytest.mark.parametrize("break_config, path, message", [b[1:] for b in BOUNDS],
                         ids=[f"{b[0]}_past_its_bound_is_refused" for b in BOUNDS])
def test_a_count_past_its_bound_is_refused_naming_the_bound(break_config, path, message):
    config = fleet_config()
    break_config(config)
    with pytest.raises(ConfigError) as error:
        load_fleet(config)
    found = {issue.path: issue.message for issue in error.value.issues}
    assert path in found, [str(i) for i in error.value.issues]
    assert found[path].startswith(message), found[path]


def test_a_broken_file_of_many_objects_stops_after_a_thousand_errors():
    config = {"modelDeployments": {"ns": {f"d{i}": 1 for i in range(5000)}}}
    with pytest.raises(ConfigError) as error:
        load_fleet(config)
    assert len(error.value.issues) == 1001
    assert any("validation stopped after 1,000 errors" in issue.message for issue in error.value.issues)
