#!/usr/bin/env bash
# Installs what checks the Helm chart, into a cache outside the repo, once per machine: helm, built
# with `go install` from the Go module proxy (no binary download), and kubernetes-validate from
# PyPI in a virtualenv (it carries the Kubernetes JSON schemas, so nothing is fetched when it
# runs). Prints two lines: the helm binary and the kubernetes-validate binary. Used by .ci/run and
# test/deploy/helm.test.ts.
set -euo pipefail
HELM_VERSION=v3.22.0
KUBERNETES_VALIDATE_VERSION=1.37.0
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
helm_dir=$CACHE/helm-$HELM_VERSION
if [[ ! -x $helm_dir/helm ]]; then
  mkdir -p "$helm_dir"
  GOBIN=$helm_dir go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
fi
validate_dir=$CACHE/kubernetes-validate-$KUBERNETES_VALIDATE_VERSION
if [[ ! -x $validate_dir/bin/kubernetes-validate ]]; then
  rm -rf "$validate_dir"
  python3 -m venv "$validate_dir"
  "$validate_dir/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
fi
echo "$helm_dir/helm"
echo "$validate_dir/bin/kubernetes-validate"
