#!/bin/sh
# The dashboard's test (tests/e2e/test_dashboard.py) drives Debian's Chromium in headless mode; the
# test fails without it. Installs it on a fresh Debian machine when run as root; otherwise says how.
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Chromium (Debian's package) for the dashboard test..."
  . "$(dirname "$0")/apt_install.sh"
  apt_install chromium
  exit $?
fi
echo "The dashboard test needs Chromium: run 'sudo apt-get install chromium' (Debian/Ubuntu)." >&2
exit 1
