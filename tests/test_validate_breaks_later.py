"""`validate` refuses what would break later, and echoes no credential (issue 25, findings 6 and 7).

Each value here passed `validate` before and then broke `render` or `pulumi up` (a version spliced into
a manifest URL reaching another file, a host the pinned CRDs refuse, two endpoints deriving one object
name), or printed or silently dropped a credential.
"""
from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders import fleet_config
from modelplane.api import ConfigError, load_fleet
from modelplane.render import front_door as fd
from modelplane.scheduling import child_name, schedule

REPO = Path(__file__).resolve().parent.parent
GATEWAY = {"clusterName": "control", "cluster": {"source": "Kind"},
           "envoyGateway": {"loadBalancer": "MetalLB", "metallb": {}}}
PASSWORD = "hunter2-pa/ss#word"
# Two 61-character endpoint names whose `<name>-upstream` children collide (found by a birthday search over the
# last four characters: 20 bits of hash).
CLASHING = ("e" * 57 + "aala", "e" * 57 + "abfi")


def with_endpoints(endpoints: dict, fallback: bool = True) -> dict:
    config = fleet_config(inferenceGateway=copy.deepcopy(GATEWAY))
    config["modelEndpoints"] = {"ml-team": endpoints}
    config["modelServices"] = {"ml-team": {"mock": {"endpoints": [
        {"selector": {"matchLabels": {"modelplane.ai/deployment": "mock-demo"}}},
        {"fallback": fallback, "selector": {"matchLabels": {"provider": "saas"}}}]}}}
    return config


def issues_of(config: dict) -> list[str]:
    try:
        load_fleet(config)
    except ConfigError as error:
        return [str(issue) for issue in error.issues]
    return []


# --- servingStack.versions.* must be a version -----------------------------------------------------------------

@pytest.mark.parametrize("version", ["../v1.5.0", "v1.5.1/../../v1.0.0", "v1.5.1?x=1", "v1.5.1#x", "latest",
                                     "v1.5", "1.2.3/evil", "%2e%2e", "v1.5.1 "])
def test_a_version_that_is_not_a_version_is_refused(version):
    config = fleet_config(servingStack={"versions": {"gatewayApi": version}})
    [issue] = [i for i in issues_of(config) if "versions.gatewayApi" in i]
    assert "is not a version: write MAJOR.MINOR.PATCH" in issue or "must not" in issue, issue


@pytest.mark.parametrize("version", ["v1.5.1", "72.6.2", "1.0.0-rc.1", "v0.7.0+build.5"])
def test_versions_as_charts_and_releases_are_tagged_pass(version):
    assert issues_of(fleet_config(servingStack={"versions": {"gatewayApi": version}})) == []


# --- endpoint hosts and ports: what the pinned CRDs take ----------------------------------------------------------

@pytest.mark.parametrize("url, message", [
    ("https://api.example.com./", "no trailing dot"),
    ("https://my_api.example.com/", "no '_'"),
    ("https://" + "a" * 64 + ".example.com/", "labels of at most 63 characters"),
    ("http://[fe80::1%25eth0]:8000/", "zone id"),
    ("http://[::ffff:10.0.0.1]:8000/", "without an IPv4 tail"),
    ("https://api.example.com:0/", "has port 0"),
])
def test_an_endpoint_host_or_port_the_crds_refuse_is_refused(url, message):
    [issue] = issues_of(with_endpoints({"saas": {"url": url, "labels": {"provider": "saas"}}}))
    assert "modelplane:modelEndpoints.ml-team.saas.url" in issue and message in issue, issue


@pytest.mark.parametrize("url", ["https://api.example.com/", "http://10.0.0.1:8000/", "http://[fe80::1]:8000/",
                                 "https://API.Example.com:8443/v1/"])
def test_endpoint_hosts_the_crds_take_pass_and_render_valid_objects(url):
    from k8s_validation import validate_object

    config = with_endpoints({"saas": {"url": url, "labels": {"provider": "saas"}}})
    assert issues_of(config) == []
    fleet = load_fleet(config)
    for obj in fd.front_door_parts(fleet, schedule(fleet), {}).manifests().objects:
        validate_object(obj)


# --- credentials: refused in an endpoint URL, never echoed ---------------------------------------------------------

@pytest.mark.parametrize("url", [f"https://user:{PASSWORD}@api.example.com/", "https://user:plain@api.example.com/",
                                 f"https://{PASSWORD}@api.example.com/"])
def test_credentials_in_an_endpoint_url_are_refused_pointing_at_auth_and_not_shown(url):
    [issue] = issues_of(with_endpoints({"saas": {"url": url, "labels": {"provider": "saas"}}}))
    assert "must not hold credentials" in issue and "put the credential in `auth` instead" in issue, issue
    assert "hunter2" not in issue and "plain" not in issue and "pa/ss" not in issue


def run_validate(tmp_path: Path, extra: dict) -> subprocess.CompletedProcess:
    # the extra keys go under `config:` (indented by two spaces like the demo's own)
    text = (REPO / "stacks" / "Pulumi.demo.yaml").read_text().rstrip("\n") + "\n  " + \
        yaml.safe_dump(extra, default_flow_style=False, width=1000).rstrip("\n").replace("\n", "\n  ") + "\n"
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "modelplane", "validate", "--config", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("mirror", [f"https://user:{PASSWORD}@mirror.internal/charts",
                                    {"charts": f"https://user:{PASSWORD}@mirror.internal/charts"},
                                    {"manifests": f"https://user:{PASSWORD}@mirror.internal/m"}])
def test_a_mirror_with_credentials_is_refused_without_echoing_them(tmp_path, mirror):
    result = run_validate(tmp_path, {"modelplane:mirror": mirror})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "modelplane:mirror" in result.stderr
    for part in ("hunter2", "pa/ss", PASSWORD):
        assert part not in result.stdout + result.stderr


def test_an_endpoint_url_with_a_slash_in_its_password_is_not_printed(tmp_path):
    result = run_validate(tmp_path, {"modelplane:modelEndpoints": {"ml-team": {"saas": {
        "url": f"https://user:{PASSWORD}@api.example.com/", "labels": {"provider": "saas"}}}}})
    assert result.returncode == 2
    assert "modelplane:modelEndpoints.ml-team.saas.url" in result.stderr and "https://***@" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


# --- endpoint names whose derived children clash -------------------------------------------------------------------

def test_the_clashing_pair_does_clash():
    assert child_name(CLASHING[0], "upstream") == child_name(CLASHING[1], "upstream")


def test_two_endpoints_whose_derived_names_clash_are_refused_by_validate_naming_both(tmp_path):
    endpoints = {name: {"url": "https://api.example.com/", "labels": {"provider": "saas"}} for name in CLASHING}
    [issue] = issues_of(with_endpoints(endpoints))
    assert issue.startswith(f"modelplane:modelEndpoints.ml-team.{CLASHING[1]}: its upstream object would be named ")
    assert f"of endpoint {CLASHING[0]}" in issue and "shorten or rename one of the two endpoints" in issue
    result = run_validate(tmp_path, {"modelplane:modelEndpoints": {"ml-team": endpoints}})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"modelplane:modelEndpoints.ml-team.{CLASHING[1]}: its upstream object" in result.stderr
    assert "Pulumi.x.yaml:" in result.stderr  # with its line


def test_the_same_names_in_two_namespaces_do_not_clash():
    config = with_endpoints({CLASHING[0]: {"url": "https://api.example.com/", "labels": {"provider": "saas"}}})
    config["modelEndpoints"]["other-team"] = {CLASHING[1]: {"url": "https://api.example.com/"}}
    assert issues_of(config) == []


@pytest.mark.parametrize("traefik", [False, True])
def test_every_object_render_derives_from_an_endpoint_name_is_in_the_checked_list(traefik):
    """ENDPOINT_CHILDREN must list every child render makes for a hand-made endpoint (with auth, as a fallback),
    or the clash check would miss one."""
    from builders import traefik_front_door
    from modelplane.api.child_names import ENDPOINT_CHILDREN

    name = "saas"
    config = with_endpoints({name: {"url": "https://api.example.com/", "labels": {"provider": "saas"},
                                    "rewritePath": "/v1/", "auth": {"token": "t"}}}, fallback=not traefik)
    if traefik:
        config["inferenceGateway"] = traefik_front_door(config["inferenceGateway"])
    fleet = load_fleet(config)
    objects = fd.front_door_parts(fleet, schedule(fleet), {}).manifests().objects
    derived = {name} | {child_name(name, s) for s in ENDPOINT_CHILDREN}
    from_endpoint = {o["metadata"]["name"] for o in objects
                     if o["metadata"].get("namespace") == "ml-team" and o["metadata"]["name"].startswith(name)}
    assert from_endpoint and from_endpoint <= derived, from_endpoint - derived
