#!/usr/bin/env bash
# The release as a team installs it: build tracescore and each integration (wheel and sdist) into
# dist/, check them with twine, check the wheel carries its data files, then install the built
# wheels (not editable) into a fresh virtualenv outside the checkout and run the README's
# Quickstart and the command line from there.
#
#   bash scripts/check_release.sh            # dist/ in the checkout; prints the built files
#
# Needs python3 and the package index (or pip's cache). Writes only dist/ and temporary folders.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dist="$repo/dist"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 LITELLM_OFFLINE_MODE=true

echo "== build"
python3 -m venv "$work/tools"
"$work/tools/bin/python" -m pip install -q "build>=1.2,<2" "twine>=5,<8"
rm -rf "$dist"
"$work/tools/bin/python" -m build -q --outdir "$dist" "$repo" >/dev/null
for pkg in "$repo"/integrations/*/; do
    "$work/tools/bin/python" -m build -q --outdir "$dist" "$pkg" >/dev/null
done
"$work/tools/bin/twine" check --strict "$dist"/*

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/tracescore/_version.py")"
wheel="$dist/tracescore-$version-py3-none-any.whl"
[ -f "$wheel" ] || { echo "no $wheel: the built version is not tracescore/_version.py's" >&2; exit 1; }

# Every file of the package that is not Python (templates, py.typed, data) is in the wheel.
"$work/tools/bin/python" - "$repo" "$wheel" <<'EOF'
import subprocess, sys, zipfile
repo, wheel = sys.argv[1], sys.argv[2]
tracked = subprocess.run(["git", "-C", repo, "ls-files", "tracescore"], capture_output=True,
                         text=True, check=True).stdout.split()
wanted = {p for p in tracked if not p.endswith(".py")} | {"tracescore/py.typed"}
names = set(zipfile.ZipFile(wheel).namelist())
missing = sorted(wanted - names)
if missing:
    sys.exit(f"missing from {wheel}: {missing}")
print(f"wheel data files: {len(wanted)} present")
EOF

echo "== install the built wheels into a fresh venv, outside the checkout"
venv="$work/venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# The documented form: the wheel file with the extras in brackets; the integrations beside it.
"$venv/bin/python" -m pip install -q "$wheel[serve]" "$dist"/tracescore_*-py3-none-any.whl
run="$work/run"
mkdir -p "$run"
cd "$run"
env_clean=(env -u PYTHONPATH -u TRACESCORE_JUDGE_MODEL -u OTEL_EXPORTER_OTLP_ENDPOINT
           -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT -u OPENAI_API_KEY -u OPENAI_API_BASE
           PATH="$venv/bin:$PATH")
where="$("${env_clean[@]}" python -c 'import tracescore; print(tracescore.__file__)')"
case "$where" in "$venv"/*) ;; *) echo "tracescore imported from $where, not the venv" >&2; exit 1;; esac
for integration in tracescore_openai tracescore_litellm tracescore_langchain; do
    "${env_clean[@]}" python -c "import $integration"
done

echo "== tracescore --version"
shown="$("${env_clean[@]}" tracescore --version)"
echo "$shown"
[ "$shown" = "tracescore $version" ]

echo "== tracescore scorers"
ids="$("${env_clean[@]}" tracescore scorers)"
echo $ids
grep -qx content-similarity <<<"$ids"

echo "== the README's Quickstart, as a script"
python3 - "$repo/README.md" > quickstart.py <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
section = text.split("## Quickstart", 1)[1]
print(re.search(r"```python\n(.*?)```", section, re.S).group(1))
EOF
"${env_clean[@]}" TRACESCORE_FLUSH_TIMEOUT=20 python quickstart.py
[ -s tracescore-traces.jsonl ] || { echo "the Quickstart wrote no spans" >&2; exit 1; }
grep -q '"invoke_agent support-bot"' tracescore-traces.jsonl

echo "== tracescore eval (heuristic scorers, HTML report from the wheel's templates)"
cat > agent.py <<'EOF'
ANSWERS = {"capital of France?": "Paris", "capital of Spain?": "Madrid"}


def answer(question):
    return ANSWERS[question]
EOF
printf '%s\n' '{"input": "capital of France?", "ground_truth": "Paris"}' \
    '{"input": "capital of Spain?", "ground_truth": "Madrid"}' > data.jsonl
"${env_clean[@]}" tracescore eval data.jsonl --target agent:answer \
    --scorer content-similarity:0.8 --scorer textual-difference:0.8 --no-progress \
    --report out.json --junit out.xml --html out.html
grep -q '"verdict": "passed"' out.json
grep -q 'id="verdict"' out.html

echo "== tracescore serve --check (the serve extra, from the wheel)"
cp "$repo/deploy/tracescore-serve.yaml" serve.yaml
"${env_clean[@]}" TRACESCORE_SERVE_TOKEN=release-check tracescore serve --config serve.yaml --check

echo "== the pytest plugin: the first test of docs/testing.md, with the scripted judge"
"$venv/bin/python" -m pip install -q "pytest>=8,<10"
python3 - "$repo/docs/testing.md" > test_agent.py <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
print(re.search(r"<!-- snippet: pytest [^\n]*\n```python\n(.*?)```", text, re.S).group(1))
EOF
"${env_clean[@]}" python -m pytest -q -p no:cacheprovider test_agent.py

echo "release check passed: $(cd "$dist" && ls | tr '\n' ' ')"
