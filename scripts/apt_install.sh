# Sourced by scripts/ensure_chromium.sh and scripts/ensure_agents.sh (as root):
# `apt_install PACKAGE...` updates the package lists and installs the packages quietly, waiting up
# to ten minutes for another apt or dpkg (unattended upgrades, another checkout's install) to let go
# of its lock instead of failing at once, which a fresh clone's first `make test` once did.

APT_LOCK_WAIT=600  # seconds

apt_install() {
  _apt_update_waiting || return 1
  # dpkg's locks: apt-get waits for them itself when told how long (apt >= 1.9).
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$APT_LOCK_WAIT install -y -qq "$@" >/dev/null
}

# apt-get update does not wait for the package lists' lock (apt 2.6 ignores DPkg::Lock::Timeout
# there): try again every 5 s while another apt holds it; any other failure fails at once.
_apt_update_waiting() {
  _errors=$(mktemp) || return 1
  _waited=0
  while ! apt-get -o DPkg::Lock::Timeout=$APT_LOCK_WAIT update -qq 2>"$_errors"; do
    if ! grep -q "Could not get lock" "$_errors" || [ "$_waited" -ge "$APT_LOCK_WAIT" ]; then
      cat "$_errors" >&2
      rm -f "$_errors"
      return 1
    fi
    [ "$_waited" = 0 ] && echo "Waiting for another apt or dpkg to release its lock..." >&2
    sleep 5
    _waited=$((_waited + 5))
  done
  cat "$_errors" >&2  # its warnings, if any
  rm -f "$_errors"
}
