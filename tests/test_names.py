"""Names derived from placement must equal the reference's (spec §2.3 vectors), so they port over."""
import pytest

from modelplane.scheduling.names import child_name, opaque_name, replica_name


@pytest.mark.parametrize("name, expected", [
    (opaque_name("my-model", "cluster-a", "0"), "my-model-5ab63"),
    (opaque_name("my-model", "cluster-a", "1"), "my-model-609c5"),
    (opaque_name("my-model", "cluster-b", "0"), "my-model-f0b76"),
    (child_name("test-cluster", "cluster-kubeconfig"), "test-cluster-cluster-kubeconfig-d0f89"),
    (child_name("test-cluster", "serving-stack"), "test-cluster-serving-stack-fd00b"),
    (child_name("my-model-5ab63", "main"), "my-model-5ab63-main-216f1"),
    (child_name("my-model-5ab63", "main", "standalone", "devices"), "my-model-5ab63-main-standalone-devices-74688"),
    (child_name("modelcache", "ml-team", "qwen"), "modelcache-ml-team-qwen-17db2"),
    # the seed's demo, as observed on its clusters
    (replica_name("mock-demo", "gpu-eu-west", 0), "mock-demo-be445"),
    (replica_name("mock-demo", "gpu-us-east", 0), "mock-demo-49b71"),
    (child_name("mock-demo-be445", "mock"), "mock-demo-be445-mock-47cef"),
])
def test_reference_vectors(name, expected):
    assert name == expected


def test_long_names_stay_within_63_characters():
    assert len(opaque_name("x" * 80, "c", "0")) == 63
    assert len(child_name("a" * 70, "b")) == 63 and child_name("a" * 56 + "-", "b").count("--") == 0
