"""No error, warning or log line ever shows a value from a secret position or a `secure:` value.

The usual mistake is a secret set one level too high (the kubeconfig as `cluster.existing`, the token
as `auth`): the value then sits where an object belongs, and a naive message prints it in full. Each
case runs through the CLI (a subprocess) and through the Pulumi program's config path; the secret
must appear in no output, and the error must still name the path and the fix.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest

from modelplane.api import load_fleet
from modelplane.api.errors import HIDDEN_NOTE, shown, text_hidden
from modelplane.infra import program

REPO = Path(__file__).resolve().parent.parent
SECRET = "SECRETKEYMATERIAL"
KUBECONFIG = ("apiVersion: v1\nkind: Config\nclusters:\n- name: rack\n  cluster: {server: 'https://10.0.0.1:6443'}\n"
              "users:\n- name: admin\n  user:\n    client-certificate-data: Q0VSVA==\n"
              f"    client-key-data: {SECRET}\n")
TOKEN = f"sk-{SECRET}-0123456789"

CLASS = {"c": {"devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "gpu.example.com"}]}}


def rack(cluster: object) -> dict:
    return {"inferenceClasses": CLASS,
            "inferenceClusters": {"rack": {"cluster": cluster, "nodePools": [{"name": "gpu", "className": "c"}]}}}


def endpoint(**fields: object) -> dict:
    return {"modelEndpoints": {"ml-team": {"saas": {"url": "https://api.example.com/", **fields}}}}


def cache(hugging_face: object) -> dict:
    return {"modelCaches": {"ml-team": {"qwen": {"source": "HuggingFace", "huggingFace": hugging_face}}}}


def gateway(cluster: object) -> dict:
    return {"inferenceGateway": {"cluster": cluster, "traefik": {"version": "40.2.0"}}}


# (case, config with the secret misplaced, the path of the error, what the message must say)
MISPLACED = [
    ("kubeconfig_set_as_cluster_existing", rack({"source": "Existing", "existing": KUBECONFIG}),
     "modelplane:inferenceClusters.rack.cluster.existing",
     "set it at modelplane:inferenceClusters.rack.cluster.existing.kubeconfig"),
    ("kubeconfig_set_as_cluster", rack(KUBECONFIG), "modelplane:inferenceClusters.rack.cluster",
     "set it at modelplane:inferenceClusters.rack.cluster.existing.kubeconfig"),
    ("kubeconfig_set_as_the_whole_cluster", {"inferenceClusters": {"rack": KUBECONFIG}}, "modelplane:inferenceClusters.rack",
     "set it at modelplane:inferenceClusters.rack.cluster.existing.kubeconfig"),
    ("kubeconfig_set_as_gateway_cluster_existing", gateway({"source": "Existing", "existing": KUBECONFIG}),
     "modelplane:inferenceGateway.cluster.existing", "set it at modelplane:inferenceGateway.cluster.existing.kubeconfig"),
    ("kubeconfig_pasted_into_context", rack({"source": "Existing", "existing": {"kubeconfig": {"secure": "v1:x"},
                                                                              "context": KUBECONFIG}}),
     "modelplane:inferenceClusters.rack.cluster.existing.context", "must be one line of printable text"),
    ("kubeconfig_as_cache_block", rack({"source": "Existing", "existing": {"kubeconfig": {"secure": "v1:x"},
                                                                         "cache": KUBECONFIG}}),
     "modelplane:inferenceClusters.rack.cluster.existing.cache", "must be a mapping of fields (got text (not shown"),
    ("kubeconfig_written_as_yaml_under_existing", rack({"source": "Existing", "existing": {
        "apiVersion": "v1", "users": [{"name": "admin", "user": {"client-key-data": SECRET}}]}}),
     "modelplane:inferenceClusters.rack.cluster.existing.apiVersion", "unknown field 'apiVersion'"),
    ("token_set_as_endpoint_auth", endpoint(auth=TOKEN), "modelplane:modelEndpoints.ml-team.saas.auth",
     "set it at modelplane:modelEndpoints.ml-team.saas.auth.token, encrypted: `pulumi config set --secret --path "
     "'modelplane:modelEndpoints.ml-team.saas.auth.token' <token>`"),
    ("token_set_as_a_key_under_auth", endpoint(auth={TOKEN: None}), "modelplane:modelEndpoints.ml-team.saas.auth",
     "has an unknown field (its name is not shown"),
    ("token_as_a_list_under_auth", endpoint(auth={"token": [TOKEN]}), "modelplane:modelEndpoints.ml-team.saas.auth.token",
     "must be a non-empty secret value"),
    ("token_set_as_cache_hugging_face", cache(TOKEN), "modelplane:modelCaches.ml-team.qwen.huggingFace",
     "set it at modelplane:modelCaches.ml-team.qwen.huggingFace.token"),
    ("token_with_a_typo_in_its_field", endpoint(auth={"tokne": TOKEN}), "modelplane:modelEndpoints.ml-team.saas.auth.tokne",
     "unknown field 'tokne'; did you mean 'token'?"),
]


def stack_file(tmp_path: Path, config: dict, raw: dict | None = None) -> Path:
    """A stack file as `pulumi config set --path` would write it (strings JSON-quoted, which YAML reads)."""
    lines = ["config:"]
    for key, value in config.items():
        lines.append(f"  modelplane:{key}: {json.dumps(value)}")
    for key, value in (raw or {}).items():
        lines.append(f"  {key}: {value}")
    path = tmp_path / "Pulumi.leak.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess:
    script = shutil.which("modelplane", path=os.path.dirname(sys.executable))
    command = [script] if script else [sys.executable, "-m", "modelplane"]
    return subprocess.run(command + list(args), cwd=REPO, capture_output=True, text=True, timeout=120)


def assert_no_secret(*outputs: str) -> None:
    for output in outputs:
        assert SECRET not in output, output
        assert "0123456789" not in output, output  # no part of the token either


@pytest.mark.parametrize("config, path, fix", [m[1:] for m in MISPLACED],
                         ids=[f"{m[0]}_is_not_echoed_by_validate" for m in MISPLACED])
def test_a_misplaced_secret_is_not_echoed_by_validate(tmp_path, config, path, fix):
    result = run_cli("validate", "--config", str(stack_file(tmp_path, config)))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert_no_secret(result.stdout, result.stderr)
    assert any(line.strip().startswith(f"{path}: ") and fix in line for line in result.stderr.splitlines()), result.stderr


@pytest.mark.parametrize("config, path, fix", [m[1:] for m in MISPLACED],
                         ids=[f"{m[0]}_is_not_echoed_by_the_loader" for m in MISPLACED])
@pytest.mark.parametrize("origin", ["stack-file", "pulumi"])
def test_a_misplaced_secret_is_not_echoed_by_the_loader(config, path, fix, origin):
    with pytest.raises(Exception) as error:
        load_fleet({k: json.dumps(v) for k, v in config.items()} if origin == "pulumi" else config, origin=origin)
    assert_no_secret(str(error.value), repr(error.value))
    assert any(str(issue).startswith(f"{path}: ") and fix in str(issue) for issue in error.value.issues), str(error.value)


def test_a_secure_value_where_no_secret_belongs_is_not_echoed(tmp_path):
    config = endpoint()
    path = stack_file(tmp_path, {}, raw={"modelplane:modelEndpoints": json.dumps(config["modelEndpoints"]).replace(
        '"https://api.example.com/"', '{"secure": "v1:' + SECRET + '"}')})
    result = run_cli("validate", "--config", str(path))
    assert result.returncode == 2
    assert_no_secret(result.stdout, result.stderr)
    assert "modelplane:modelEndpoints.ml-team.saas.url: is encrypted (secure:), but this field is not a secret" in result.stderr


def test_a_whole_key_encrypted_is_not_echoed(tmp_path):
    path = stack_file(tmp_path, {}, raw={"modelplane:inferenceClusters": '{secure: "v1:' + SECRET + '"}'})
    result = run_cli("validate", "--config", str(path))
    assert result.returncode == 2
    assert_no_secret(result.stdout, result.stderr)
    assert "modelplane:inferenceClusters: is encrypted as a whole" in result.stderr


def test_a_plain_text_kubeconfig_warning_does_not_echo_it(tmp_path):
    config = rack({"source": "Existing", "existing": {"kubeconfig": KUBECONFIG}})
    result = run_cli("validate", "--config", str(stack_file(tmp_path, config)))
    assert result.returncode == 0, result.stderr
    assert_no_secret(result.stdout, result.stderr)
    assert "modelplane:inferenceClusters.rack.cluster.existing.kubeconfig: is stored in plain text" in result.stderr


def test_a_misplaced_secret_is_not_echoed_by_plan(tmp_path):
    result = run_cli("plan", "--config", str(stack_file(tmp_path, endpoint(auth=TOKEN))))
    assert result.returncode == 2
    assert_no_secret(result.stdout, result.stderr)
    assert "set it at modelplane:modelEndpoints.ml-team.saas.auth.token" in result.stderr


# ---- the Pulumi program ------------------------------------------------------------------------------

def test_the_program_logs_no_secret_set_one_level_too_high(tmp_path):
    """`__main__.py` under plain mocks, in a fresh process: the config path a real `pulumi preview` takes."""
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(REPO / "__main__.py", project / "__main__.py")
    config = {**rack({"source": "Existing", "existing": KUBECONFIG}), **endpoint(auth=TOKEN)}
    (project / "stacks" / "Pulumi.leak.yaml").write_text(
        "config:\n" + "".join(f"  modelplane:{k}: {json.dumps(v)}\n" for k, v in config.items()))
    done = subprocess.run([sys.executable, str(REPO / "tests" / "plain_mocks_main.py"), str(project), "leak"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode != 0
    assert_no_secret(done.stdout, done.stderr)
    assert "2 errors in the modelplane stack config (listed above); nothing was changed" in done.stderr
    assert ("modelplane:inferenceClusters.rack.cluster.existing: must be a mapping of fields, not text (the text is not "
            "shown: it may be a secret); if it is the kubeconfig, set it at "
            "modelplane:inferenceClusters.rack.cluster.existing.kubeconfig") in done.stderr
    assert "set it at modelplane:modelEndpoints.ml-team.saas.auth.token" in done.stderr


@pytest.fixture
def pulumi_logs(monkeypatch) -> list[str]:
    logged: list[str] = []
    for level in ("error", "warn", "info", "debug"):
        original = getattr(pulumi.log, level)
        monkeypatch.setattr(pulumi.log, level, lambda msg, *a, _o=original, **k: (logged.append(msg), _o(msg, *a, **k))[1])
    return logged


SECRET_MARKED = [  # (case, config, the key Pulumi marks secret, the path, the message)
    ("url_from_a_secure_value", endpoint(url=f"https://{SECRET}.example.com:99999/"), "modelEndpoints",
     "modelplane:modelEndpoints.ml-team.saas.url", f"text of 44 characters ({HIDDEN_NOTE}) has an invalid port"),
    ("rewrite_path_from_a_secure_value", endpoint(rewritePath=SECRET), "modelEndpoints",
     "modelplane:modelEndpoints.ml-team.saas.rewritePath", "must start with '/'"),
    ("label_from_a_secure_value", endpoint(labels={"team": f"{SECRET}\n"}), "modelEndpoints",
     'modelplane:modelEndpoints.ml-team.saas.labels.team', "label values must be empty or alphanumerics"),
    ("kind_name_from_a_secure_value", rack({"source": "Kind", "kind": {"clusterName": f"{SECRET}!"}}), "inferenceClusters",
     "modelplane:inferenceClusters.rack.cluster.kind.clusterName", "is not a valid kind cluster name"),
    ("literal_from_a_secure_value", rack({"source": SECRET}), "inferenceClusters",
     "modelplane:inferenceClusters.rack.cluster.source", "must be one of 'Existing', 'Kind', 'EKS', 'GKE' or 'AKS' (got text"),
]


@pytest.mark.parametrize("config, secret_key, path, message", [m[1:] for m in SECRET_MARKED],
                         ids=[f"{m[0]}_is_not_logged_by_the_program" for m in SECRET_MARKED])
def test_a_value_in_a_key_pulumi_marks_secret_is_never_logged(config, secret_key, path, message, pulumi_logs, capsys):
    """Pulumi marks a whole key secret when any leaf was set with --secret, and hands it over decrypted:
    the program cannot tell which leaf was the secret, so no text of that key reaches a message."""
    pulumi.runtime.set_all_config({f"modelplane:{k}": json.dumps(v) for k, v in config.items()},
                                  [f"modelplane:{secret_key}"])
    try:
        with pytest.raises(pulumi.RunError) as error:
            program.run()
    finally:
        pulumi.runtime.set_all_config({}, [])
    captured = capsys.readouterr()
    assert_no_secret(str(error.value), captured.out, captured.err, *pulumi_logs)
    assert any(line.startswith(f"{path}: ") and message in line for line in pulumi_logs), pulumi_logs


def test_the_same_value_is_shown_when_the_key_holds_no_secret():
    config = endpoint(url="https://api.example.com:99999/")
    with pytest.raises(Exception) as error:
        load_fleet({k: json.dumps(v) for k, v in config.items()}, origin="pulumi")
    assert "'https://api.example.com:99999/' has an invalid port" in str(error.value)


# ---- how a value is shown when it may be shown ---------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("eu-west", "'eu-west'"),
    ("ml-team\n", "'ml-team\\n'"),
    ("a" * 100, "'" + "a" * 48 + "...' (100 characters)"),
    (KUBECONFIG, None),  # cut short and on one line
    (12, "12"),
    (10**30, "1000000000000000000000000000000"),
    (10**4999, "a number of about 5,000 digits"),
    (True, "true"),
    (None, "null"),
    ([1, 2], "a list"),
    ({"a": 1}, "a mapping"),
], ids=["name", "newline", "long", "kubeconfig", "int", "int_of_31_digits", "int_of_5000_digits", "bool", "null", "list",
        "mapping"])
def test_a_shown_value_is_one_short_line(value, expected):
    text = shown(value)
    assert "\n" not in text and len(text) < 90
    if expected is not None:
        assert text == expected
    assert SECRET not in text


def test_no_text_is_shown_while_text_is_hidden():
    with text_hidden():
        assert shown(TOKEN) == f"text of {len(TOKEN)} characters ({HIDDEN_NOTE})"
        assert shown(12) == "12"
    assert shown("abc") == "'abc'"
