"""The floor of `pulumi up` (tests/e2e/floor.py): the render folder read into apply steps, placeholders, awaits,
and the order of kubectl and helm commands per cluster, with the tools faked (no process, no cluster)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

import k8s_validation
from e2e import floor
from e2e.charts import mirror_config, write_mirror
from e2e.floor import (DEPLOYMENT_DONE, FIRST_KINDS, FloorError, ObjectFile, Placeholder, awaits, chart_crds,
                       deployed_objects, fill, read_steps)
from modelplane.cli import load_file
from modelplane.render import render_fleet, write_manifests
from modelplane.render.fleet import cluster_stacks
from modelplane.render.front_door_envoy_routes import gateway_alias_objects
from modelplane.scheduling import schedule

REPO = Path(__file__).resolve().parent.parent
E2E_STACK = REPO / "tests" / "e2e" / "Pulumi.e2e.yaml"
WORKLOAD_CLUSTERS = ["gpu-eu-west", "gpu-us-east"]
SAAS = "<secret: modelplane:modelEndpoints.ml-team.saas.auth.token>"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The e2e stack rendered with its stand-in mirror, as the harness renders it (tests/e2e/scenario.py)."""
    k8s_validation.require_all_crds()
    root = tmp_path_factory.mktemp("floor")
    document = yaml.safe_load(E2E_STACK.read_text())
    document["config"]["modelplane:mirror"] = mirror_config(root / "mirror")
    stack = root / "Pulumi.e2e.yaml"
    stack.write_text(yaml.safe_dump(document, sort_keys=False))
    fleet = load_file(stack)[1]
    write_mirror(cluster_stacks(fleet), root / "mirror", k8s_validation.CRD_DIR)
    write_manifests(render_fleet(fleet, schedule(fleet, None)), root / "render")
    return root / "render"


@pytest.fixture(scope="module")
def steps(rendered):
    return read_steps(rendered)


def test_every_rendered_object_is_in_exactly_one_step_in_file_order(rendered, steps):
    assert sorted(steps) == ["control", *WORKLOAD_CLUSTERS]
    for cluster, s in steps.items():
        files = sorted((rendered / cluster).glob("*.yaml"))
        applied = [i.path for i in (*s.first, *s.objects, *s.after_fleet)]
        assert sorted(applied) == files
        assert all(i.alone for i in s.all_objects())
        for part in (s.first, s.objects, s.after_fleet):
            assert [i.path for i in part] == sorted(i.path for i in part)  # render's apply order kept


def test_first_holds_what_nothing_serves_and_releases_keep_their_order(rendered, steps):
    for cluster, s in steps.items():
        assert s.first and {i.obj["kind"] for i in s.first} <= FIRST_KINDS
        assert not {i.obj["kind"] for i in s.objects} & FIRST_KINDS
        meta = yaml.safe_load((rendered / cluster / "meta" / "helm-releases.yaml").read_text())
        assert [(r.name, r.namespace, r.version, r.values, list(r.depends_on)) for r in s.releases] == [
            (r["name"], r["namespace"], str(r["version"]), r["values"], r["dependsOn"]) for r in meta]
        assert all(Path(r.chart).is_file() for r in s.releases)  # the mirror's archives


def test_workload_clusters_apply_their_crd_manifests_from_the_mirror(steps):
    for cluster in WORKLOAD_CLUSTERS:
        s = steps[cluster]
        assert [p.name for p in s.manifests] == ["inferenceExtension-v1.0.1-manifests.yaml"]
        assert all(p.is_file() for p in s.manifests)
        assert s.crds == ["inferencepools.inference.networking.k8s.io",
                          "inferenceobjectives.inference.networking.x-k8s.io"]
        assert not s.after_fleet and s.waits_for_clusters == []


def test_the_front_door_waits_for_the_workload_clusters_from_its_first_gateway_alias(steps):
    s = steps["control"]
    assert s.waits_for_clusters == WORKLOAD_CLUSTERS
    first_late = s.after_fleet[0].obj
    assert first_late["kind"] == "Service"
    assert first_late["spec"]["externalName"] == "inference-gateway.gpu-eu-west.invalid"  # the first gateway alias
    assert not any("inference-gateway." in json.dumps(i.obj) for i in s.objects)
    kinds = {i.obj["kind"] for i in s.after_fleet}
    assert {"Service", "EndpointSlice", "Backend", "HTTPRoute"} <= kinds


def test_awaits_are_the_providers():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    assert awaits(deployment) == (DEPLOYMENT_DONE,)
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "g", "annotations": {"pulumi.com/waitFor": "condition=Available"}}}
    assert awaits(lws) == ("condition=Available",)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {"pulumi.com/skipAwait": "true"}}}
    assert awaits(job) == ()
    assert awaits({**job, "metadata": {"name": "j"}}) == ("condition=Complete",)
    assert awaits({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}) == ()
    listed = {"apiVersion": "x/v1", "kind": "X",
              "metadata": {"name": "x", "annotations": {"pulumi.com/waitFor": '["condition=A", "condition=B"]'}}}
    assert awaits(listed) == ("condition=A", "condition=B")


def test_rendered_awaits_match_the_render(steps):
    counted: dict[tuple[str, str], int] = {}
    for s in steps.values():
        for item in s.all_objects():
            for condition in awaits(item.obj):
                counted[(item.obj["kind"], condition)] = counted.get((item.obj["kind"], condition), 0) + 1
    kinds = {kind for kind, _ in counted}
    assert kinds == {"Deployment", "Gateway", "LeaderWorkerSet"}
    assert counted[("Gateway", "jsonpath={.status.addresses[0].value}")] == 3  # every cluster's Gateway


def test_fill_replaces_tokens_and_refuses_a_secret_or_deployed_value_left():
    assert fill({"a": ["x TOKEN y", 3]}, {"TOKEN": "v"}) == {"a": ["x v y", 3]}
    with pytest.raises(FloorError, match="modelplane:modelEndpoints"):
        fill({"a": SAAS}, {})
    with pytest.raises(FloorError, match="efsFileSystemId"):
        fill("<deployed: aws.efsFileSystemId>", {})
    assert fill("172.18.255.239-172.18.255.254", {}) == "172.18.255.239-172.18.255.254"  # a MetalLB range kept


def test_gateway_aliases_are_rendered_again_with_the_real_address(steps):
    s = steps["control"]
    addresses = {"gpu-eu-west": "127.0.0.7", "gpu-us-east": "lb.example.com"}
    objects = deployed_objects(s.after_fleet, s.placeholders,
                               {"modelplane:modelEndpoints.ml-team.saas.auth.token": "sk-floor-test"}, addresses)
    for cluster, address in addresses.items():
        expected = gateway_alias_objects(cluster, address, 80)
        for alias in expected:
            assert alias in objects
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    eu = gateway_alias_objects("gpu-eu-west", "127.0.0.7", 80)
    assert by_name[("Service", eu[0]["metadata"]["name"])]["spec"]["clusterIP"] == "None"
    assert by_name[("EndpointSlice", eu[1]["metadata"]["name"])]["endpoints"][0]["addresses"] == ["127.0.0.7"]
    assert "invalid" not in json.dumps(objects)
    secrets = [o for o in objects if o["kind"] == "Secret"]
    assert secrets and SAAS not in json.dumps(objects)
    assert any("sk-floor-test" in json.dumps(o.get("stringData", {})) for o in secrets)


def test_a_secret_without_a_value_stops_the_floor(steps):
    s = steps["control"]
    with pytest.raises(FloorError, match="saas.auth.token"):
        deployed_objects(s.after_fleet, s.placeholders, {}, {"gpu-eu-west": "127.0.0.7", "gpu-us-east": "127.0.0.8"})


def test_placeholder_values_by_name():
    item = ObjectFile(Path("x.yaml"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                       "data": {"k": "<deployed: aws.efsFileSystemId>"}})
    out = deployed_objects([item], [Placeholder("aws.efsFileSystemId", "<deployed: aws.efsFileSystemId>")],
                           {"aws.efsFileSystemId": "fs-1"}, {})
    assert out[0]["data"] == {"k": "fs-1"}


def test_chart_crds_reads_the_crds_folder_only(steps):
    charts = {r.name: r.chart for r in steps["gpu-eu-west"].releases}
    assert chart_crds(charts["mp-lws"]) == ("leaderworkersets.leaderworkerset.x-k8s.io",)
    assert "gateways.gateway.networking.k8s.io" in chart_crds(charts["mp-gateway-helm"])
    assert chart_crds(charts["mp-ai-gateway-crds-helm"]) == ()  # its CRD is a template: helm uninstall removes it
    assert chart_crds(charts["mp-dra-example-driver"]) == ()
    assert all(r.crds == chart_crds(r.chart) for r in steps["gpu-eu-west"].releases)


class FakeTools:
    """Records every kubectl and helm command per cluster; a Gateway wait answers an address."""

    log: list[tuple[str, str, tuple[str, ...]]] = []
    lock = threading.Lock()

    def __init__(self, bin_dir, kubeconfig, home, meter, limit=None):
        self.cluster = Path(kubeconfig).name
        self.env = {"HOME": str(home)}
        home.mkdir(parents=True, exist_ok=True)

    def kubectl(self, *args, timeout=0):
        with self.lock:
            self.log.append((self.cluster, "kubectl", args))
        return f"127.0.0.{len(self.cluster)}" if "-o" in args and "wait" in args else ""

    def helm(self, *args, timeout=0):
        with self.lock:
            self.log.append((self.cluster, "helm", args))
        return ""


@pytest.mark.parametrize("parallel", [True, False])
def test_apply_floor_runs_each_cluster_in_the_programs_order(rendered, tmp_path, monkeypatch, parallel):
    monkeypatch.setattr(floor, "Tools", FakeTools)
    FakeTools.log = []
    kubeconfigs = {c: tmp_path / c for c in ["control", *WORKLOAD_CLUSTERS]}
    result = floor.apply_floor(rendered, kubeconfigs, tmp_path / "bin", tmp_path / "work", parallel=parallel,
                               values={"modelplane:modelEndpoints.ml-team.saas.auth.token": "t"})
    steps = result.steps
    assert result.objects == sum(len(s.all_objects()) for s in steps.values())
    assert result.releases == sum(len(s.releases) for s in steps.values())
    for cluster in WORKLOAD_CLUSTERS:
        commands = [(tool, args) for c, tool, args in FakeTools.log if c == cluster]
        verbs = [f"{tool} {args[0]}" for tool, args in commands]
        assert verbs[0] == "kubectl get"  # what was there before, for delete_floor
        first_helm, last_helm = verbs.index("helm upgrade"), len(verbs) - 1 - verbs[::-1].index("helm upgrade")
        assert verbs[1:first_helm] == ["kubectl apply", "kubectl wait"]  # CRDs + namespaces, Established
        assert "--for=condition=Established" in commands[2][1]
        assert verbs[last_helm + 1] == "kubectl apply"
        assert all(v.startswith("kubectl wait") for v in verbs[last_helm + 2:])
        installed = [args[2] for tool, args in commands if tool == "helm"]
        for release in steps[cluster].releases:
            assert all(installed.index(d) < installed.index(release.name) for d in release.depends_on)
        helm = next(args for tool, args in commands if tool == "helm")
        assert {"--create-namespace", "--wait=legacy", "--timeout=900s", "--rollback-on-failure"} <= set(helm)
        gateway = next(str(i.path) for i in steps[cluster].objects if i.obj["kind"] == "Gateway")
        assert sum(1 for tool, args in commands if args[0] == "wait" and gateway in args) == 1  # awaited once
        assert result.clusters[cluster].awaited == sum(1 for i in steps[cluster].all_objects() if awaits(i.obj))
        apply = commands[last_helm + 1][1]
        assert {"--server-side", "--field-manager=modelplane-floor"} <= set(apply)
        assert apply.count("-f") == len(steps[cluster].objects)
    control = [(i, tool, args) for i, (c, tool, args) in enumerate(FakeTools.log) if c == "control"]
    late_apply = [i for i, tool, args in control if tool == "kubectl" and args[0] == "apply"][-1]
    workload_done = max(i for i, (c, _, _) in enumerate(FakeTools.log) if c in WORKLOAD_CLUSTERS)
    assert late_apply > workload_done  # the front door's endpoints only after every replica is available
    late_files = [Path(a) for a in FakeTools.log[late_apply][2] if a.endswith(".yaml")]
    late_text = "".join(p.read_text() for p in late_files)
    assert "invalid" not in late_text and "127.0.0." in late_text and SAAS not in late_text


def test_a_failing_cluster_stops_the_front_door_and_returns_the_partial_result(rendered, tmp_path, monkeypatch):
    class Failing(FakeTools):
        def helm(self, *args, timeout=0):
            if self.cluster == "gpu-us-east":
                raise FloorError("boom")
            return super().helm(*args, timeout=timeout)

    monkeypatch.setattr(floor, "Tools", Failing)
    FakeTools.log = []
    kubeconfigs = {c: tmp_path / c for c in ["control", *WORKLOAD_CLUSTERS]}
    with pytest.raises(FloorError, match="gpu-us-east") as caught:
        floor.apply_floor(rendered, kubeconfigs, tmp_path / "bin", tmp_path / "work",
                          values={"modelplane:modelEndpoints.ml-team.saas.auth.token": "t"})
    assert caught.value.result is not None and caught.value.result.clusters["control"].error
    assert not steps_applied_late(FakeTools.log)


def steps_applied_late(log) -> bool:
    return sum(1 for c, tool, args in log if c == "control" and tool == "kubectl" and args[0] == "apply") > 2


def test_delete_floor_removes_objects_releases_new_crds_and_namespaces(rendered, tmp_path, monkeypatch):
    monkeypatch.setattr(floor, "Tools", FakeTools)
    FakeTools.log = []
    kubeconfigs = {c: tmp_path / c for c in ["control", *WORKLOAD_CLUSTERS]}
    result = floor.apply_floor(rendered, kubeconfigs, tmp_path / "bin", tmp_path / "work",
                               values={"modelplane:modelEndpoints.ml-team.saas.auth.token": "t"})
    result.clusters["gpu-eu-west"].before = {"customresourcedefinition.apiextensions.k8s.io/leaderworkersets.leaderworkerset.x-k8s.io",
                                             "namespace/default", "namespace/ml-team"}
    FakeTools.log = []
    floor.delete_floor(result, kubeconfigs, tmp_path / "bin")
    eu = [(tool, args) for c, tool, args in FakeTools.log if c == "gpu-eu-west"]
    verbs = [f"{tool} {args[0]}" for tool, args in eu]
    assert verbs[0] == "kubectl delete" and verbs[-2:] == ["kubectl delete", "kubectl wait"]
    assert verbs.count("helm uninstall") == len(result.steps["gpu-eu-west"].releases)
    crds = next(args for tool, args in eu if tool == "kubectl" and any(a.startswith("customresourcedefinition/") for a in args))
    assert "customresourcedefinition/leaderworkersets.leaderworkerset.x-k8s.io" not in crds  # there before: kept
    assert "customresourcedefinition/inferencepools.inference.networking.k8s.io" in crds
    namespaces = eu[-1][1]
    assert "namespace/ml-team" not in namespaces and "namespace/modelplane-system" in namespaces
    assert "namespace/cert-manager" in namespaces and "--for=delete" in namespaces


def test_max_processes_is_one_limit_for_the_whole_fleet(rendered, tmp_path, monkeypatch):
    limits = []

    class Limited(FakeTools):
        def __init__(self, bin_dir, kubeconfig, home, meter, limit=None):
            super().__init__(bin_dir, kubeconfig, home, meter, limit)
            limits.append(limit)

    monkeypatch.setattr(floor, "Tools", Limited)
    kubeconfigs = {c: tmp_path / c for c in ["control", *WORKLOAD_CLUSTERS]}
    floor.apply_floor(rendered, kubeconfigs, tmp_path / "bin", tmp_path / "work", max_processes=2,
                      values={"modelplane:modelEndpoints.ml-team.saas.auth.token": "t"})
    timed = [limit for limit in limits if limit is not None]
    assert len(timed) == 3 and all(limit is timed[0] for limit in timed)
