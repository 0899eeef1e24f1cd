#!/usr/bin/env bash
# The two-region demo on kind: three kind clusters on one Docker network (the front door on
# `modelplane-control`, fake DRA GPUs on `modelplane-eu-west` and `modelplane-us-east`), one
# ModelDeployment with a replica per region, one URL that alternates regions.
#
#   scripts/demo.sh check     prerequisites only (docker, kind, pulumi, kubectl), with how to install each
#   scripts/demo.sh up        check, set up the venv, `pulumi up --stack demo`, then status and curl (default)
#   scripts/demo.sh status    placement and the front-door URL
#   scripts/demo.sh curl [N]  N requests (default 6) through the front door, from a pod in the control cluster
#   scripts/demo.sh down      `pulumi destroy --stack demo` (deletes the three kind clusters)
#
# State goes to a local file backend (no Pulumi Cloud account): $PULUMI_BACKEND_URL if set,
# else file://$HOME/.modelplane-demo-state. The demo stack holds no secrets, so the passphrase
# defaults to empty (PULUMI_CONFIG_PASSPHRASE).
set -euo pipefail

cd "$(dirname "$0")/.."
STACK=demo
KIND_MIN=0.31.0 # the pinned node image (kindest/node v1.34.3) is built for kind v0.31.0
CURL_IMAGE=curlimages/curl:8.17.0
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$HOME/.modelplane-demo-state}"
export PULUMI_CONFIG_PASSPHRASE="${PULUMI_CONFIG_PASSPHRASE-}"
export PULUMI_SKIP_UPDATE_CHECK=1

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

version_at_least() { # version_at_least HAVE WANT
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

check() {
  local missing=0
  if ! command -v docker >/dev/null; then
    echo "missing: docker — install Docker Desktop (macOS/Windows) or Docker Engine: https://docs.docker.com/engine/install/"
    missing=1
  elif ! docker info >/dev/null 2>&1; then
    echo "docker is installed but the engine is not running (or you lack permission): start Docker Desktop, or 'sudo systemctl start docker'"
    missing=1
  fi
  if ! command -v kind >/dev/null; then
    echo "missing: kind >= $KIND_MIN — 'brew install kind', or 'go install sigs.k8s.io/kind@v$KIND_MIN', or https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
    missing=1
  else
    local have
    have="$(kind version | sed -n 's/^kind v\([0-9.]*\).*/\1/p')"
    if [ -n "$have" ] && ! version_at_least "$have" "$KIND_MIN"; then
      echo "kind $have is too old for the pinned node image: install kind >= $KIND_MIN"
      missing=1
    fi
  fi
  if ! command -v pulumi >/dev/null; then
    echo "missing: pulumi CLI — 'curl -fsSL https://get.pulumi.com | sh', or 'brew install pulumi/tap/pulumi'"
    missing=1
  fi
  if ! command -v kubectl >/dev/null; then
    echo "missing: kubectl (for the curl from inside the control cluster) — 'brew install kubectl', or https://kubernetes.io/docs/tasks/tools/"
    missing=1
  fi
  if ! command -v python3 >/dev/null; then
    echo "missing: python3 (3.11 or newer) — https://www.python.org/downloads/"
    missing=1
  fi
  [ "$missing" = 0 ] || fail "install what is missing above, then run scripts/demo.sh again"
  say "prerequisites: ok (state: $PULUMI_BACKEND_URL)"
}

venv() {
  if [ ! -x venv/bin/modelplane ]; then
    say "setting up the virtualenv (venv/)"
    python3 -m venv venv && venv/bin/pip install -q -r requirements.txt
  fi
  venv/bin/modelplane validate --stack "$STACK"
}

stack() {
  pulumi login "$PULUMI_BACKEND_URL" >/dev/null
  pulumi stack select "$STACK" --create >/dev/null
}

# The kubectl context of the front door's kind cluster (kind names contexts kind-<cluster>).
control_context() {
  venv/bin/python - "$STACK" <<'EOF'
import sys
from pathlib import Path
from modelplane.api import load_fleet
from modelplane.api.stackfile import read_stack_file
fleet = load_fleet(read_stack_file(Path(f"stacks/Pulumi.{sys.argv[1]}.yaml")).config)
gateway = fleet.inference_gateway
print("kind-" + (gateway.cluster.kind.cluster_name or gateway.cluster_name))
EOF
}

status() {
  stack
  say "placement (pulumi stack output deployments)"
  pulumi stack output deployments --json
  say "front door"
  echo "gateway address: $(pulumi stack output gatewayAddress)"
  pulumi stack output services --json
}

curl_front_door() {
  local count="${1:-6}" url context body replies
  stack
  url="$(pulumi stack output services --json | venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["ml-team/mock"])')"
  context="$(control_context)"
  body='{"model": "mock", "messages": [{"role": "user", "content": "hello"}]}'
  say "$count requests to $url/v1/chat/completions, from a pod in $context"
  # From inside the control cluster: the kind network is not routable from a macOS host.
  replies="$(kubectl --context "$context" run "mp-curl-$$" --rm -i --quiet --restart=Never --image="$CURL_IMAGE" \
    --command -- sh -c "for i in \$(seq $count); do curl -s -m 10 -H 'Content-Type: application/json' -d '$body' $url/v1/chat/completions; echo; done")"
  # Each reply names the pod that served it; the pod name starts with its replica's name.
  printf '%s\n' "$replies" | venv/bin/python -c '
import json, re, subprocess, sys
placement = json.loads(subprocess.run(["pulumi", "stack", "output", "placement", "--json"],
                                      capture_output=True, text=True, check=True).stdout)
clusters = {r["name"]: r["cluster"] for r in placement["replicas"]}
for i, line in enumerate(l for l in sys.stdin if l.strip()):
    pod = re.search(r"served by ([\w.-]+)", line)
    if pod is None:
        print(f"  {i + 1}: no answer: {line.strip()[:200]}")
        continue
    cluster = next((c for name, c in clusters.items() if pod.group(1).startswith(name + "-")), "?")
    print(f"  {i + 1}: served by {pod.group(1)}  ({cluster})")'
}

up() {
  check
  venv
  stack
  say "pulumi up --stack $STACK (three kind clusters, the serving stacks, the front door: about 10 minutes)"
  # a private TMPDIR, removed afterwards: the Kubernetes provider leaves each kubeconfig there (docs/your-own-cluster.md)
  bash scripts/private-tmpdir.sh pulumi up --stack "$STACK" --yes
  status
  curl_front_door 6
}

down() {
  stack
  bash scripts/private-tmpdir.sh pulumi destroy --stack "$STACK" --yes
}

case "${1:-up}" in
  check) check ;;
  up) up ;;
  status) status ;;
  curl) curl_front_door "${2:-6}" ;;
  down) down ;;
  *) fail "usage: scripts/demo.sh [check|up|status|curl [N]|down]" ;;
esac
