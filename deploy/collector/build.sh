#!/usr/bin/env bash
# Builds the custom Collector of manifest.yaml with the official builder (ocb) and caches the
# binary. Idempotent: a cached binary whose stamp matches the manifest is reused at once.
#
#   deploy/collector/build.sh            # prints the binary's path on its last line
#
# Where it lands: $TRACESCORE_OTELCOL_DIR (default: <repo>/.ci-cache/collector), as
# otelcol-tracescore, with manifest.sha256 beside it. Go's module and build caches
# (GOMODCACHE, GOCACHE) are Go's own; a fresh machine downloads everything (see README,
# "Scoring as a service", for the measured cold time).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${TRACESCORE_OTELCOL_DIR:-$repo/.ci-cache/collector}"
builder_version="v0.161.0"
stamp="$(sha256sum "$here/manifest.yaml" | cut -d' ' -f1)-$builder_version"

if [[ -x "$out/otelcol-tracescore" && -f "$out/manifest.sha256" ]] \
    && [[ "$(cat "$out/manifest.sha256")" == "$stamp" ]]; then
    echo "$out/otelcol-tracescore"
    exit 0
fi

command -v go >/dev/null || { echo "build.sh: Go is required (go.dev/dl)" >&2; exit 1; }
mkdir -p "$out"
gobin="$out/bin"
if [[ ! -x "$gobin/builder" ]]; then
    GOBIN="$gobin" go install "go.opentelemetry.io/collector/cmd/builder@$builder_version"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sed "s#output_path: ./_build#output_path: $work/dist#" "$here/manifest.yaml" >"$work/manifest.yaml"
"$gobin/builder" --config "$work/manifest.yaml" >&2
install -m 0755 "$work/dist/otelcol-tracescore" "$out/otelcol-tracescore"
echo "$stamp" >"$out/manifest.sha256"
echo "$out/otelcol-tracescore"
