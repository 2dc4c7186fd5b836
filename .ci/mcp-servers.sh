#!/usr/bin/env bash
# Installs the MCP reference servers the real-server tests use, at pinned versions, into
# target/mcp-servers/ (ignored by git). Idempotent: a second run with the same pins does
# nothing. Runs as root, with no standard input. Prints the directory as
# STATEGRAPH_MCP_SERVERS=<dir> on its last line.
#
# The tests find the servers through that variable, or in target/mcp-servers/ by default.
set -euo pipefail
cd "$(dirname "$0")/.."

EVERYTHING_VERSION="2026.8.31"
FILESYSTEM_VERSION="2026.8.31"
MEMORY_VERSION="2026.8.31"

dir="${STATEGRAPH_MCP_SERVERS:-$PWD/target/mcp-servers}"
pins="everything@$EVERYTHING_VERSION filesystem@$FILESYSTEM_VERSION memory@$MEMORY_VERSION"
stamp="$dir/.installed"

if ! command -v npm >/dev/null 2>&1; then
    echo "mcp-servers: npm is not installed; the real-server MCP tests need it" >&2
    exit 1
fi

installed() {
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ] || return 1
    for bin in mcp-server-everything mcp-server-filesystem mcp-server-memory; do
        [ -x "$dir/node_modules/.bin/$bin" ] || return 1
    done
}

if installed; then
    echo "mcp-servers: already installed ($pins)"
else
    mkdir -p "$dir"
    # A package.json of our own keeps npm from walking up into the workspace.
    printf '{"name":"stategraph-mcp-servers","private":true}\n' >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --no-save --ignore-scripts \
        --loglevel=error </dev/null \
        "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
        "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION" \
        "@modelcontextprotocol/server-memory@$MEMORY_VERSION"
    echo "$pins" >"$stamp"
    installed || { echo "mcp-servers: the install left a server missing" >&2; exit 1; }
    echo "mcp-servers: installed $pins"
fi
echo "STATEGRAPH_MCP_SERVERS=$dir"
