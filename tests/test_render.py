"""Every object the demo and cloud stacks render is valid for Kubernetes 1.34 and the pinned CRDs,
names follow placement, and no secret value is ever written."""
from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache

import pytest
import yaml

from builders import REPO
from k8s_validation import validate_object
from modelplane.api import NamespacedName, load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.render import kind_address_pools, render_fleet
from modelplane.render.cache import CLOUD_STORAGE_CLASSES
from modelplane.render.fleet import waits_for, workload_stack
from modelplane.render.front_door import front_door_stack
from modelplane.render.metallb import KindNetworkError, kind_cluster_names
from modelplane.scheduling import schedule
from modelplane.scheduling.names import child_name


@lru_cache(maxsize=None)
def rendered(stack: str):
    fleet = load_fleet(read_stack_file(REPO / "stacks" / f"Pulumi.{stack}.yaml").config)
    return fleet, render_fleet(fleet, schedule(fleet))


def every_object():
    for stack in ("demo", "cloud"):
        for cluster in rendered(stack)[1]:
            for obj in cluster.objects:
                meta = obj["metadata"]
                yield pytest.param(obj, id=f"{stack}/{cluster.cluster}/{obj['kind']}/{meta.get('namespace', '-')}/{meta['name']}")


@pytest.mark.parametrize("obj", every_object())
def test_valid_for_the_cluster(obj):
    assert validate_object(obj) == []


@pytest.mark.parametrize("stack, clusters", [("demo", ["control", "gpu-eu-west", "gpu-us-east"]),
                                             ("cloud", ["front-door", "aws-us-east", "azure-eu-west", "gcp-us-central"])])
def test_one_folder_per_cluster_front_door_first(stack, clusters):
    assert [c.cluster for c in rendered(stack)[1]] == clusters
    assert [c.role for c in rendered(stack)[1]] == ["front-door"] + ["workload"] * (len(clusters) - 1)


def objects_of(stack: str, cluster: str, kind: str) -> list[dict]:
    manifests = next(c for c in rendered(stack)[1] if c.cluster == cluster)
    return [o for o in manifests.objects if o["kind"] == kind]


def test_demo_replica_objects_follow_the_placement():
    [deployment] = [d for d in objects_of("demo", "gpu-eu-west", "Deployment") if "epp" not in d["metadata"]["name"]]
    replica = "mock-demo-be445"
    assert deployment["metadata"]["name"] == child_name(replica, "mock")
    assert deployment["metadata"]["namespace"] == "ml-team"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"modelplane.ai/pool": "gpu-eu-west"}
    assert pod["resourceClaims"] == [{"name": "devices",
                                      "resourceClaimTemplateName": child_name(replica, "mock", "standalone", "devices")}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    container = pod["containers"][0]
    assert container["ports"] == [{"containerPort": 8000}] and container["readinessProbe"]["httpGet"]["path"] == "/health"
    [claim] = objects_of("demo", "gpu-eu-west", "ResourceClaimTemplate")
    [request] = claim["spec"]["spec"]["devices"]["requests"]
    assert request == {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1, "selectors": [
        {"cel": {"expression": 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0'}}]}}
    [route, by_host] = [r for r in objects_of("demo", "gpu-eu-west", "HTTPRoute")]
    assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == f"/ml-team/{replica}/"
    assert route["spec"]["parentRefs"] == [{"name": "inference-gateway", "namespace": "modelplane-system"}]
    # The front door reaches (and health-checks) the replica by its host name, paths as they are.
    assert by_host["spec"]["hostnames"] == [f"{replica}.ml-team.replica.modelplane.internal"]
    assert by_host["spec"]["rules"][0]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert by_host["spec"]["rules"][0]["backendRefs"] == route["spec"]["rules"][0]["backendRefs"]


def test_leader_worker_deployments_become_leader_worker_sets():
    [lws] = objects_of("cloud", "aws-us-east", "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    leader_env = template["leaderTemplate"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in leader_env[:2]] == ["MODELPLANE_LEADER_ADDRESS", "MODELPLANE_RANK"]
    replica = lws["metadata"]["labels"]["modelplane.ai/deployment"]
    names = {c["metadata"]["name"] for c in objects_of("cloud", "aws-us-east", "ResourceClaimTemplate")}
    placed = next(r for r in rendered("cloud")[1][1].objects if r["kind"] == "InferencePool")["metadata"]["name"][:-5]
    assert replica == "llama-70b"
    assert names == {child_name(placed, "vllm", "leader", "devices"), child_name(placed, "vllm", "worker", "devices")}


def test_cached_deployments_mount_the_cache_and_get_the_model_flag():
    deployments = [d for d in objects_of("cloud", "gcp-us-central", "Deployment") if "epp" not in d["metadata"]["name"]]
    assert deployments
    claim = child_name("modelcache", "ml-team", "qwen3-8b")
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": claim}} in pod["volumes"]
        assert "--model=/mnt/models" in pod["containers"][0]["args"]
    assert [p["metadata"]["name"] for p in objects_of("cloud", "gcp-us-central", "PersistentVolumeClaim")] == [claim]


def test_no_secret_value_is_ever_rendered():
    config = read_stack_file(REPO / "stacks" / "Pulumi.cloud.yaml").config
    config["modelEndpoints"]["ml-team"]["together"]["auth"] = {"token": "sk-live-DO-NOT-LEAK"}
    config["modelCaches"]["ml-team"]["qwen3-8b"]["huggingFace"]["token"] = "hf_DO_NOT_LEAK"
    fleet = load_fleet(config, origin="pulumi")
    text = json.dumps([[c.objects, [r.to_dict() for r in c.releases]] for c in render_fleet(fleet, schedule(fleet))])
    assert "DO-NOT-LEAK" not in text and "DO_NOT_LEAK" not in text


def test_kind_address_pools_do_not_overlap():
    pools = kind_address_pools(["control", "gpu-eu-west", "gpu-us-east"])
    assert pools == {"control": "172.18.255.239-172.18.255.254", "gpu-eu-west": "172.18.255.223-172.18.255.238",
                     "gpu-us-east": "172.18.255.207-172.18.255.222"}


def test_kind_address_pools_refuse_a_network_too_small():
    with pytest.raises(KindNetworkError, match="too small for 3 MetalLB ranges"):
        kind_address_pools(["a", "b", "c"], "172.18.0.0/26")


def manifests_of(stack: str, cluster: str):
    return next(c for c in rendered(stack)[1] if c.cluster == cluster)


def test_every_kind_cluster_gets_metallb_with_its_own_range():
    """Workload clusters on kind have no cloud load balancer either: their gateways get addresses from MetalLB."""
    fleet = rendered("demo")[0]
    pools = kind_address_pools(kind_cluster_names(fleet))
    for cluster in ("control", "gpu-eu-west", "gpu-us-east"):
        manifests = manifests_of("demo", cluster)
        [pool] = objects_of("demo", cluster, "IPAddressPool")
        assert pool["spec"]["addresses"] == [pools[cluster]]
        assert objects_of("demo", cluster, "L2Advertisement")[0]["spec"] == {"ipAddressPools": ["modelplane"]}
        assert "metallb-system" in {n["metadata"]["name"] for n in objects_of("demo", cluster, "Namespace")}
        assert manifests.releases[0].name == "metallb" and manifests.releases[0].version == "0.14.9"
        # The range is computed offline from kind's default network: a named placeholder says so.
        [placeholder] = [p for p in manifests.placeholders if p.name == f"{cluster}.metallbAddressPool"]
        assert placeholder.token == pools[cluster] and "172.18.0.0/16" in placeholder.value
    for cluster in ("aws-us-east", "azure-eu-west", "gcp-us-central", "front-door"):
        assert not [r for r in manifests_of("cloud", cluster).releases if r.name == "metallb"]


@pytest.mark.parametrize("cluster, source, parameters", [
    ("aws-us-east", "EKS", {"provisioningMode": "efs-ap", "fileSystemId": "<deployed: aws-us-east.efsFileSystemId>",
                            "directoryPerms": "700"}),
    ("gcp-us-central", "GKE", {"tier": "enterprise", "network": "<deployed: gcp-us-central.networkName>"}),
    ("azure-eu-west", "AKS", {"skuName": "Premium_LRS"}),
])
def test_cloud_clusters_get_their_read_write_many_storage_class_first(cluster, source, parameters):
    manifests = manifests_of("cloud", cluster)
    storage = manifests.objects[0]
    assert storage["kind"] == "StorageClass" and storage["metadata"]["name"] == CLOUD_STORAGE_CLASSES[source]
    assert storage["parameters"] == parameters
    # A value the cloud hands out once the cluster exists is a named placeholder.
    tokens = {p.token: p.name for p in manifests.placeholders}
    for value in parameters.values():
        if value.startswith("<deployed: "):
            assert tokens[value] == value[len("<deployed: "):-1]
    assert not objects_of("cloud", "front-door", "StorageClass")  # the front door stages no caches


def test_remote_manifests_per_cluster():
    for stack in ("demo", "cloud"):
        fleet, manifests = rendered(stack)
        for cluster in manifests:
            if cluster.role == "front-door":
                expected = []  # Envoy Gateway's chart brings the Gateway API CRDs (Traefik: test_render_front_door)
            else:
                version = fleet.serving_stack_for(cluster.cluster).versions.inference_extension
                expected = [("inference-extension-crds", "inferenceExtension", version,
                             f"https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/"
                             f"{version}/manifests.yaml")]
            assert [(m.name, m.component, m.version, m.url) for m in cluster.remote_manifests] == expected


def test_objects_are_listed_in_install_order():
    """Namespaces before what lives in them (rendered, or made by a release the object waits for); a stack's
    objects that wait for nothing before those a release serves; a replica's configuration before its workloads."""
    for stack in ("demo", "cloud"):
        fleet, manifests = rendered(stack)
        for cluster in manifests:
            part = (front_door_stack(fleet) if cluster.role == "front-door" else workload_stack(fleet, cluster.cluster))
            release_namespaces = {r.name: r.namespace for r in part.releases}
            seen_namespaces = set()
            for obj in cluster.objects:
                if obj["kind"] == "Namespace":
                    seen_namespaces.add(obj["metadata"]["name"])
                elif "namespace" in obj["metadata"]:
                    made = {release_namespaces[n] for n in waits_for(part, obj) if n in release_namespaces}
                    assert obj["metadata"]["namespace"] in seen_namespaces | made, (cluster.cluster, obj["metadata"])
            waits = [bool(waits_for(part, o)) for o in part.objects]
            assert waits == sorted(waits), cluster.cluster  # False (waits for nothing) first
        replicas = {}
        for cluster in manifests:
            for obj in cluster.objects:
                replica = obj["metadata"].get("labels", {}).get("modelplane.ai/deployment")
                if replica and cluster.role == "workload":
                    key = (cluster.cluster, obj["metadata"]["namespace"], replica,
                           obj["metadata"]["labels"].get("modelplane.ai/replica-index"))
                    replicas.setdefault(key, []).append(obj["kind"] in ("Deployment", "LeaderWorkerSet"))
        assert replicas
        for key, workloads in replicas.items():
            assert workloads == sorted(workloads) and workloads[-1], key


def test_pulumi_await_annotations_are_rendered():
    """What `pulumi up` applies, annotations included: Gateways wait for an address, LeaderWorkerSets for
    Available, a cache's hydration Job and a replica's endpoint-picker Service are not awaited."""
    for stack in ("demo", "cloud"):
        for cluster in rendered(stack)[1]:
            for obj in cluster.objects:
                annotations = obj["metadata"].get("annotations", {})
                expected = {"Gateway": {"pulumi.com/waitFor": "jsonpath={.status.addresses[0].value}"},
                            "LeaderWorkerSet": {"pulumi.com/waitFor": "condition=Available"},
                            "Job": {"pulumi.com/skipAwait": "true"}}.get(obj["kind"], {})
                if obj["metadata"]["name"] == "modelplane-hop":
                    expected = {}  # the hop's Gateway is internal: nothing needs its address
                if obj["kind"] == "Service" and obj["metadata"]["name"].endswith("-epp"):
                    expected = {"pulumi.com/skipAwait": "true"}  # its Deployment's await says the picker is up
                assert {k: v for k, v in annotations.items() if k.startswith("pulumi.com/")} == expected, obj["kind"]


def test_render_command_writes_a_folder_per_cluster(tmp_path):
    result = subprocess.run([sys.executable, "-m", "modelplane", "render", "--stack", "demo", "--out", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["control", "gpu-eu-west", "gpu-us-east"]
    assert result.stdout.splitlines()[:3] == [
        f"{tmp_path / 'control'}: 0 remote manifests, 25 objects, 2 Helm releases, 3 placeholders",
        f"{tmp_path / 'gpu-eu-west'}: 1 remote manifests, 19 objects, 9 Helm releases, 1 placeholders",
        f"{tmp_path / 'gpu-us-east'}: 1 remote manifests, 19 objects, 9 Helm releases, 1 placeholders"]
    assert "from the real one by `pulumi up`" in result.stdout
    for folder in tmp_path.iterdir():
        releases = yaml.safe_load((folder / "meta" / "helm-releases.yaml").read_text())
        assert isinstance(releases, list)
        manifests = yaml.safe_load((folder / "meta" / "remote-manifests.yaml").read_text())
        # Workload clusters: the Inference Extension CRDs; the front door's Envoy Gateway chart brings its own.
        assert len(manifests) == (0 if folder.name == "control" else 1)
        assert all(m["url"].startswith("https://github.com/kubernetes-sigs/") for m in manifests)
        placeholders = yaml.safe_load((folder / "meta" / "placeholders.yaml").read_text())
        assert f"{folder.name}.metallbAddressPool" in {p["name"] for p in placeholders}
        for path in folder.glob("[0-9]*.yaml"):
            assert validate_object(yaml.safe_load(path.read_text())) == [], path.name


def test_prefill_decode_replicas_render_valid_and_decorated():
    from builders import demo_cluster, demo_member

    decode = demo_member(cel=None)
    decode["nodeSelector"] = {"devices": [{"name": "gpu"}]}
    decode["template"]["spec"]["containers"][0]["args"] = ["--port=8200", "--block-size=32"]
    prefill = demo_member(cel=None)
    prefill["nodeSelector"] = {"devices": [{"name": "gpu"}]}
    config = {
        "inferenceClasses": {"synthetic-gpu": {"devices": [{"name": "gpu", "driver": "gpu.example.com",
                                                            "deviceClassName": "gpu.example.com", "count": 2}]}},
        "inferenceClusters": {"a": demo_cluster(nodePools=[{"name": "gpu", "className": "synthetic-gpu", "nodeCount": 4}])},
        "modelDeployments": {"ml": {"pd": {"replicas": 1, "template": {"spec": {
            "serving": {"mode": "PrefillDecode"},
            "engines": [{"name": "prefill", "phase": "Prefill", "members": [prefill]},
                        {"name": "decode", "phase": "Decode", "members": [decode]}]}}}}},
    }
    fleet = load_fleet(config)
    [workload] = render_fleet(fleet, schedule(fleet))
    for obj in workload.objects:
        assert validate_object(obj) == [], obj["metadata"]["name"]
    deployments = {d["metadata"]["name"]: d for d in workload.objects if d["kind"] == "Deployment"}
    replica = schedule(fleet).deployments[NamespacedName("ml", "pd")].replicas[0].name
    decode_pod = deployments[child_name(replica, "decode")]["spec"]["template"]
    assert decode_pod["metadata"]["labels"]["llm-d.ai/role"] == "decode"
    engine, sidecar = decode_pod["spec"]["containers"]
    assert engine["ports"] == [{"containerPort": 8200}] and sidecar["name"] == "pd-sidecar"
    assert "--vllm-port=8200" in sidecar["args"]
    assert {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5557"} in engine["env"]
    [config_map] = [o for o in workload.objects if o["kind"] == "ConfigMap"]
    epp = yaml.safe_load(config_map["data"]["epp-config.yaml"])
    assert [p["name"] for p in epp["schedulingProfiles"]] == ["prefill", "decode"]
    assert epp["plugins"][0]["parameters"]["blockSizeTokens"] == 32
