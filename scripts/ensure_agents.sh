#!/bin/sh
# The coding-agent tests (tests/e2e/test_coding_agents.py) run the real clients our users run, at the
# versions they are pinned to here: Claude Code, Codex CLI and the Gemini CLI, from npm. Each is installed once into
# its own folder of a cache (TOLLGATE_AGENTS_DIR, default ~/.cache/tollgate/agents; tests/support/agents.py
# looks there too) and reused while it answers --version with its version. Node and npm come from
# Debian's packages when they are missing (as root); the tests fail, not skip, when an agent cannot
# be installed, so this exits non-zero then and `make test` stops here.
set -u
DIR="${TOLLGATE_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/agents}"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing Node.js and npm (Debian's packages) for the coding-agent tests..."
    . "$(dirname "$0")/apt_install.sh"
    if ! apt_install nodejs npm; then
      echo "Could not install Node.js and npm with apt-get; the coding-agent tests need them." >&2
      exit 1
    fi
  else
    echo "The coding-agent tests need Node.js and npm: run 'sudo apt-get install nodejs npm' (Debian/Ubuntu)." >&2
    exit 1
  fi
fi

# installed PREFIX VERSION COMMAND: the command is there and says it is that version.
installed() {
  "$1/node_modules/.bin/$3" --version 2>/dev/null | grep -q -w -F "$2"
}

# install_agent NAME PACKAGE VERSION COMMAND
install_agent() {
  prefix="$DIR/$1-$3"
  installed "$prefix" "$3" "$4" && return 0
  echo "Installing $2@$3 into $prefix for the coding-agent tests..."
  # Anew: npm would keep a broken install of the same version (a native binary missing, say) as it is.
  rm -rf "$prefix"
  if mkdir -p "$prefix" &&
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$2@$3" >/dev/null &&
    installed "$prefix" "$3" "$4"; then
    return 0
  fi
  echo "Could not install $2@$3 into $prefix (is the npm registry reachable?); the coding-agent tests need it." >&2
  exit 1
}

install_agent claude-code @anthropic-ai/claude-code 2.1.330 claude
install_agent codex @openai/codex 0.169.0 codex
install_agent gemini-cli @google/gemini-cli 0.61.0 gemini
