#!/usr/bin/env bash
# Installs LangGraph's client SDKs, at pinned versions, into target/sdk-clients/ (ignored by
# git), for the tests that drive `stategraph serve` with the real clients:
#   target/sdk-clients/py  a Python venv with langgraph-sdk (runs server/tests/sdk/client.py)
#   target/sdk-clients/js  node_modules with @langchain/langgraph-sdk (for client.mjs)
# Idempotent: a second run with the same pins does nothing. Runs as root, with no standard
# input. Prints the directory as STATEGRAPH_SDK_CLIENTS=<dir> on its last line.
#
# The tests find the clients through that variable, or in target/sdk-clients/ by default.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_SDK_VERSION="0.4.14"
JS_SDK_VERSION="1.15.0"

dir="${STATEGRAPH_SDK_CLIENTS:-$PWD/target/sdk-clients}"
pins="langgraph-sdk==$PY_SDK_VERSION @langchain/langgraph-sdk@$JS_SDK_VERSION"
stamp="$dir/.installed"

for tool in python3 npm node; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "sdk-clients: $tool is not installed; the SDK client tests need it" >&2
        exit 1
    fi
done

installed() {
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ] || return 1
    [ -x "$dir/py/bin/python" ] || return 1
    "$dir/py/bin/python" -c 'import langgraph_sdk' 2>/dev/null || return 1
    [ -f "$dir/js/node_modules/@langchain/langgraph-sdk/package.json" ] || return 1
}

if installed; then
    echo "sdk-clients: already installed ($pins)"
else
    mkdir -p "$dir"
    rm -f "$stamp"
    if [ ! -x "$dir/py/bin/python" ]; then
        # Debian splits venv support out; install it if the first attempt fails.
        if ! python3 -m venv "$dir/py" >/dev/null 2>&1; then
            rm -rf "$dir/py"
            if command -v apt-get >/dev/null 2>&1; then
                apt-get update -qq </dev/null >/dev/null
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv </dev/null >/dev/null
            fi
            python3 -m venv "$dir/py"
        fi
    fi
    "$dir/py/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input "langgraph-sdk==$PY_SDK_VERSION" </dev/null
    mkdir -p "$dir/js"
    # A package.json of our own keeps npm from walking up into the workspace; "module" lets
    # client.mjs be copied here and import the package by name.
    printf '{"name":"stategraph-sdk-clients","private":true,"type":"module"}\n' \
        >"$dir/js/package.json"
    npm install --prefix "$dir/js" --no-audit --no-fund --no-save --ignore-scripts \
        --loglevel=error </dev/null "@langchain/langgraph-sdk@$JS_SDK_VERSION"
    echo "$pins" >"$stamp"
    installed || { echo "sdk-clients: the install left a client missing" >&2; exit 1; }
    echo "sdk-clients: installed $pins"
fi
echo "STATEGRAPH_SDK_CLIENTS=$dir"
