"""The front door on your own cluster: `inferenceGateway.preinstalled: [gatewayApi]`.

An Existing front-door cluster often already has the Gateway API CRDs; declared, modelplane applies
no `gateway-api-crds` manifest there and nothing waits for one. Validation refuses what cannot
work, with the config path; `modelplane validate` says what is installed on the cluster.
"""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modelplane.api import ConfigError, load_fleet
from modelplane.api.inference_gateway import FRONT_DOOR_COMPONENTS
from modelplane.api.stackfile import read_stack_file
from modelplane.render import front_door as fd
from modelplane.render.fleet import release_waits_for, waits_for

from builders import traefik_front_door

REPO = Path(__file__).resolve().parent.parent
AT = "modelplane:inferenceGateway.preinstalled"
POOL = "192.168.10.200-192.168.10.250"


def own_front_door(preinstalled=None, source: str = "Existing", metallb: bool = True) -> dict:
    """The demo fleet, its front door on an Existing cluster (or `source`)."""
    config = read_stack_file(REPO / "stacks" / "Pulumi.demo.yaml").config
    gateway = traefik_front_door(config["inferenceGateway"])
    if source == "Existing":
        gateway["cluster"] = {"source": "Existing", "existing": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}}
    if metallb:
        gateway["traefik"]["metallb"] = {"addressPool": POOL}
    else:
        del gateway["traefik"]["loadBalancer"], gateway["traefik"]["metallb"]
    if preinstalled is not None:
        gateway["preinstalled"] = preinstalled
    return config


def errors_of(cfg: dict) -> list[tuple[str, str]]:
    try:
        load_fleet(copy.deepcopy(cfg), origin="pulumi")
    except ConfigError as error:
        return [(str(issue).split(": ", 1)[0], issue.message) for issue in error.issues]
    return []


# --- validation ----------------------------------------------------------------------------------

GOOD = {
    "nothing declared": own_front_door(),
    "empty list": own_front_door([]),
    "gatewayApi": own_front_door(["gatewayApi"]),
    "gatewayApi without MetalLB": own_front_door(["gatewayApi"], metallb=False),
    "empty list on kind": own_front_door([], source="Kind"),
}


@pytest.mark.parametrize("cfg", GOOD.values(), ids=GOOD.keys())
def test_valid(cfg):
    assert errors_of(cfg) == []


BAD = {
    "unknown name, close to one": (own_front_door(["gatewayAPI"]), f"{AT}[0]",
                                   "unknown component 'gatewayAPI' for a front door on Traefik; did you mean "
                                   "'gatewayApi'? known: gatewayApi (Traefik and MetalLB are always installed by "
                                   "modelplane)"),
    "traefik is not declarable": (own_front_door(["gatewayApi", "traefik"]), f"{AT}[1]",
                                  "unknown component 'traefik' for a front door on Traefik; known: gatewayApi "
                                  "(Traefik and MetalLB"),
    "an Envoy Gateway component on Traefik": (own_front_door(["envoyGateway"]), f"{AT}[0]",
                                              "unknown component 'envoyGateway' for a front door on Traefik"),
    "a workload-cluster component": (own_front_door(["certManager"]), f"{AT}[0]", "unknown component 'certManager'"),
    "on a kind cluster": (own_front_door(["gatewayApi"], source="Kind"), AT,
                          "only an Existing front-door cluster can have preinstalled components: modelplane creates "
                          "this Kind cluster"),
    "listed twice": (own_front_door(["gatewayApi", "gatewayApi"]), f"{AT}[1]", "'gatewayApi' is listed twice"),
}


@pytest.mark.parametrize("cfg, path, message", BAD.values(), ids=BAD.keys())
def test_invalid(cfg, path, message):
    found = errors_of(cfg)
    assert len(found) == 1, found  # one mistake, one error
    assert found[0][0] == path and message in found[0][1], found


def test_installs():
    gateway = load_fleet(own_front_door(["gatewayApi"]), origin="pulumi").inference_gateway
    assert not gateway.installs("gatewayApi")
    assert load_fleet(own_front_door(), origin="pulumi").inference_gateway.installs("gatewayApi")
    with pytest.raises(ValueError, match="unknown front-door component 'traefik'"):
        gateway.installs("traefik")
    assert FRONT_DOOR_COMPONENTS == ("envoyGateway", "gatewayApi")


# --- render --------------------------------------------------------------------------------------

@pytest.mark.parametrize("metallb", [True, False])
def test_render_skips_the_crds_and_nothing_waits_for_them(metallb):
    full = fd.front_door_stack(load_fleet(own_front_door(metallb=metallb), origin="pulumi"))
    stack = fd.front_door_stack(load_fleet(own_front_door(["gatewayApi"], metallb=metallb), origin="pulumi"))
    assert [m.name for m in full.remote_manifests] == ["gateway-api-crds"]
    assert stack.remote_manifests == []
    # Everything else is the same; only the waits on the manifest are gone.
    assert stack.releases == full.releases
    assert sorted(map(repr, stack.objects)) == sorted(map(repr, full.objects))
    [traefik] = [r for r in stack.releases if r.name == "traefik"]
    assert release_waits_for(full, traefik) == ("gateway-api-crds",)
    assert release_waits_for(stack, traefik) == ()
    assert all("gateway-api-crds" not in waits_for(stack, o) for o in stack.objects)
    gateway = next(o for o in stack.objects if o["kind"] == "Gateway")
    assert waits_for(full, gateway) == ("gateway-api-crds",) and waits_for(stack, gateway) == ()
    if metallb:
        pool = next(o for o in stack.objects if o["kind"] == "IPAddressPool")
        assert waits_for(stack, pool) == ("metallb",)


def test_render_front_door_has_no_crd_manifest():
    from modelplane.scheduling import schedule

    fleet = load_fleet(own_front_door(["gatewayApi"]), origin="pulumi")
    front = fd.front_door_parts(fleet, schedule(fleet), {}).manifests()
    assert front.remote_manifests == []
    assert [r.name for r in front.releases] == ["metallb", "traefik"]


# --- modelplane validate -------------------------------------------------------------------------

def validate(tmp_path: Path, cfg: dict) -> subprocess.CompletedProcess:
    cfg["inferenceGateway"]["cluster"]["existing"]["kubeconfig"] = {"secure": "v1:abc:def"}
    path = tmp_path / "Pulumi.own.yaml"
    path.write_text(yaml.safe_dump({"config": {f"modelplane:{k}": v for k, v in cfg.items()}}, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "modelplane", "validate", "--config", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("preinstalled", [[], ["gatewayApi"]])
def test_validate_says_what_is_installed_on_an_existing_front_door(tmp_path, preinstalled):
    result = validate(tmp_path, own_front_door(preinstalled))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if "modelplane:inferenceGateway.cluster.source: an Existing "
                                                        "front-door cluster: modelplane installs there:" in line)
    note = lines[start:start + 4]
    assert note[1] == ("  Helm releases: metallb (metallb 0.14.9, namespace metallb-system), "
                       "traefik (traefik 40.2.0, namespace traefik-system)")
    if preinstalled:
        assert note[2] == "  CRD manifests: none"
        assert note[3] == "  left alone (inferenceGateway.preinstalled): gatewayApi"
    else:
        assert note[2] == ("  CRD manifests: gatewayApi: https://github.com/kubernetes-sigs/gateway-api/releases/"
                           "download/v1.5.1/standard-install.yaml")
        assert note[3].startswith("  left alone (inferenceGateway.preinstalled): nothing; if the cluster already "
                                  "runs the Gateway API CRDs (GKE and many platforms install them), add "
                                  "gatewayApi to inferenceGateway.preinstalled")


def test_validate_says_nothing_for_a_kind_front_door(tmp_path):
    path = REPO / "stacks" / "Pulumi.demo.yaml"
    result = subprocess.run([sys.executable, "-m", "modelplane", "validate", "--config", str(path)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "front-door cluster" not in result.stderr
