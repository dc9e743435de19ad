#!/usr/bin/env bash
# Installs the real backends that tests/backends/ run tracescore's HaluEval demo against, and the
# browser that scripts/screenshots.py drives:
#
#   * Prometheus 2.42 and promtool, Chromium        Debian packages (apt-get; needs root)
#   * Jaeger v2 (OTLP receiver, query API, UI)      built from its Go module into $CACHE/bin
#   * Arize Phoenix                                 a virtualenv of its own, $CACHE/venv-phoenix
#   * the Jaeger UI (for the screenshot only)       built from a jaeger-ui checkout, if given
#
# Idempotent: a step whose result is already there (same version) is skipped, so a warm run takes
# seconds. Everything lands under one directory reused between runs, outside the work tree
# because CI runs in a fresh clone: TRACESCORE_BACKENDS_DIR, default
# ~/.cache/tracescore-backends (the tests and scripts/screenshots.py look there too). Go's module
# and build caches are Go's own (GOMODCACHE, GOCACHE). Prints the time each step took.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${TRACESCORE_BACKENDS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tracescore-backends}"
JAEGER_MODULE="github.com/jaegertracing/jaeger/cmd/jaeger"
JAEGER_VERSION="v1.76.0"
# Pinned to the major release whose REST API (/v1/projects/<name>/spans, /span_annotations) the
# tests read; a new major is a deliberate bump.
PHOENIX_SPEC="arize-phoenix>=20.26,<21"
PYTHON="${PYTHON:-python3}"

mkdir -p "$CACHE/bin"
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() {
    # step NAME COMMAND...: run COMMAND, then print how long it took.
    local name="$1" started="$EPOCHREALTIME"
    shift
    "$@"
    awk -v a="$started" -v b="$EPOCHREALTIME" -v n="$name" \
        'BEGIN { printf "== backends: %-28s %6.1f s\n", n, b - a }'
}

debian_packages() {
    if command -v prometheus >/dev/null && command -v promtool >/dev/null \
        && command -v chromium >/dev/null; then
        echo "prometheus, promtool and chromium already installed"
        return
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # No recommends (udev, upower, mesa, node-exporter): a font is the only one a screenshot needs.
    apt-get install -y -qq --no-install-recommends prometheus chromium fonts-liberation >/dev/null
}

jaeger() {
    local stamp="$CACHE/bin/jaeger.version"
    if [[ -x "$CACHE/bin/jaeger" && "$(cat "$stamp" 2>/dev/null)" == "$JAEGER_VERSION" ]]; then
        echo "jaeger $JAEGER_VERSION already built"
        return
    fi
    # `go install module@version` refuses Jaeger: its go.mod has a replace directive (sarama).
    # Built as the main module, from the module cache's read-only copy, the directive applies.
    local dir
    dir="$(go mod download -json "${JAEGER_MODULE%/cmd/jaeger}@$JAEGER_VERSION" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    if ! (cd "$dir" && GOFLAGS=-mod=readonly go build -trimpath -o "$CACHE/bin/jaeger" \
        ./cmd/jaeger) >"$CACHE/jaeger-build.log" 2>&1; then
        tail -n 40 "$CACHE/jaeger-build.log"
        return 1
    fi
    echo "$JAEGER_VERSION" >"$stamp"
}

jaeger_ui() {
    # Jaeger built from its module serves the query API but no UI: the UI's web assets are built
    # from the jaeger-ui repository, which no package registry carries. With a checkout of it
    # (JAEGER_UI_SRC, tag v1.73.0: the last that builds on Node 20), build it once into the
    # cache; without one, only the Jaeger screenshot is skipped (the tests need no UI).
    local ui="$CACHE/jaeger-ui"
    if [[ -f "$ui/index.html" ]]; then
        echo "jaeger ui already built"
        return
    fi
    if [[ -z "${JAEGER_UI_SRC:-}" ]]; then
        echo "jaeger ui: no JAEGER_UI_SRC checkout; the Jaeger screenshot will be skipped"
        return
    fi
    (cd "$JAEGER_UI_SRC" \
        && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        && npm run --workspace @jaegertracing/plexus prepublishOnly \
        && cd packages/jaeger-ui && npm run build) >"$CACHE/jaeger-ui-build.log" 2>&1 \
        || { tail -n 40 "$CACHE/jaeger-ui-build.log"; return 1; }
    mkdir -p "$ui"
    cp -r "$JAEGER_UI_SRC/packages/jaeger-ui/build/." "$ui/"
}

phoenix() {
    local venv="$CACHE/venv-phoenix" stamp="$CACHE/venv-phoenix/installed-spec"
    # A venv moved from elsewhere keeps scripts that point at its old path: rebuild it then.
    if [[ -x "$venv/bin/phoenix" && "$(cat "$stamp" 2>/dev/null)" == "$PHOENIX_SPEC" \
        && "$(head -n 1 "$venv/bin/phoenix")" == "#!$venv/bin/python"* ]]; then
        echo "phoenix already installed: $("$venv/bin/python" -m pip show arize-phoenix \
            | sed -n 's/^Version: //p')"
        return
    fi
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "$PHOENIX_SPEC"
    echo "$PHOENIX_SPEC" >"$stamp"
}

total="$EPOCHREALTIME"
step "debian packages" debian_packages
step "jaeger $JAEGER_VERSION" jaeger
step "jaeger ui" jaeger_ui
step "phoenix venv" phoenix
awk -v a="$total" -v b="$EPOCHREALTIME" 'BEGIN { printf "== backends: %-28s %6.1f s\n", "total", b - a }'
echo "TRACESCORE_BACKENDS_DIR=$CACHE"
