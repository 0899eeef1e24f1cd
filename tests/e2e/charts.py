"""Stand-in Helm charts and CRD manifests: a folder mirror (`modelplane:mirror`) the real program installs offline.

The end-to-end run has no internet and runs no chart's controllers, so each Helm release of the fleet
installs a stand-in chart from a folder mirror: the same chart name and pinned version, holding
only what the program itself relies on — the pinned upstream CRDs (tests/upstream-crds.toml) of
every custom kind it creates after that release, and the DeviceClasses its ResourceClaims name.
Controllers, webhooks and values are not reproduced (the LeaderWorkerSet controller runs beside the
cluster instead: tests/e2e/lws_controller.py); `StandIn.not_covered` says what is missing,
and `stand_in_report` prints it for the run's summary.

`write_mirror(stacks, out, crd_dir)` writes `out/charts/<chart>-<version>.tgz` and
`out/manifests/<component>-<version>-<file>`: the names `modelplane.render.sources` looks for, so
the stack's mirror is `mirror_config(out)`. A manifest with a pinned SHA-256 (the front door's
Gateway API standard-install) cannot be stood in — the program checks the digest — so nothing is
written for it: the e2e stack marks it `preinstalled` and the harness applies the pinned CRDs.

Every file is byte-deterministic (sorted tar entries, mtime 0, uid/gid 0, a gzip header without
name or time), and rewritten only when its bytes change, so a rerun leaves the mirror untouched.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import yaml

from modelplane.render.sources import chart_file_name, manifest_file_name, with_pinned_digest
from modelplane.render.types import HelmRelease, RemoteManifest

if TYPE_CHECKING:
    from modelplane.render.types import ClusterStack

REPO = Path(__file__).resolve().parents[2]
PINS_FILE = REPO / "tests" / "upstream-crds.toml"

# The pinned CRD files (paths under the CRD folder) each stand-in installs.
GATEWAY_API = ("gateway-api-v1.5.1/gateway.networking.k8s.io_gatewayclasses.yaml",
               "gateway-api-v1.5.1/gateway.networking.k8s.io_gateways.yaml",
               "gateway-api-v1.5.1/gateway.networking.k8s.io_httproutes.yaml")
ENVOY_GATEWAY = tuple(f"envoy-gateway-v1.8.1/gateway.envoyproxy.io_{kinds}.yaml" for kinds in (
    "envoyproxies", "backends", "backendtrafficpolicies", "clienttrafficpolicies", "envoyextensionpolicies",
    "httproutefilters", "envoypatchpolicies"))
INFERENCE_EXTENSION = ("gateway-api-inference-extension-v1.0.1/inference.networking.k8s.io_inferencepools.yaml",
                       "gateway-api-inference-extension-v1.0.1/inference.networking.x-k8s.io_inferenceobjectives.yaml")


@dataclass(frozen=True)
class ChartPlan:
    """What one stand-in chart holds, and what the real chart does that it does not."""

    crds: tuple[str, ...] = ()
    # Upstream renders these CRDs from templates/ (Helm then owns them: removed on uninstall, no wait
    # for Established); otherwise they go in crds/ (installed first, awaited, never removed).
    crds_as_templates: bool = False
    device_classes: tuple[tuple[str, str], ...] = ()  # (name, CEL selector)
    not_covered: str = ""


_NVIDIA_GPU = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"

CHARTS: dict[str, ChartPlan] = {
    "cert-manager": ChartPlan(not_covered=(
        "No cert-manager controller, webhook or CRDs (Certificate, Issuer, ...): the program creates none of its "
        "kinds, but nothing issues the dra-example-driver webhook certificate either.")),
    "gateway-helm": ChartPlan(crds=(*GATEWAY_API, *ENVOY_GATEWAY), not_covered=(
        "No Envoy Gateway controller or proxies, and of its CRDs only GatewayClass/Gateway/HTTPRoute (standard, "
        "pinned v1.6.1) and the Envoy Gateway kinds modelplane creates (EnvoyProxy; Backend, BackendTrafficPolicy, "
        "ClientTrafficPolicy, EnvoyExtensionPolicy, HTTPRouteFilter at v1.8.1): nothing programs a Gateway, sets its "
        "address or probes a backend, and the values (extension manager hooks, Backend API) are ignored. What Envoy "
        "Gateway makes of the front door's objects is checked by its own translator (egctl) instead.")),
    "ai-gateway-crds-helm": ChartPlan(crds=("ai-gateway-v0.7.0/aigateway.envoyproxy.io_aigatewayroutes.yaml",),
                                      crds_as_templates=True, not_covered=(
        "Only the AIGatewayRoute CRD (pinned v1.1.0), not AIServiceBackend, BackendSecurityPolicy and the rest; "
        "the program creates none of these kinds.")),
    "ai-gateway-helm": ChartPlan(not_covered=(
        "No AI Gateway controller or its ext-proc extension server: InferencePool backends of HTTPRoutes are "
        "never resolved to pods.")),
    "kube-prometheus-stack": ChartPlan(not_covered=(
        "No Prometheus operator, Prometheus or its CRDs (ServiceMonitor, PodMonitor, ...): nothing scrapes, and "
        "the scrape values are ignored.")),
    "lws": ChartPlan(crds=("lws-v0.8.0/leaderworkerset.x-k8s.io_leaderworkersets.yaml",), not_covered=(
        "The controller runs, but not from the chart: the harness runs LeaderWorkerSet v0.8.0 (built from its Go "
        "module, the pinned CRD's commit) beside each workload cluster, with the chart's four webhooks registered "
        "at its loopback port and a certificate from the cluster's CA, and applies the pinned CRD before it starts "
        "(tests/e2e/lws_controller.py), so this chart finds its CRD present. Not covered: the chart's Deployment, "
        "RBAC, webhook Service, internal cert controller, metrics and values.")),
    "node-feature-discovery": ChartPlan(not_covered=(
        "No NFD master or worker: nodes get no feature labels (the worker tolerations value is ignored).")),
    "dra-example-driver": ChartPlan(device_classes=(("gpu.example.com", "device.driver == 'gpu.example.com'"),),
                                    not_covered=(
        "Only the DeviceClass: no kubelet plugin (ResourceSlices come from the fake kubelet), no admission "
        "webhook and no cert-manager Issuer/Certificate for it.")),
    "dra-driver-nvidia-gpu": ChartPlan(device_classes=(("gpu.nvidia.com", _NVIDIA_GPU.format("gpu")),
                                                       ("mig.nvidia.com", _NVIDIA_GPU.format("mig"))), not_covered=(
        "Only the GPU and MIG DeviceClasses (selectors as upstream: they need the device attribute "
        "type == 'gpu'/'mig', which the real kubelet plugin publishes): no controller, kubelet plugin, webhook "
        "or ComputeDomain CRD.")),
    "metallb": ChartPlan(crds=("metallb-v0.14.9/metallb.io_ipaddresspools.yaml", "metallb-v0.14.9/metallb.io_l2advertisements.yaml"),
                         crds_as_templates=True, not_covered=(
        "No controller or speaker: nothing hands out LoadBalancer addresses from the IPAddressPool (the harness "
        "must), and of its CRDs only IPAddressPool and L2Advertisement (pinned v0.16.1, no BGP kinds).")),
    "traefik": ChartPlan(crds=("traefik/traefik.io_ingressroutes.yaml", "traefik/traefik.io_middlewares.yaml"),
                         not_covered=(
        "No Traefik proxy or Gateway provider: nothing accepts the GatewayClass, serves routes or copies the "
        "Service address into the Gateway status; of its CRDs only IngressRoute and Middleware (pinned v41.3.0).")),
}

# Remote manifests by servingStack component: the pinned CRDs that stand in for the upstream file.
MANIFESTS: dict[str, tuple[tuple[str, ...], str]] = {
    "inferenceExtension": (INFERENCE_EXTENSION, (
        "InferencePool v1 (pinned v1.6.0) and InferenceObjective v1alpha2 (pinned v1.5.0) only; the upstream "
        "file's InferencePool v1alpha2 (inference.networking.x-k8s.io) CRD is missing.")),
    "gatewayApi": (GATEWAY_API, (
        "GatewayClass, Gateway and HTTPRoute (standard, pinned v1.6.1) only; the upstream file also installs "
        "GRPCRoute, ReferenceGrant, BackendTLSPolicy and a ValidatingAdmissionPolicy.")),
}
PINNED_NOT_STOOD_IN = (
    "Not written: the program checks this file's pinned SHA-256, so a stand-in would be refused; preinstall "
    "it (inferenceGateway.preinstalled: [gatewayApi]) and apply the pinned Gateway API CRDs beforehand.")


@dataclass(frozen=True)
class StandIn:
    kind: str  # "chart" | "manifest"
    name: str  # chart name or manifest file
    version: str
    installs: tuple[str, ...]  # what it really creates, e.g. "CRD gateways.gateway.networking.k8s.io"
    not_covered: str  # what the real chart or manifest does that the stand-in does not


def mirror_config(out: Path) -> dict[str, str]:
    """The `modelplane:mirror` value for a mirror written to `out`."""
    return {"charts": str(out.resolve() / "charts"), "manifests": str(out.resolve() / "manifests")}


def write_mirror(stacks: Sequence[ClusterStack], out: Path, crd_dir: Path) -> list[StandIn]:
    """Stand-ins for every chart version and remote manifest of `stacks`, in `out/charts` and `out/manifests`.

    `stacks` may be rendered with or without a mirror (`cluster_stacks(fleet)`). Raises for a chart
    or manifest component with no stand-in defined here, and for a CRD file that is missing from
    `crd_dir` or is not the pinned one.
    """
    crds = PinnedCRDs(crd_dir)
    charts: dict[tuple[str, str], None] = {}
    manifests: dict[str, RemoteManifest] = {}
    for stack in stacks:
        for release in stack.releases:
            charts[(chart_name(release), release.version)] = None
        for manifest in stack.remote_manifests:
            manifests.setdefault(_manifest_file(manifest), with_pinned_digest(manifest))
    stand_ins = []
    for chart, version in sorted(charts):
        if chart not in CHARTS:
            raise KeyError(f"no stand-in for Helm chart {chart} {version}: add it to tests/e2e/charts.py CHARTS")
        plan = CHARTS[chart]
        _write_if_changed(out / "charts" / chart_file_name(chart, version), chart_archive(chart, version, plan, crds))
        installs = tuple(f"CRD {crd_name(p)}" for p in plan.crds) + tuple(f"DeviceClass {n}" for n, _ in plan.device_classes)
        stand_ins.append(StandIn("chart", chart, version, installs, plan.not_covered))
    for file, manifest in sorted(manifests.items()):
        if manifest.component not in MANIFESTS:
            raise KeyError(f"no stand-in for the {manifest.component} manifest {file}: add it to tests/e2e/charts.py")
        paths, not_covered = MANIFESTS[manifest.component]
        if manifest.sha256 is not None:
            stand_ins.append(StandIn("manifest", file, manifest.version, (), PINNED_NOT_STOOD_IN))
            continue
        _write_if_changed(out / "manifests" / file, b"---\n".join(crds.read(p) for p in paths))
        stand_ins.append(StandIn("manifest", file, manifest.version, tuple(f"CRD {crd_name(p)}" for p in paths),
                                 not_covered))
    return stand_ins


def stand_in_report(stand_ins: Sequence[StandIn]) -> str:
    """A plain-text table: what each stand-in installs, then what it leaves out."""
    rows = [(s.kind, s.name, s.version, ", ".join(s.installs) or "-") for s in stand_ins]
    headers = ("KIND", "NAME", "VERSION", "INSTALLS")
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (headers, *rows)]
    lines += ["", "Not covered by the stand-ins:"]
    lines += [f"  {s.name} {s.version}: {s.not_covered}" for s in stand_ins]
    return "\n".join(lines) + "\n"


# --- chart archives ----------------------------------------------------------------------------------

def chart_archive(chart: str, version: str, plan: ChartPlan, crds: PinnedCRDs) -> bytes:
    """The `.tgz` of one stand-in chart: `<chart>/Chart.yaml`, `crds/` or `templates/` CRDs, DeviceClass templates."""
    metadata = {"apiVersion": "v2", "name": chart, "version": version, "type": "application",
                "description": f"modelplane e2e stand-in for {chart} {version} (tests/e2e/charts.py)"}
    files = {"Chart.yaml": yaml.safe_dump(metadata, sort_keys=False).encode()}
    folder = "templates" if plan.crds_as_templates else "crds"
    for path in plan.crds:
        files[f"{folder}/{Path(path).name}"] = crds.read(path)
    for name, expression in plan.device_classes:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                        "spec": {"selectors": [{"cel": {"expression": expression}}]}}
        files[f"templates/deviceclass-{name}.yaml"] = yaml.safe_dump(device_class, sort_keys=False).encode()
    return deterministic_tgz({f"{chart}/{name}": data for name, data in files.items()})


def deterministic_tgz(files: dict[str, bytes]) -> bytes:
    """A gzipped tar of `files` whose bytes depend only on the names and contents."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


# --- helpers -----------------------------------------------------------------------------------------

def crd_name(path: str) -> str:
    """`metallb/metallb.io_ipaddresspools.yaml` -> `ipaddresspools.metallb.io` (kubebuilder's `<group>_<plural>.yaml`)."""
    group, _, plural = Path(path).stem.partition("_")
    return f"{plural}.{group}"


class PinnedCRDs:
    """The pinned CRD files of `crd_dir`, each checked against its SHA-256 in tests/upstream-crds.toml."""

    def __init__(self, crd_dir: Path) -> None:
        self.crd_dir = crd_dir
        with open(PINS_FILE, "rb") as fh:
            self.pins = {entry["path"]: entry["sha256"] for entry in tomllib.load(fh)["crd"]}
        self.cache: dict[str, bytes] = {}

    def read(self, path: str) -> bytes:
        if path not in self.cache:
            if path not in self.pins:
                raise KeyError(f"{path} is not a pinned CRD (tests/upstream-crds.toml)")
            data = (self.crd_dir / path).read_bytes()
            if hashlib.sha256(data).hexdigest() != self.pins[path]:
                raise ValueError(f"{self.crd_dir / path} is not the pinned file (SHA-256 differs)")
            self.cache[path] = data if data.endswith(b"\n") else data + b"\n"
        return self.cache[path]


def chart_name(release: HelmRelease) -> str:
    """The chart's name, also when the release already points into a folder mirror (`<dir>/<chart>-<version>.tgz`)."""
    if release.repository:
        return release.chart
    file = Path(release.chart).name
    suffix = f"-{release.version}.tgz"
    if not file.endswith(suffix):
        raise ValueError(f"release {release.name}: local chart {release.chart} is not named <chart>{suffix}")
    return file[:-len(suffix)]


def _manifest_file(manifest: RemoteManifest) -> str:
    """The manifest's mirror file name, also when it already points into a mirror (a folder or a base URL)."""
    current = urlsplit(manifest.url).path.rsplit("/", 1)[-1]
    return current if current.startswith(f"{manifest.component}-{manifest.version}-") else manifest_file_name(manifest)


def _write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
