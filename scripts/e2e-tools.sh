#!/usr/bin/env bash
# Build the end-to-end toolchain from Go modules at pinned versions, into a cache outside the repository:
# the Pulumi CLI, the Kubernetes provider, etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, egctl (Envoy Gateway's CLI, whose offline translator
# tests/e2e/front_door_xds.py runs) and the LeaderWorkerSet controller (tests/e2e/lws_controller.py runs
# it on every workload cluster). A binary already built at its pinned version is skipped.
# Only the Go module proxy is used (no GitHub release downloads, no get.pulumi.com).
#
#   scripts/e2e-tools.sh            build what is missing, print what is there
#   scripts/e2e-tools.sh --print    only print the bin folder (for PATH=...)
#
# Why wrapper modules: the upstream main packages live in modules whose go.mod has `replace`
# directives, which `go install pkg@version` refuses; a small main module of our own requires them
# at the pinned tags (and maps Kubernetes' staging modules to their published versions) and builds.
set -euo pipefail

CACHE=${MODELPLANE_E2E_CACHE:-$HOME/.cache/modelplane/e2e}
BIN=$CACHE/bin
WORK=$CACHE/modules

# --- pins (see docs/e2e.md for why these versions) ---------------------------------------------
# The Python language host is not built: its module (sdk/python/cmd/pulumi-language-python/v3) is
# untagged and the proxy serves no version of it; the e2e runs the program through the Automation API.
PULUMI_VERSION=v3.276.0                       # the CLI (newest pkg/v3 the proxy serves; >= the PyPI SDK 3.272.0)
KUBERNETES_PROVIDER_VERSION=4.25.0            # pulumi-kubernetes release of the commit below
KUBERNETES_PROVIDER_COMMIT=v4.0.0-20260115033456-f47bc2d6f199   # tag v4.25.0; the only version served
KUBERNETES_VERSION=1.34.3                     # kube-apiserver, -controller-manager, -scheduler
ETCD_VERSION=v3.6.16
EGCTL_VERSION=v1.8.1                          # = servingStack.versions.envoyGateway (the front door's translator)
EGCTL_COMMIT=097ab899b9d041452d02f15d738514eda10ea21b   # tag v1.8.1 (the proxy's Origin), for `egctl version`
LWS_VERSION=v0.8.0                            # = servingStack.versions.leaderWorkerSet (its CRD is the pinned one)
LWS_COMMIT=fc19b9ae9b0113d228ba15f4b62b06bea434b510    # tag v0.8.0 (the proxy's Origin), for `--version`
# kubectl: the control plane's KUBERNETES_VERSION (client and server of one release, no version skew
# in the floor); built in a module of its own so adding it rebuilt none of the binaries above.
HELM_VERSION=v4.3.2                           # helm v4 (newest the proxy serves; v4 is current upstream, v3 is
                                              # in maintenance); its own module: it brings k8s.io/* v0.37.2

if [[ ${1:-} == --print ]]; then echo "$BIN"; exit 0; fi

export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$BIN" "$WORK"
built=()

# have NAME VERSION: the binary exists and was built at this version
have() { [[ -x $BIN/$1 && -f $BIN/.$1.version && $(cat "$BIN/.$1.version") == "$2" ]]; }
stamp() { echo "$2" >"$BIN/.$1.version"; built+=("$1 $2"); }
# module DIR: a fresh wrapper main module
module() { rm -rf "$WORK/$1"; mkdir -p "$WORK/$1"; cd "$WORK/$1"; go mod init "local/$1" >/dev/null 2>&1; }
tools_go() { { printf '//go:build tools\n\npackage tools\n\nimport (\n'; for p in "$@"; do printf '\t_ "%s"\n' "$p"; done; printf ')\n'; } >tools.go; }
step() { printf '[e2e-tools] %s\n' "$*" >&2; }

build_etcd() {
  have etcd "$ETCD_VERSION" && return
  step "etcd $ETCD_VERSION"
  module etcd
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >main.go
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .
  stamp etcd "$ETCD_VERSION"
}

# kubernetes_module DIR VERSION STAGING: a wrapper module requiring k8s.io/kubernetes@VERSION. It requires its
# staging modules at v0.0.0 through local replaces: map each to its release (STAGING, e.g. v0.34.3)
kubernetes_module() {
  module "$1"
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$gomod"); do
    go mod edit -replace="$m=$m@$3"
  done
  go mod edit -require="k8s.io/kubernetes@$2"
}

build_kubernetes() {
  local v=v$KUBERNETES_VERSION staging=v0.${KUBERNETES_VERSION#1.}
  have kube-apiserver "$v" && have kube-controller-manager "$v" && have kube-scheduler "$v" && return
  step "kube-apiserver, kube-controller-manager, kube-scheduler $v"
  kubernetes_module kubernetes "$v" "$staging"
  tools_go k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  go mod tidy
  local V=k8s.io/component-base/version minor=${KUBERNETES_VERSION#1.}; minor=${minor%%.*}
  go build -trimpath -ldflags "-s -w -X $V.gitVersion=$v -X $V.gitMajor=1 -X $V.gitMinor=$minor -X $V.gitTreeState=clean" \
    -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  for b in kube-apiserver kube-controller-manager kube-scheduler; do stamp "$b" "$v"; done
}

build_pulumi() {
  have pulumi "$PULUMI_VERSION" && return
  step "pulumi $PULUMI_VERSION"
  module pulumi
  go get "github.com/pulumi/pulumi/pkg/v3@$PULUMI_VERSION" "github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION" >/dev/null
  tools_go github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
  go mod tidy
  # without the version ldflag `pulumi version` prints nothing usable, and the Automation API parses it
  go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    -o "$BIN/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
  stamp pulumi "$PULUMI_VERSION"
}

build_kubernetes_provider() {
  have pulumi-resource-kubernetes "$KUBERNETES_PROVIDER_VERSION" && return
  step "pulumi-resource-kubernetes $KUBERNETES_PROVIDER_VERSION"
  module pulumi-kubernetes
  # the provider's go.mod maps its sdk to ../sdk; take the published sdk of the same release
  go mod edit -replace="github.com/pulumi/pulumi-kubernetes/sdk/v4=github.com/pulumi/pulumi-kubernetes/sdk/v4@v$KUBERNETES_PROVIDER_VERSION"
  go get "github.com/pulumi/pulumi-kubernetes/provider/v4@$KUBERNETES_PROVIDER_COMMIT" >/dev/null
  # main.go embeds schema-embed.json, which upstream's `go generate` writes from schema.json (not in the
  # module zip): run that generator on a copy of the main package, as upstream's Makefile does
  local src main=cmd/pulumi-resource-kubernetes
  src=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)/$main
  mkdir -p "$main"
  cp "$src"/main.go "$src"/generate.go "$src"/schema.json "$src"/terraform-mapping.json "$main"/
  chmod u+w "$main"/*
  go mod tidy
  (cd "$main" && VERSION=$KUBERNETES_PROVIDER_VERSION go run -mod=mod generate.go)
  go build -trimpath \
    -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$KUBERNETES_PROVIDER_VERSION" \
    -o "$BIN/pulumi-resource-kubernetes" "./$main"
  stamp pulumi-resource-kubernetes "$KUBERNETES_PROVIDER_VERSION"
}

build_egctl() {
  have egctl "$EGCTL_VERSION" && return
  step "egctl $EGCTL_VERSION"
  module egctl
  # a plain dependency: the module's own replace directives (none at v1.8.1) would not apply anyway
  go get "github.com/envoyproxy/gateway/cmd/egctl@$EGCTL_VERSION" >/dev/null
  tools_go github.com/envoyproxy/gateway/cmd/egctl
  go mod tidy
  local V=github.com/envoyproxy/gateway/internal/cmd/version
  go build -trimpath -ldflags "-s -w -X $V.envoyGatewayVersion=$EGCTL_VERSION -X $V.gitCommitID=$EGCTL_COMMIT" \
    -o "$BIN/egctl" github.com/envoyproxy/gateway/cmd/egctl
  stamp egctl "$EGCTL_VERSION"
}

build_lws() {
  have lws-controller "$LWS_VERSION" && return
  step "lws-controller $LWS_VERSION"
  module lws
  # upstream's go.mod has no replace lines, but its main package is `cmd`: `go install` would name the binary so
  go get "sigs.k8s.io/lws@$LWS_VERSION" >/dev/null
  tools_go sigs.k8s.io/lws/cmd
  go mod tidy
  local V=sigs.k8s.io/lws/pkg/version
  go build -trimpath -ldflags "-s -w -X $V.GitVersion=$LWS_VERSION -X $V.GitCommit=$LWS_COMMIT" \
    -o "$BIN/lws-controller" sigs.k8s.io/lws/cmd
  stamp lws-controller "$LWS_VERSION"
}

build_kubectl() {
  local v=v$KUBERNETES_VERSION staging=v0.${KUBERNETES_VERSION#1.}
  have kubectl "$v" && return
  step "kubectl $v"
  kubernetes_module kubectl "$v" "$staging"
  tools_go k8s.io/kubernetes/cmd/kubectl
  go mod tidy
  # `kubectl version` reads client-go's version; the shared flag parsing reads component-base's: set both
  local minor=${KUBERNETES_VERSION#1.} ld="-s -w" V; minor=${minor%%.*}
  for V in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $V.gitVersion=$v -X $V.gitMajor=1 -X $V.gitMinor=$minor -X $V.gitTreeState=clean"
  done
  go build -trimpath -ldflags "$ld" -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl
  stamp kubectl "$v"
}

build_helm() {
  have helm "$HELM_VERSION" && return
  step "helm $HELM_VERSION"
  module helm
  # a plain dependency: helm's go.mod has no replace directives
  go get "helm.sh/helm/v4@$HELM_VERSION" >/dev/null
  tools_go helm.sh/helm/v4/cmd/helm
  go mod tidy
  local V=helm.sh/helm/v4/internal/version
  go build -trimpath -ldflags "-s -w -X $V.version=$HELM_VERSION -X $V.gitTreeState=clean" \
    -o "$BIN/helm" helm.sh/helm/v4/cmd/helm
  stamp helm "$HELM_VERSION"
}

start=$SECONDS
build_etcd
build_kubernetes
build_pulumi
build_kubernetes_provider
build_egctl
build_lws
build_kubectl
build_helm

step "built ${#built[@]} in $((SECONDS - start)) s into $BIN"
for b in pulumi pulumi-resource-kubernetes etcd kube-apiserver kube-controller-manager kube-scheduler egctl \
         lws-controller kubectl helm; do
  printf '  %-28s %s\n' "$b" "$(cat "$BIN/.$b.version")"
done
du -sh "$BIN" | sed 's/^/  bin: /'
