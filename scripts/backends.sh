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
# and build caches are Go's own (GOMODCACHE, GOCACHE). Prints when each step starts, a line a
# minute during the long ones, and the time each step took.
#
# Measured cold on this project's 2-core machine at load 10-20 (other builds running), empty
# caches: Debian packages 30 s, Jaeger's Go build 2,660 s (44 min: ~1,500 packages), Phoenix's
# virtualenv 407 s; 3,097 s (52 min) in all; the Jaeger UI from a checkout (JAEGER_UI_SRC) 719 s
# more. A warm run takes about a second.
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
    # step NAME COLD COMMAND...: say what starts (and how long it took cold here), run COMMAND,
    # then print how long it took.
    local name="$1" cold="$2" started="$EPOCHREALTIME"
    shift 2
    echo "== backends: $name: starting (measured cold, 2 cores at load 10-20: $cold; cached: seconds)"
    "$@"
    awk -v a="$started" -v b="$EPOCHREALTIME" -v n="$name" \
        'BEGIN { printf "== backends: %-28s %6.1f s\n", n, b - a }'
}

with_progress() {
    # with_progress WHAT LOG COMMAND...: run COMMAND with its output in LOG, printing a line a
    # minute (elapsed time, lines of LOG so far) so that a long silent build shows it is alive.
    local what="$1" log="$2" started="$SECONDS" pid status
    shift 2
    "$@" >"$log" 2>&1 &
    pid=$!
    while ! wait_up_to 60 "$pid"; do
        echo "   $what: $(((SECONDS - started) / 60)) min, $(wc -l <"$log") lines in $log"
    done
    wait "$pid" && status=0 || status=$?
    return "$status"
}

wait_up_to() {
    # wait_up_to SECONDS PID: true as soon as PID has exited, false after SECONDS.
    local i
    for ((i = 0; i < $1; i++)); do
        kill -0 "$2" 2>/dev/null || return 0
        sleep 1
    done
    ! kill -0 "$2" 2>/dev/null
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
    # -v names each package as it is compiled: the progress lines count them (~1,500 cold).
    if ! with_progress "jaeger go build" "$CACHE/jaeger-build.log" \
        bash -c 'cd "$1" && GOFLAGS=-mod=readonly go build -v -trimpath -o "$2" ./cmd/jaeger' \
        _ "$dir" "$CACHE/bin/jaeger"; then
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
    with_progress "jaeger ui npm build" "$CACHE/jaeger-ui-build.log" bash -c 'cd "$1" \
        && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        && npm run --workspace @jaegertracing/plexus prepublishOnly \
        && cd packages/jaeger-ui && npm run build' _ "$JAEGER_UI_SRC" \
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
    with_progress "phoenix pip install" "$CACHE/phoenix-install.log" \
        "$venv/bin/python" -m pip install --progress-bar off "$PHOENIX_SPEC" \
        || { tail -n 40 "$CACHE/phoenix-install.log"; return 1; }
    echo "$PHOENIX_SPEC" >"$stamp"
}

total="$EPOCHREALTIME"
step "debian packages" "30 s" debian_packages
step "jaeger $JAEGER_VERSION" "44 min" jaeger
step "jaeger ui" "12 min, only with JAEGER_UI_SRC" jaeger_ui
step "phoenix venv" "7 min" phoenix
awk -v a="$total" -v b="$EPOCHREALTIME" 'BEGIN { printf "== backends: %-28s %6.1f s\n", "total", b - a }'
echo "TRACESCORE_BACKENDS_DIR=$CACHE"
