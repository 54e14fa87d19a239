#!/bin/sh
# The coding-agent tests (tests/app/test_coding_agents.py) run the real clients our users run, at the
# versions they are pinned to here: Claude Code and Codex CLI, from npm. Each is installed once into
# its own folder of a cache (TOLLGATE_AGENTS_DIR, default ~/.cache/tollgate/agents) and reused while
# it answers --version with its version. Node and npm come from Debian's packages when they are
# missing (as root); the tests fail, not skip, when an agent cannot be installed.
set -u
DIR="${TOLLGATE_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/agents}"

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing Node.js and npm (Debian's packages) for the coding-agent tests..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null || exit 1
  else
    echo "The coding-agent tests need npm: run 'sudo apt-get install nodejs npm' (Debian/Ubuntu)." >&2
    exit 1
  fi
fi

# install NAME PACKAGE VERSION BINARY
install() {
  prefix="$DIR/$1-$3"
  if "$prefix/node_modules/.bin/$4" --version 2>/dev/null | grep -q -F "$3"; then
    return 0
  fi
  echo "Installing $2@$3 into $prefix for the coding-agent tests..."
  mkdir -p "$prefix" &&
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$2@$3" >/dev/null &&
    "$prefix/node_modules/.bin/$4" --version 2>/dev/null | grep -q -F "$3" && return 0
  echo "Could not install $2@$3 into $prefix (is the npm registry reachable?)." >&2
  exit 1
}

install claude-code @anthropic-ai/claude-code 2.1.330 claude
install codex @openai/codex 0.169.0 codex
