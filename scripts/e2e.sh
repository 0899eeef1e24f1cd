#!/usr/bin/env bash
# End to end on one machine: build the toolchain (cached), start a local fleet of real control
# planes, run the scenario with the real Pulumi engine and provider, tear everything down.
# Exits non-zero on any failed check, a process left behind or a file outside the scratch folder holding
# one of the run's cluster tokens; prints a summary table last. docs/e2e.md says what it proves.
#
#   scripts/e2e.sh              the whole run
#   scripts/e2e.sh --scale [--clusters N --deployments M] [--env KEY=VALUE]
#                               instead of the scenario, measure an operator's operations on a 10 x 50 fleet
#                               (tests/e2e/scale.py), each as a ratio to applying the same objects with kubectl/helm
#   KEEP=1 scripts/e2e.sh       keep the scratch folder (state, logs, rendered files) afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
extra=()
case ${1:-} in
  "") run=tests.e2e.scenario ;;
  --scale) run=tests.e2e.scale; extra=("${@:2}") ;;
  *) echo "usage: scripts/e2e.sh [--scale [--clusters N] [--deployments M] [--env KEY=VALUE]...]" >&2; exit 2 ;;
esac
CACHE=${MODELPLANE_E2E_CACHE:-$HOME/.cache/modelplane/e2e}
VENV=$CACHE/venv
started=$SECONDS

say() { printf '[e2e] %s\n' "$*"; }

# 1. the toolchain, from the Go module proxy (skips what is already built)
t=$SECONDS
bash scripts/e2e-tools.sh
tools_seconds=$((SECONDS - t))
BIN=$(bash scripts/e2e-tools.sh --print)

# 2. the e2e virtualenv: the core pins with the pulumi-kubernetes SDK that matches the built provider
t=$SECONDS
want=$(sha256sum tests/e2e/requirements.txt | cut -c1-16)
if [[ ! -x $VENV/bin/python || $(cat "$VENV/.requirements" 2>/dev/null) != "$want" ]]; then
  say "creating the e2e virtualenv in $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r tests/e2e/requirements.txt
  echo "$want" >"$VENV/.requirements"
fi
"$VENV/bin/pip" install -q --no-deps -e "$REPO"   # this clone's code, whatever clone made the venv
venv_seconds=$((SECONDS - t))

# 3. the pinned CRDs (the stand-in charts install them), verified by digest
if [[ -n ${MODELPLANE_K8S_CRD_DIR:-} ]]; then from=(--from "$MODELPLANE_K8S_CRD_DIR")
elif [[ -d ../shared/k8s-crds ]]; then from=(--from ../shared/k8s-crds)
else from=(); fi
"$VENV/bin/python" scripts/fetch_crds.py "${from[@]}" >/dev/null
CRDS=$("$VENV/bin/python" -c 'import sys; sys.path.insert(0, "scripts"); import fetch_crds; print(fetch_crds.cache_dir())')

# 4. the scenario, in a scratch folder; nothing may outlive it: no process, and no file holding a fleet token
#    (the Kubernetes provider writes each cluster's kubeconfig to its TMPDIR and never removes it; every Pulumi
#    command of the scenario runs through scripts/private-tmpdir.sh, as users are told to: docs/your-own-cluster.md)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/modelplane-e2e.XXXXXX")
touch "$WORK/.started"   # tests/e2e/leftovers.py reads the files written since
stop_leftovers() {
  local left
  left=$(pgrep -f -- "$WORK" || true)
  if [[ -n $left ]]; then
    say "killing processes left behind: $(echo $left)"
    kill -9 $left 2>/dev/null || true
    leftover=1
  fi
}
cleanup() {
  stop_leftovers
  [[ -n ${KEEP:-} ]] && say "kept $WORK" || rm -rf "$WORK"
}
leftover=0
trap cleanup EXIT
say "scratch folder $WORK"
t=$SECONDS
set +e
"$VENV/bin/python" -m "$run" --work "$WORK" --bin "$BIN" --venv "$VENV" --crds "$CRDS" "${extra[@]}"
rc=$?
set -e
scenario_seconds=$((SECONDS - t))
stop_leftovers
credentials=0
"$VENV/bin/python" -m tests.e2e.leftovers --work "$WORK" --since "$WORK/.started" || credentials=1
cleanup; trap - EXIT
[[ $leftover == 0 && $credentials == 0 ]] || rc=1

printf '\n%-34s %8s\n' "PHASE" "SECONDS"
printf '%-34s %8s\n' "toolchain (scripts/e2e-tools.sh)" "$tools_seconds" "e2e virtualenv" "$venv_seconds" \
  "scenario" "$scenario_seconds" "total" "$((SECONDS - started))"
printf 'disk: toolchain %s, Go module cache %s, Go build cache %s, e2e venv %s\n' \
  "$(du -sh "$BIN" | cut -f1)" "$(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)" \
  "$(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)" "$(du -sh "$VENV" | cut -f1)"
[[ $leftover == 0 ]] && say "no process left behind" || say "FAILED: processes were left behind"
[[ $credentials == 0 ]] && say "no credential left behind" || say "FAILED: files outside the scratch folder hold a fleet token (paths above)"
exit $rc
