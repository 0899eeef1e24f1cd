"""Our CEL selector answers against the real DRA allocator (kube-scheduler's DynamicResources plugin).

Each case is one request selector over the same five devices. Our answer comes from modelplane's
engine exactly as the placement scheduler asks it (`SelectorCache.matches`, class selector first,
then the request's, every device in slice order; any runtime error aborts, as it aborts allocation
for the pod). The allocator's answer comes from a ResourceClaim with allocationMode All: All takes
every matching device of the node, so the allocated set is the allocator's matching set; when
nothing matches, All fails with "cannot allocate all claims" (the empty set); a CEL runtime error
makes the plugin abort the scheduling attempt (pod condition reason SchedulerError); a selector the
API server refuses never becomes a claim ("rejected").

Each case gets its own fake node publishing all of DEVICES, so the claims run concurrently without
competing for devices; a canary claim first proves the scheduler has seen every node's devices.
Standalone (starts its own one-cluster LocalFleet): `python -m tests.e2e.selector_cases [work dir]`.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from modelplane.cel import SelectorCompileError, SelectorEvaluationError, validate_selector
from modelplane.devices import SelectorCache

if TYPE_CHECKING:
    from .kube_api import KubeApi

DRIVER = "cases.example.com"
OTHER = "other.example.com"
DEVICE_CLASS = "selector-cases.example.com"
CLASS_SELECTOR = f'device.driver == "{DRIVER}"'
POOL = "cases"
REQUEST = "req"
TIMEOUT = 45.0  # seconds for every case to have an answer from the allocator

# A set of matched device names, or "error: ..." (allocation aborts) / "rejected: ..." (the API server refuses it).
Answer = Union[frozenset, str]


def _device(name: str, memory: str, **attributes) -> dict:
    """A resource.k8s.io/v1 Device; python values become typed attribute values."""
    def typed(value) -> dict:
        if isinstance(value, bool):
            return {"bool": value}
        if isinstance(value, int):
            return {"int": value}
        if isinstance(value, str) and value.startswith("semver:"):
            return {"version": value.removeprefix("semver:")}
        return {"string": value}
    return {"name": name, "attributes": {k.replace("__", "/"): typed(v) for k, v in attributes.items()},
            "capacity": {"memory": {"value": memory}}}


# Attribute names with "__" are qualified ("cases.example.com/arch", "other.example.com/family"); the rest are
# bare and live under the driver's domain. `numa` and the other.example.com domain exist on some devices only.
_A, _B, _C, _D, _E = "gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"
DEVICES: tuple[dict, ...] = (
    _device(_A, "80Gi", model="H100", index=0, healthy=True, driverVersion="semver:1.10.0",
            driverVersionText="1.10.0", numa=0, **{"cases.example.com__arch": "x86",
                                                   "other.example.com__family": "hopper"}),
    _device(_B, "81920Mi", model="H100", index=1, healthy=False, driverVersion="semver:1.9.0",
            driverVersionText="1.9.0", numa=1, arch="x86", **{"other.example.com__family": "hopper"}),
    _device(_C, "40Gi", model="A100", index=2, healthy=True, driverVersion="semver:1.10.0-rc.1",
            driverVersionText="1.10.0-rc.1", arch="arm64"),
    _device(_D, "80G", model="L4", index=3, healthy=True, driverVersion="semver:2.0.0+build.5",
            driverVersionText="2.0.0", arch="x86", **{"other.example.com__family": "ada"}),
    _device(_E, "85899345920", model="H100", index=4, healthy=True, driverVersion="semver:1.9.0",
            driverVersionText="1.9.0", numa=1, **{"cases.example.com__arch": "x86"}),
)


@dataclass(frozen=True)
class SelectorCase:
    name: str  # a DNS label: names the claim, pod and node
    cel: str
    note: str
    expected: Answer  # what Kubernetes should answer: device names, or "error" / "rejected"


def _all(*names: str) -> frozenset:
    return frozenset(names)


_ATTR = f'device.attributes["{DRIVER}"]'
_MEM = f'device.capacity["{DRIVER}"].memory'
CASES: tuple[SelectorCase, ...] = (
    SelectorCase("driver", CLASS_SELECTOR, "plain string field", _all(_A, _B, _C, _D, _E)),
    SelectorCase("q-compare-20gi", f'{_MEM}.compareTo(quantity("20Gi")) >= 0', "compareTo across sizes",
                 _all(_A, _B, _C, _D, _E)),
    SelectorCase("q-eq-80gi", f'{_MEM} == quantity("80Gi")',
                 "equality by value: 80Gi, 81920Mi and 85899345920 are one size; 80G is not", _all(_A, _B, _E)),
    SelectorCase("q-gt-81920mi", f'{_MEM}.isGreaterThan(quantity("81920Mi"))', "nothing is larger: All on no device",
                 frozenset()),
    SelectorCase("q-gt-80g", f'{_MEM}.isGreaterThan(quantity("80G"))', "binary 80Gi > decimal 80G",
                 _all(_A, _B, _E)),
    SelectorCase("q-lt-80g", f'{_MEM}.isLessThan(quantity("80G"))', "40Gi only", _all(_C)),
    SelectorCase("q-sign-global", f'sign({_MEM}) == 1', "sign() is a global overload", _all(_A, _B, _C, _D, _E)),
    SelectorCase("q-sign-member", f'{_MEM}.sign() == 1', "receiver-style sign() has no overload", "rejected"),
    SelectorCase("q-operator", f'{_MEM} > quantity("1Gi")', "no ordering operators on Quantity", "rejected"),
    SelectorCase("q-bad-literal", f'{_MEM}.isGreaterThan(quantity("20 Gi"))', "quantity() parse error at runtime",
                 "error"),
    SelectorCase("sv-gt-1-9-0", f'{_ATTR}.driverVersion.isGreaterThan(semver("1.9.0"))',
                 "semver order: 1.10.0 and 1.10.0-rc.1 > 1.9.0", _all(_A, _C, _D)),
    SelectorCase("str-gt-1-9-0", f'{_ATTR}.driverVersionText > "1.9.0"',
                 "the lexical trap: as strings 1.10.0 < 1.9.0", _all(_D)),
    SelectorCase("sv-compare-1-10-0", f'{_ATTR}.driverVersion.compareTo(semver("1.10.0")) < 0',
                 "a pre-release sorts before its release", _all(_B, _C, _E)),
    SelectorCase("sv-eq-build", f'{_ATTR}.driverVersion == semver("2.0.0")', "build metadata is ignored",
                 _all(_D)),
    SelectorCase("sv-literals", 'semver("1.2.3").isLessThan(semver("1.10.0"))', "constant, true on every device",
                 _all(_A, _B, _C, _D, _E)),
    SelectorCase("sv-operator", f'{_ATTR}.driverVersion > semver("1.9.0")', "no ordering operators on Semver",
                 "rejected"),
    SelectorCase("string-eq", f'{_ATTR}.model == "H100"', "string attribute", _all(_A, _B, _E)),
    SelectorCase("int-ge", f'{_ATTR}.index >= 2', "int attribute", _all(_C, _D, _E)),
    SelectorCase("int-eq-string", f'{_ATTR}.index == "1"', "cross-type == is false, not an error", frozenset()),
    SelectorCase("bool-attr", f'{_ATTR}.healthy', "a bool attribute as the whole selector", _all(_A, _C, _D, _E)),
    SelectorCase("non-bool-result", f'{_ATTR}.model', "a string result is a runtime error", "error"),
    SelectorCase("qualified-driver-domain", f'{_ATTR}.arch == "x86"',
                 "arch published bare and as cases.example.com/arch: same place", _all(_A, _B, _D, _E)),
    SelectorCase("other-domain-unguarded", f'device.attributes["{OTHER}"].family == "hopper"',
                 "gpu-c has no other.example.com domain: no such key", "error"),
    SelectorCase("other-domain-has", f'has(device.attributes["{OTHER}"].family) && '
                 f'device.attributes["{OTHER}"].family == "hopper"', "guarded with has()", _all(_A, _B)),
    SelectorCase("other-domain-in", f'"family" in device.attributes["{OTHER}"]', "guarded with in",
                 _all(_A, _B, _D)),
    SelectorCase("bare-not-other-domain", f'has({_ATTR}.family)', "a bare name never reaches another domain",
                 frozenset()),
    SelectorCase("missing-unguarded", f'{_ATTR}.numa == 1', "numa on some devices only: no such key", "error"),
    SelectorCase("missing-optional", f'{_ATTR}.?numa.orValue(-1) == 1', "optional chaining", _all(_B, _E)),
    SelectorCase("missing-and-absorbs", f'{_ATTR}.model == "H100" && {_ATTR}.numa == 1',
                 "false && error is false", _all(_B, _E)),
    SelectorCase("missing-or-absorbs", f'{_ATTR}.numa == 1 || true', "error || true is true",
                 _all(_A, _B, _C, _D, _E)),
    SelectorCase("q-as-integer", f'{_MEM}.asInteger() > 80000000000', "80Gi in bytes > 8e10 = 80G",
                 _all(_A, _B, _E)),
    SelectorCase("q-fraction-not-integer", 'quantity("1.5Gi").isInteger()',
                 "representation, not value: 1.5Gi parses as a decimal", frozenset()),
    SelectorCase("q-bind", f'cel.bind(m, {_MEM}, m.isGreaterThan(quantity("50Gi")) && m.isLessThan(quantity("81G")))',
                 "cel.bind", _all(_D)),
    SelectorCase("sv-major", f'{_ATTR}.driverVersion.major() == 2', "semver accessors", _all(_D)),
    SelectorCase("sv-normalize", 'semver("v1.10", true) == semver("1.10.0")', "normalising semver()",
                 _all(_A, _B, _C, _D, _E)),
    SelectorCase("int-lt-double", f'{_ATTR}.index < 2.5', "cross-type numeric ordering", _all(_A, _B, _C)),
    SelectorCase("int-eq-double", f'{_ATTR}.index == 1.0', "heterogeneous numeric equality", _all(_B)),
    SelectorCase("bool-eq-int", f'{_ATTR}.healthy == 1', "a bool is not the int 1", frozenset()),
    SelectorCase("int-overflow", f'{_ATTR}.index * 4611686018427387904 >= 0', "int64 overflow on index >= 2",
                 "error"),
    SelectorCase("int-divide-by-zero", f'10 / {_ATTR}.index > 1', "division by zero on index 0", "error"),
    SelectorCase("string-ext", f'{_ATTR}.model.lowerAscii().startsWith("h")', "strings extension",
                 _all(_A, _B, _E)),
    SelectorCase("regex", f'{_ATTR}.model.matches("^[HL][0-9]+$")', "RE2 matches()", _all(_A, _B, _D, _E)),
    SelectorCase("map-keys-exists", f'{_ATTR}.exists(k, k == "numa")', "macros range over map keys",
                 _all(_A, _B, _E)),
    SelectorCase("domains-exists", f'device.attributes.exists(d, d == "{OTHER}")', "domains are the outer keys",
                 _all(_A, _B, _D)),
    # Found by this suite: our CEL accepted the field, the stock 1.34 API server refuses it (422 undefined field)
    SelectorCase("multi-alloc-gated", "device.allowMultipleAllocations == false",
                 "DRAConsumableCapacity is alpha, off by default in 1.34", "rejected"),
)


def kind(answer: Answer) -> str:
    """'match' for a device set, else the error's category ('error', 'rejected', or what the harness saw)."""
    return "match" if isinstance(answer, frozenset) else answer.split(":", 1)[0]


def agrees(ours: Answer, theirs: Answer) -> bool:
    """Same devices, or the same kind of failure (messages come from different engines)."""
    return ours == theirs if kind(ours) == "match" else kind(ours) == kind(theirs)


def our_answer(case: SelectorCase) -> Answer:
    """What modelplane's engine says, device by device as the allocator evaluates them."""
    try:
        validate_selector(case.cel)  # what the API server checks when the claim is created
    except SelectorCompileError as error:
        return f"rejected: {error}"
    cache = SelectorCache()  # the placement scheduler's entry point (scheduling.matching.Matcher)
    matched = []
    for device in DEVICES:
        visible = {"driver": DRIVER, "attributes": device["attributes"], "capacity": device["capacity"]}
        verdict: bool | SelectorEvaluationError = True
        for expression in (CLASS_SELECTOR, case.cel):
            verdict = cache.matches(expression, visible)
            if verdict is not True:
                break
        if isinstance(verdict, SelectorEvaluationError):
            return f"error: device {device['name']}: {verdict}"
        if verdict is True:
            matched.append(device["name"])
    return frozenset(matched)


@dataclass(frozen=True)
class CaseResult:
    name: str
    cel: str
    ours: Answer
    allocator: Answer
    agree: bool


# ---------------------------------------------------------------------------------------------- against the cluster

def device_class() -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": CLASS_SELECTOR}}]}}


def claim_manifest(case: SelectorCase, namespace: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": case.name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": REQUEST, "exactly": {
                "deviceClassName": DEVICE_CLASS, "allocationMode": "All",
                "selectors": [{"cel": {"expression": case.cel}}]}}]}}}


def pod_manifest(case: SelectorCase, node: str, namespace: str) -> dict:
    """Scheduled by kube-scheduler (no nodeName), pinned to the case's node by name, tolerating everything."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": case.name, "namespace": namespace},
            "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchFields": [
                             {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
                     "tolerations": [{"operator": "Exists"}],
                     "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "devices", "resourceClaimName": case.name}],
                     "containers": [{"name": "main", "image": "registry.invalid/selector-case:none",
                                     "resources": {"claims": [{"name": "devices"}]}}]}}


def _pod_verdict(pod: dict | None) -> str | None:
    """'error: ...' when the DRA plugin aborted the attempt; 'unschedulable: ...' with its message otherwise."""
    for condition in ((pod or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason, message = condition.get("reason", ""), condition.get("message", "")
            if reason == "SchedulerError":  # only a CEL failure is the answer; anything else is the harness's problem
                return f"{'error' if 'CEL runtime error' in message else 'scheduler error'}: {message}"
            if reason == "Unschedulable":
                return f"unschedulable: {message}"
    return None


def _allocated(claim: dict | None, device_names: dict[str, str]) -> frozenset | None:
    allocation = ((claim or {}).get("status") or {}).get("allocation")
    if not allocation:
        return None
    results = (allocation.get("devices") or {}).get("results") or []
    return frozenset(device_names.get(r["device"], r["device"]) for r in results if r.get("request") == REQUEST)


def _answer_now(claim: dict | None, pod: dict | None, device_names: dict[str, str]) -> Answer | None:
    """The allocator's answer if it has given one; None while scheduling is still under way."""
    if (allocated := _allocated(claim, device_names)) is not None:
        return allocated
    verdict = _pod_verdict(pod)
    if verdict is None:
        return None
    if verdict.startswith("unschedulable:"):  # All with no matching device; any other reason may still pass
        return frozenset() if "cannot allocate all claims" in verdict else None
    return verdict


def _delete_now(api: KubeApi, path: str) -> None:
    api.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})


def _start(api: KubeApi, case: SelectorCase, node: str, namespace: str) -> Answer | None:
    """Create claim and pod; "rejected: ..." if the API server refuses the selector."""
    from .kube_api import ApiError, object_path
    try:
        api.create(object_path("resource.k8s.io/v1", "resourceclaims", namespace), claim_manifest(case, namespace))
    except ApiError as error:
        if error.status == 422 and "compilation failed" in error.message:
            return f"rejected: {error.message}"
        raise
    api.create(object_path("v1", "pods", namespace), pod_manifest(case, node, namespace))
    return None


def _collect(api: KubeApi, cases: list[SelectorCase], namespace: str, device_names: dict[str, str],
             answers: dict[str, Answer], timeout: float) -> None:
    """Poll claims and pods of the namespace until every case has an answer (or time runs out)."""
    from .kube_api import object_path
    deadline = time.monotonic() + timeout
    pending = [c for c in cases if c.name not in answers]
    last: dict[str, str] = {}
    while pending:
        claims = {o["metadata"]["name"]: o for o in api.list(object_path("resource.k8s.io/v1", "resourceclaims",
                                                                         namespace))}
        pods = {o["metadata"]["name"]: o for o in api.list(object_path("v1", "pods", namespace))}
        for case in pending:
            answer = _answer_now(claims.get(case.name), pods.get(case.name), device_names)
            if answer is not None:
                answers[case.name] = answer
            elif (seen := _pod_verdict(pods.get(case.name))) is not None:
                last[case.name] = seen
        pending = [c for c in pending if c.name not in answers]
        if pending and time.monotonic() > deadline:
            for case in pending:
                answers[case.name] = f"timeout: {last.get(case.name, 'no scheduling decision')}"
            return
        if pending:
            time.sleep(0.25)


def allocator_answer(api: KubeApi, case: SelectorCase, node: str, namespace: str,
                     device_names: dict[str, str] | None = None, timeout: float = TIMEOUT) -> Answer:
    """One case on its own: the allocator's matching set on `node`, or the error it aborted with."""
    from .kube_api import object_path
    answers: dict[str, Answer] = {}
    try:
        if (rejected := _start(api, case, node, namespace)) is not None:
            return rejected
        _collect(api, [case], namespace, device_names or {}, answers, timeout)
        return answers[case.name]
    finally:
        _delete_now(api, object_path("v1", "pods", namespace, case.name))
        _delete_now(api, object_path("resource.k8s.io/v1", "resourceclaims", namespace, case.name))


def _ensure_namespace(api: KubeApi, namespace: str) -> None:
    """Create it; wait out a Terminating one left by a previous run."""
    from .kube_api import object_path
    deadline = time.monotonic() + 60
    while (existing := api.get(object_path("v1", "namespaces", None, namespace))) is not None:
        if not existing["metadata"].get("deletionTimestamp"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"namespace {namespace} is still terminating")
        time.sleep(0.5)
    api.create(object_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": namespace}})


def _wait_for_devices(api: KubeApi, nodes: list[str], timeout: float = 30.0) -> dict[str, str]:
    """Until every case node is Ready and publishes DEVICES; returns published name -> DEVICES name."""
    from .kube_api import object_path
    deadline = time.monotonic() + timeout
    while True:
        slices = api.list(object_path("resource.k8s.io/v1", "resourceslices"), field_selector=f"spec.driver={DRIVER}")
        published = {s["spec"].get("nodeName"): s["spec"].get("devices") or [] for s in slices}
        ready = {n["metadata"]["name"] for n in api.list(object_path("v1", "nodes"))
                 if any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])}
        if all(len(published.get(n, [])) == len(DEVICES) and n in ready for n in nodes):
            # the kubelet publishes DEVICES in order, renaming each per node
            return {d["name"]: base["name"] for n in nodes for d, base in zip(published[n], DEVICES)}
        if time.monotonic() > deadline:
            missing = [n for n in nodes if n not in ready or len(published.get(n, [])) != len(DEVICES)]
            raise RuntimeError(f"case nodes not ready or without their {len(DEVICES)} devices: {missing}")
        time.sleep(0.25)


CANARY = SelectorCase("canary", "true", "every device: proves the scheduler has seen every case node's devices",
                      frozenset(d["name"] for d in DEVICES))


def _wait_for_scheduler(api: KubeApi, node: str, namespace: str, device_names: dict[str, str],
                        timeout: float = 30.0) -> None:
    """Allocate every device of the last node registered: the scheduler then knows all earlier slices too (one
    ordered watch), so a later "cannot allocate all claims" means no match, not "devices not seen yet"."""
    from .kube_api import object_path
    _start(api, CANARY, node, namespace)
    deadline = time.monotonic() + timeout
    try:
        while (allocated := _allocated(api.get(object_path("resource.k8s.io/v1", "resourceclaims", namespace,
                                                           CANARY.name)), device_names)) is None:
            if time.monotonic() > deadline:
                pod = api.get(object_path("v1", "pods", namespace, CANARY.name))
                raise RuntimeError(f"the scheduler allocated no devices on {node}: {_pod_verdict(pod)}")
            time.sleep(0.1)
        if allocated != CANARY.expected:
            raise RuntimeError(f"the canary claim on {node} got {show(allocated)}, not every device")
    finally:
        _delete_now(api, object_path("v1", "pods", namespace, CANARY.name))
        _delete_now(api, object_path("resource.k8s.io/v1", "resourceclaims", namespace, CANARY.name))


def run_cases(api: KubeApi, namespace: str = "selector-cases", *, cluster: str = "selector-cases",
              cases: tuple[SelectorCase, ...] = CASES, timeout: float = TIMEOUT) -> list[CaseResult]:
    """Every case concurrently, each on its own fake node (plus one for the canary); cleans up what it created."""
    from .kube_api import object_path
    from .kubelet import FakeKubelet, NodeGroup
    group = NodeGroup(pool=POOL, nodes=len(cases) + 1, labels={}, taints=(), devices=DEVICES, driver=DRIVER)
    api.apply(object_path("resource.k8s.io/v1", "deviceclasses", None, DEVICE_CLASS), device_class())
    _ensure_namespace(api, namespace)
    kubelet = FakeKubelet(api, cluster, [group])
    kubelet.start()
    nodes = [n for n, pool in kubelet.node_pool.items() if pool == POOL]  # in registration order
    answers: dict[str, Answer] = {}
    try:
        device_names = _wait_for_devices(api, nodes)
        _wait_for_scheduler(api, nodes[-1], namespace, device_names)
        for case, node in zip(cases, nodes):
            if (rejected := _start(api, case, node, namespace)) is not None:
                answers[case.name] = rejected
        _collect(api, list(cases), namespace, device_names, answers, timeout)
    finally:
        for case in cases:
            _delete_now(api, object_path("v1", "pods", namespace, case.name))
            _delete_now(api, object_path("resource.k8s.io/v1", "resourceclaims", namespace, case.name))
        kubelet.stop()
        for node in nodes:
            _delete_now(api, object_path("v1", "nodes", None, node))
        for s in api.list(object_path("resource.k8s.io/v1", "resourceslices"), field_selector=f"spec.driver={DRIVER}"):
            _delete_now(api, object_path("resource.k8s.io/v1", "resourceslices", None, s["metadata"]["name"]))
        _delete_now(api, object_path("resource.k8s.io/v1", "deviceclasses", None, DEVICE_CLASS))
        api.delete(object_path("v1", "namespaces", None, namespace))  # finishes in the background
    results = []
    for case in cases:
        ours = our_answer(case)
        results.append(CaseResult(case.name, case.cel, ours, answers[case.name], agrees(ours, answers[case.name])))
    return results


def show(answer: Answer, width: int = 70) -> str:
    """Device names, or the error's kind and its gist (engine prefixes, positions and carets dropped)."""
    if isinstance(answer, frozenset):
        return " ".join(sorted(answer)) or "(none)"
    category, _, message = answer.partition(": ")
    for marker in ("CEL runtime error: ", "compilation failed: ERROR: <input>:"):
        message = message.split(marker)[-1]
    message = re.sub(r"^(device [^:]+|\d+:\d+): ", "", message).split(" | ")[0]
    one_line = " ".join(f"{category}: {message}".split())
    return one_line if len(one_line) <= width else one_line[:width - 3] + "..."


def _full(answer: Answer) -> str:
    return show(answer) if isinstance(answer, frozenset) else " ".join(answer.split())


def describe(device: dict) -> str:
    attributes = " ".join(f"{k}={'semver ' if 'version' in v else ''}{next(iter(v.values()))}"
                          for k, v in device["attributes"].items())
    capacity = " ".join(f"{k}={v['value']}" for k, v in device["capacity"].items())
    return f"{device['name']}: capacity {capacity}; {attributes}"


def report(results: list[CaseResult]) -> str:
    """A plain table: case, our answer, the allocator's, agreement; then the expressions and full disagreements."""
    rows = [("case", "ours", "allocator", "agree")]
    rows += [(r.name, show(r.ours, 48), show(r.allocator, 48), "yes" if r.agree else "NO") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    agreed = sum(r.agree for r in results)
    lines.append(f"{agreed}/{len(results)} cases agree (devices: {', '.join(d['name'] for d in DEVICES)})")
    lines += ["", f"devices (driver {DRIVER}, one ResourceSlice per node):"] + [f"  {describe(d)}" for d in DEVICES]
    notes = {c.name: c.note for c in CASES}
    lines += ["", "expressions:"] + [f"  {r.name}: {r.cel}" + (f"  ({notes[r.name]})" if r.name in notes else "")
                                     for r in results]
    for r in results:
        if not r.agree:
            lines += ["", f"DISAGREEMENT {r.name}: {r.cel}", f"  ours:      {_full(r.ours)}",
                      f"  allocator: {_full(r.allocator)}"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Start a one-cluster LocalFleet, run the cases, print the report; exit 1 on any disagreement."""
    from .standalone import run_standalone

    return run_standalone(argv, "/tmp/e2e-selector-cases", run_cases, report)


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:]))
