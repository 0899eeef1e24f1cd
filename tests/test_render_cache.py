"""A ModelCache on one workload cluster (spec §10): PVC, token Secret, hydration Job, storage classes."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from builders import fleet_config
from k8s_validation import validate_object
from modelplane.api import NamespacedName, load_fleet
from modelplane.api.stackfile import read_stack_file
from modelplane.render import cache as mc
from modelplane.scheduling import child_name

STACKS = Path(__file__).resolve().parent.parent / "stacks"
TOKEN = "hf_DO_NOT_RENDER_0123456789"


def cache_fleet(hugging_face: dict):
    config = fleet_config(modelCaches={"ml-team": {"qwen": {"source": "HuggingFace", "huggingFace": hugging_face}}})
    return load_fleet(config)


def rendered(hugging_face: dict, storage_class: str = "modelplane-rwx"):
    fleet = cache_fleet(hugging_face)
    cache = fleet.model_caches[NamespacedName("ml-team", "qwen")]
    return {o["kind"]: o for o in mc.render_cache("ml-team", "qwen", cache, "gpu-eu-west", storage_class)}


@pytest.mark.parametrize("name, expected", [
    (mc.pvc_name("ml-team", "qwen"), "modelcache-ml-team-qwen-17db2"),  # spec §2.3
    (mc.job_name("ml-team", "qwen"), child_name("modelcache", "ml-team", "qwen", "hydrate")),
    (mc.secret_name("ml-team", "qwen"), child_name("modelcache", "ml-team", "qwen", "auth")),
    (child_name("test-cluster", "cluster-kubeconfig"), "test-cluster-cluster-kubeconfig-d0f89"),
    (child_name("my-model-5ab63", "main", "standalone", "devices"), "my-model-5ab63-main-standalone-devices-74688"),
])
def test_names(name, expected):
    assert name == expected


def test_pvc():
    pvc = rendered({"repo": "Qwen/Qwen3-8B", "sizeGiB": 20})["PersistentVolumeClaim"]
    assert pvc["metadata"]["name"] == "modelcache-ml-team-qwen-17db2"
    assert pvc["metadata"]["namespace"] == "ml-team"
    assert pvc["metadata"]["labels"]["modelplane.ai/modelcache"] == "qwen"
    assert pvc["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "modelplane-rwx",
                           "resources": {"requests": {"storage": "20Gi"}}}


def test_job_without_token():
    objects = rendered({"repo": "Qwen/Qwen3-8B", "sizeGiB": 20})
    assert set(objects) == {"PersistentVolumeClaim", "Job"}  # no token, no Secret
    job = objects["Job"]
    assert job["metadata"]["name"] == mc.job_name("ml-team", "qwen")
    assert job["metadata"]["namespace"] == "ml-team"
    assert job["spec"]["backoffLimit"] == 3 and job["spec"]["ttlSecondsAfterFinished"] == 180
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    (container,) = pod["containers"]
    assert container["name"] == "hydrate" and container["image"] == "python:3.11-slim"
    assert container["command"][:2] == ["/bin/sh", "-c"]
    assert "env" not in container
    assert container["volumeMounts"] == [{"name": "artifact", "mountPath": "/mnt/artifact"}]
    assert pod["volumes"] == [{"name": "artifact", "persistentVolumeClaim": {
        "claimName": "modelcache-ml-team-qwen-17db2"}}]


@pytest.mark.parametrize("revision, download", [
    (None, "hf download Qwen/Qwen3-8B --local-dir /mnt/artifact"),
    ("a1b2c3", "hf download Qwen/Qwen3-8B --revision a1b2c3 --local-dir /mnt/artifact"),
    ("refs/pr/1; rm -rf /", "hf download Qwen/Qwen3-8B --revision 'refs/pr/1; rm -rf /' --local-dir /mnt/artifact"),
])
def test_hydrate_script(revision, download):
    script = mc.hydrate_script("Qwen/Qwen3-8B", revision)
    lines = script.splitlines()
    assert lines[0] == "set -e"
    assert lines[1].startswith("if [ -f /mnt/artifact/.modelplane-hydrated ]; then") and "exit 0" in lines[1]
    assert lines[2] == "pip install --quiet huggingface_hub"
    assert lines[3] == download
    assert shlex.split(lines[3])[:3] == ["hf", "download", "Qwen/Qwen3-8B"]
    assert lines[4] == "touch /mnt/artifact/.modelplane-hydrated"


def test_with_a_token_the_secret_is_a_placeholder_and_the_job_reads_it():
    objects = rendered({"repo": "meta-llama/Llama-3.3-70B-Instruct", "sizeGiB": 150, "token": TOKEN})
    assert list(objects) == ["PersistentVolumeClaim", "Secret", "Job"]  # the Secret before the Job that reads it
    secret = objects["Secret"]
    assert secret["metadata"]["name"] == mc.secret_name("ml-team", "qwen")
    assert secret["metadata"]["namespace"] == "ml-team"
    assert secret["stringData"] == {"HF_TOKEN": "<secret: modelplane:modelCaches.ml-team.qwen.huggingFace.token>"}
    (container,) = objects["Job"]["spec"]["template"]["spec"]["containers"]
    assert container["env"] == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": mc.secret_name("ml-team", "qwen"), "key": "HF_TOKEN"}}}]
    assert TOKEN not in json.dumps(list(objects.values()))


@pytest.mark.parametrize("hugging_face", [
    {"repo": "Qwen/Qwen3-8B", "sizeGiB": 20},
    {"repo": "Qwen/Qwen3-8B", "revision": "main", "sizeGiB": 1, "token": TOKEN},
])
def test_objects_are_valid(hugging_face):
    objects = list(rendered(hugging_face).values())
    problems = {f"{o['kind']}/{o['metadata']['name']}": validate_object(o) for o in objects}
    assert {k: v for k, v in problems.items() if v} == {}


def test_no_storage_class_is_an_error():
    fleet = cache_fleet({"repo": "Qwen/Qwen3-8B", "sizeGiB": 20})
    cache = fleet.model_caches[NamespacedName("ml-team", "qwen")]
    with pytest.raises(ValueError, match="gpu-eu-west"):
        mc.render_cache("ml-team", "qwen", cache, "gpu-eu-west", None)


# --- storage classes -----------------------------------------------------------------------------

def test_cache_storage_class_per_source():
    cloud = load_fleet(read_stack_file(STACKS / "Pulumi.cloud.yaml").config)
    assert {c: mc.cache_storage_class(cloud, c) for c in cloud.inference_clusters} == {
        "aws-us-east": "modelplane-rwx-efs", "gcp-us-central": "modelplane-rwx", "azure-eu-west": "modelplane-rwx-fs"}
    demo = load_fleet(read_stack_file(STACKS / "Pulumi.demo.yaml").config)
    assert {c: mc.cache_storage_class(demo, c) for c in demo.inference_clusters} == {
        "gpu-eu-west": None, "gpu-us-east": None}


@pytest.mark.parametrize("existing, expected", [
    ({"kubeconfig": "kubeconfig-text", "cache": {"storageClassName": "nfs-rwx"}}, "nfs-rwx"),
    ({"kubeconfig": "kubeconfig-text"}, None),
])
def test_cache_storage_class_existing(existing, expected):
    config = fleet_config()
    config["inferenceClusters"]["byo"] = {"cluster": {"source": "Existing", "existing": existing},
                                          "nodePools": [{"name": "gpu", "className": "synthetic-gpu"}]}
    fleet = load_fleet(config)
    assert mc.cache_storage_class(fleet, "byo") == expected


def test_cloud_stack_cache_on_gke():
    fleet = load_fleet(read_stack_file(STACKS / "Pulumi.cloud.yaml").config)
    key = NamespacedName("ml-team", "qwen3-8b")
    objects = mc.render_cache(key.namespace, key.name, fleet.model_caches[key], "gcp-us-central",
                              mc.cache_storage_class(fleet, "gcp-us-central"))
    assert [o["kind"] for o in objects] == ["PersistentVolumeClaim", "Job"]
    assert objects[0]["spec"]["storageClassName"] == "modelplane-rwx"
    assert objects[0]["spec"]["resources"]["requests"]["storage"] == "20Gi"
