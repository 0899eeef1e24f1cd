#!/usr/bin/env bash
# Run a command, normally the Pulumi CLI, with TMPDIR set to a fresh folder only this user can open,
# and remove that folder, with everything in it, when the command ends (also on Ctrl-C and SIGTERM).
#
#   scripts/private-tmpdir.sh pulumi up --stack prod
#   scripts/private-tmpdir.sh pulumi preview
#
# Why: the pulumi-kubernetes provider writes each cluster's kubeconfig, token or client key
# included, to $TMPDIR/kubeconfig<digits> every time it starts, and never removes it (for Helm;
# docs/your-own-cluster.md, "Credentials on disk"). The engine starts the provider with its own
# environment, which a Pulumi program cannot change, so the folder is set here, for the engine.
# The folder is made in $TMPDIR (or /tmp); a CI job points TMPDIR at its own temporary folder.
# MODELPLANE_PRIVATE_TMPDIR names the folder, so the program knows the run is covered.
set -euo pipefail
if [[ $# -eq 0 ]]; then
  echo "usage: scripts/private-tmpdir.sh COMMAND [ARG...]   (e.g. scripts/private-tmpdir.sh pulumi up)" >&2
  exit 2
fi
private=$(mktemp -d "${TMPDIR:-/tmp}/modelplane-run.XXXXXXXX")   # mode 0700, owned by this user
trap 'rm -rf -- "$private"' EXIT
# A signal's trap runs once the command has ended; then the EXIT trap removes the folder.
trap 'exit 130' INT
trap 'exit 143' TERM
# modelplane owns every object it applies: when one is already there under another field manager (an `up`
# that was killed created it, and the provider names a new manager each time it creates), the provider
# takes it over instead of stopping on a server-side apply conflict (docs/runbook.md, "An `up` that was
# killed"). Set PULUMI_K8S_ENABLE_PATCH_FORCE=false to be stopped instead.
export PULUMI_K8S_ENABLE_PATCH_FORCE=${PULUMI_K8S_ENABLE_PATCH_FORCE:-true}
# An awaited resource holds one of the engine's parallel slots until it is ready (a replica's Deployment until
# its pods are Ready: minutes while a model loads), and Pulumi's default is 4 slots per CPU: on a 2-core runner
# a fleet's replicas came up 8 resources at a time (docs/pulumi.md, "At fleet size"). `--parallel N` still wins.
export PULUMI_PARALLEL=${PULUMI_PARALLEL:-64}
# PULUMI_PARALLEL_DIFF stays unset: at 4 x 20 it made an unchanged `up` 29.8 s instead of 11.2 s (docs/e2e.md).
status=0
TMPDIR=$private MODELPLANE_PRIVATE_TMPDIR=$private "$@" || status=$?
exit "$status"
