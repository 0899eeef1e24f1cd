"""Each filter of modelplane/scheduling/filters.py on its own: one table of cases per filter, each with
the typed reason it returns (or None: passes). Fleets are built from config, as users write them."""
from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from builders import CLASSES, cluster, deployment, member
from modelplane.api import load_fleet
from modelplane.scheduling import filters
from modelplane.scheduling.document import DocEngine, DocMember, DocReplica
from modelplane.scheduling.fit import Fit, Ledger
from modelplane.scheduling.matching import Matcher
from modelplane.scheduling.packing import DevicePacking, WholeNodePacking
from modelplane.scheduling.snapshot import clusters_of, workloads_of


def built(clusters: dict, spec: dict, caches: dict | None = None):
    """The scheduler's view of one cluster and one deployment `ml/d`."""
    config = {"inferenceClasses": CLASSES, "inferenceClusters": clusters, "modelDeployments": {"ml": {"d": spec}}}
    if caches:
        config["modelCaches"] = caches
    fleet = load_fleet(copy.deepcopy(config))
    return clusters_of(fleet)[0], workloads_of(fleet)[0]


CACHE = {"ml": {"weights": {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1},
                            "clusterSelector": {"matchLabels": {"cache": "yes"}}}}}
NIC_ONLY = {**member(memory=None), "nodeSelector": {"devices": [
    {"name": "ib", "selectors": [{"cel": 'device.attributes["nic.example.com"].linkType == "infiniband"'}]}]}}


def code(reason):
    return None if reason is None else reason.code


@pytest.mark.parametrize("check, cluster_, spec, expected", [
    (filters.cluster_selector, cluster(("p", "small", 1), region="eu"),
     deployment(clusterSelector={"matchLabels": {"region": "eu"}}), None),
    (filters.cluster_selector, cluster(("p", "small", 1), region="us"),
     deployment(clusterSelector={"matchLabels": {"region": "eu"}}), "NotSelected"),
    (filters.scheduling_taints, cluster(("p", "small", 1), taints=[("gpu", "NoSchedule")]), deployment(),
     "UntoleratedTaint"),
    (filters.scheduling_taints, cluster(("p", "small", 1), taints=[("gpu", "NoExecute")]), deployment(),
     "UntoleratedTaint"),
    (filters.scheduling_taints, cluster(("p", "small", 1), taints=[("gpu", "NoSchedule")]),
     deployment(tolerations=[{"key": "gpu", "operator": "Exists"}]), None),
    (filters.evicting_taints, cluster(("p", "small", 1), taints=[("gpu", "NoSchedule")]), deployment(), None),
    (filters.evicting_taints, cluster(("p", "small", 1), taints=[("gpu", "NoExecute")]), deployment(), "Evicted"),
    (filters.evicting_taints, cluster(("p", "small", 1), taints=[("gpu", "NoExecute")]),
     deployment(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]), None),
    (filters.node_pools, cluster(("p", "small", 1)), deployment(), None),
    (filters.cache_storage, cluster(("p", "small", 1)), deployment(), None),  # no cache: no storage needed
])
def test_cluster_filters(check, cluster_, spec, expected):
    c, w = built({"a": cluster_}, spec)
    assert code(check(c, w)) == expected


@pytest.mark.parametrize("labels, rwx, footprint, storage", [
    ({"cache": "yes"}, "shared", None, None),
    ({"cache": "yes"}, None, None, "NoCacheStorage"),  # Kind: no ReadWriteMany StorageClass
    ({}, "shared", "OutsideCacheFootprint", None),
])
def test_cache_filters(labels, rwx, footprint, storage):
    c, w = built({"a": cluster(("p", "small", 1), rwx=rwx, **labels)}, deployment(modelCacheRef={"name": "weights"}),
                 CACHE)
    assert (code(filters.cache_footprint(c, w)), code(filters.cache_storage(c, w))) == (footprint, storage)


def test_node_pools_rejects_a_cluster_without_pools():
    c, w = built({"a": cluster(("p", "small", 1))}, deployment())
    assert code(filters.node_pools(replace(c, pools=()), w)) == "NoPools"  # what the filter reads, emptied


def pool_case(class_name: str, members: list[dict]):
    c, w = built({"a": cluster(("p", class_name, 2))}, deployment(members=members))
    engine = w.engines[0]
    fit = Fit(w, Matcher(), DevicePacking)
    return c.pools[0], engine, fit.engine_on(c.pools[0], engine), fit.matcher


@pytest.mark.parametrize("class_name, members, claimable, device_match, claims", [
    ("small", [member(memory="20Gi")], None, None, None),
    ("small", [member(memory="70Gi")], None, "SelectorMismatch", None),  # 24Gi device: no match
    ("small", [member(count=2)], None, "SelectorMismatch", None),  # one device a node
    ("nic-only", [NIC_ONLY], None, None, "OnlySynthetic"),
    ("big", [member(role="Leader"), member(role="Worker", worker={"nodes": 1})], None, None, None),
    # A claim-capable member matched only Synthetic devices on this pool (another pool had its GPU).
    ("nic-only", [NIC_ONLY], (True,), None, "OnlySynthetic"),
])
def test_pool_filters(class_name, members, claimable, device_match, claims):
    pool, engine, resolved, matcher = pool_case(class_name, members)
    claimable = claimable or tuple(r.claims for r in resolved)
    assert code(filters.device_match(pool, engine, resolved, claimable, matcher)) == device_match
    if device_match is None:
        assert code(filters.claims_a_device(pool, engine, resolved, claimable, matcher)) == claims
    first = device_match or claims
    assert code(filters.pool_failure(pool, engine, resolved, claimable, matcher)) == first
    assert filters.pool_passes(resolved, claimable) == (first is None)


@pytest.mark.parametrize("packing, demand, taken, detail", [
    (WholeNodePacking, 2, 1, "pool p: needs 2 nodes, 1 free"),
    (DevicePacking, ((1,),), ((8,), (8,)), "pool p: needs 1 gpu, 0 free across 2 nodes"),
    (DevicePacking, ((4,),), ((5,), (5,)), "pool p: needs 4 gpu, 6 free across 2 nodes (fragmented: largest free block 3)"),
    (DevicePacking, ((4,), (1,)), ((5,), (5,)), "pool p: needs 1 × 4 gpu + 1 × 1 gpu, 6 free across 2 nodes "
                                                "(fragmented: largest free block 3)"),
])
def test_capacity_reason(packing, demand, taken, detail):
    c, w = built({"a": cluster(("p", "big", 2))}, deployment())
    ledger = Ledger.of((c,), packing)
    free = packing.take(ledger.free[("a", "p")], taken)
    assert packing.take(free, demand) is None
    assert filters.capacity_reason(packing, c.pools[0], free, demand).detail == detail


def doc_engine(name="main", roles=("Standalone",), pools=("p",)) -> DocEngine:
    return DocEngine(name=name, members=tuple(DocMember(role=r, node_pool=p) for r, p in zip(roles, pools)))


@pytest.mark.parametrize("observed, detail", [
    (doc_engine(), None),
    (doc_engine(name="old"), "engine old is no longer in the deployment"),
    (doc_engine(roles=("Leader", "Worker"), pools=("p", "p")), "engine main changed shape (members ['Standalone'])"),
    (doc_engine(pools=("gone",)), "pool gone is no longer published"),
])
def test_kept_engine_filters(observed, detail):
    c, w = built({"a": cluster(("p", "small", 1))}, deployment())
    reason = filters.kept_engine_failure(observed, w.engine(observed.name), c)
    assert (reason.detail if reason else None) == detail
    assert reason is None or reason.code == "NoLongerFits"


def test_one_pool_refuses_an_engine_split_across_pools():
    c, w = built({"a": cluster(("p", "small", 1), ("q", "small", 1))},
                 deployment(members=[member(role="Leader"), member(role="Worker", worker={"nodes": 1})]))
    split = doc_engine(roles=("Leader", "Worker"), pools=("p", "q"))
    assert filters.one_pool(split, w.engines[0], c).detail == "engine main was split across pools"
    assert filters.one_pool(doc_engine(roles=("Leader", "Worker"), pools=("p", "p")), w.engines[0], c) is None


@pytest.mark.parametrize("engines, detail", [
    (1, None),
    (2, "the deployment now has 1 engine(s), the replica 2"),
])
def test_engine_count(engines, detail):
    c, w = built({"a": cluster(("p", "small", 1))}, deployment())
    doc = DocReplica(namespace="ml", deployment="d", name="d-1", cluster="a", index=0,
                     engines=tuple(doc_engine(name=f"e{i}") for i in range(engines)))
    reason = filters.engine_count(doc, w)
    assert (reason.detail if reason else None) == detail
