#!/bin/sh
# The multi-host chaos suite (python -m scripts.chaos --hosts 3) cuts a host off from the database by
# dropping its packets with iptables inside the host's network namespace. Installs Debian's iptables
# when it is missing and this runs as root; without root the suite cannot make namespaces anyway, and
# runs on one host instead (it says so), so this never fails the build.
command -v iptables >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing iptables (Debian's package) for the multi-host chaos suite..."
  . "$(dirname "$0")/apt_install.sh"
  apt_install iptables || echo "Could not install iptables; the chaos suite will run on one host." >&2
fi
exit 0
