#!/usr/bin/env bash
# Builds the chat page `stategraph serve --ui` serves (server/chat/): installs its pinned npm
# packages (React, @langchain/langgraph-sdk's useStream, esbuild) into target/chat-page/ (ignored
# by git) and bundles server/chat/src/chat.jsx with esbuild into target/chat-page/dist/, beside
# the page's index.html and chat.css. No CDN: the page loads only what the server serves.
# Idempotent: the packages are installed again only when server/chat/package.json changes; the
# bundle is rebuilt each run (well under a second). Runs as root, with no standard input.
# Prints the page's directory as STATEGRAPH_CHAT_PAGE=<dir> on its last line.
#
# `stategraph serve --ui` and the page's browser tests find it through that variable, or in
# target/chat-page/dist/ by default.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${STATEGRAPH_CHAT_PAGE_BUILD:-$PWD/target/chat-page}"
src="$PWD/server/chat"
dist="$dir/dist"
stamp="$dir/.installed"

for tool in npm node; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "chat-page: $tool is not installed; the chat page needs it" >&2
        exit 1
    fi
done

want="$(sha256sum "$src/package.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dir/node_modules/.bin/esbuild" ]; then
    echo "chat-page: packages already installed"
else
    mkdir -p "$dir"
    rm -f "$stamp"
    cp "$src/package.json" "$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error </dev/null
    [ -x "$dir/node_modules/.bin/esbuild" ] || { echo "chat-page: esbuild is missing after the install" >&2; exit 1; }
    echo "$want" >"$stamp"
    echo "chat-page: packages installed"
fi

mkdir -p "$dist"
# esbuild resolves the page's imports from the installed packages.
NODE_PATH="$dir/node_modules" "$dir/node_modules/.bin/esbuild" "$src/src/chat.jsx" \
    --bundle --minify --format=iife --target=es2020 --jsx=automatic \
    --define:process.env.NODE_ENV='"production"' \
    --log-level=warning --outfile="$dist/chat.js"
cp "$src/index.html" "$src/chat.css" "$dist/"
echo "chat-page: built $dist/chat.js ($(wc -c <"$dist/chat.js") bytes)"
echo "STATEGRAPH_CHAT_PAGE=$dist"
