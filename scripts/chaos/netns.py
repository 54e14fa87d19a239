"""The multi-host chaos suite's network: a Linux network namespace per gateway host, one for the
database and Redis, joined by virtual links the run creates and removes itself.

    root namespace: the load generator, the fake upstream, the operator's commands
        bridge  10.R.S.1/24
          ├── veth ── namespace "db":    10.R.S.10 (PostgreSQL), 10.R.S.11 (Redis)
          ├── veth ── namespace "h0":    10.R.S.20 (gateway host 0)
          ├── veth ── namespace "h1":    10.R.S.21
          └── veth ── namespace "h2":    10.R.S.22

Every address is in one private /24 chosen per run (so two runs on one machine do not meet), and no
process started here is given an address outside it or loopback. A fault on a host is a packet
filter on that host's egress (``iptables`` in its namespace): its packets *to* an address dropped —
a partition from PostgreSQL, from Redis, or both, silent as a real one (no reset, no error: the
packets vanish), while its clients, in the root namespace, still reach it and what the database
sends still arrives — or a share of them dropped at random (a lossy link: TCP's retransmissions turn
it into latency spikes too). Only the host's egress is filtered, so each fault is asymmetric, as
real ones are. ``tc netem`` (delay and loss by the kernel's queue) is the usual tool; the kernels
this suite runs on in CI are built without it, so the lossy link is the packet filter's. Needs root
(``CAP_NET_ADMIN``) and ``iptables``; :func:`available` says whether this machine can.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

DB_ADDRESS, REDIS_ADDRESS, FIRST_HOST = 10, 11, 20


def _run(*argv: str, namespace: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``argv`` (``ip …``, ``tc …``), in ``namespace`` if one is given."""
    inside = list(argv) if namespace is None else ["ip", "netns", "exec", namespace, *argv]
    return subprocess.run(inside, capture_output=True, text=True, check=check, timeout=30)


def _ip(*args: str, namespace: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("ip", *args, namespace=namespace, check=check)


def available() -> str | None:
    """None when this machine can build the topology; else why not (not root, no ``ip``, no ``iptables``)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("iptables") is None:
        return "needs ip (iproute2) and iptables"
    probe = f"tgp{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"cannot create a network namespace: {getattr(exc, 'stderr', exc)}"
    try:
        filtered = _run("iptables", "-A", "OUTPUT", "-d", "10.0.0.1", "-j", "DROP", namespace=probe, check=False)
        if filtered.returncode != 0:
            return f"iptables cannot filter in a namespace: {filtered.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Topology:
    """The namespaces and links of one run; :meth:`build` makes them, :meth:`remove` takes them away."""

    hosts: int
    tag: str = field(default_factory=lambda: f"{os.getpid() % 100000}")
    subnet: str = field(default_factory=lambda: f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}")
    built: list[str] = field(default_factory=list)  # namespaces made, for removal

    @property
    def bridge(self) -> str:
        return f"tgb{self.tag}"

    @property
    def gateway_address(self) -> str:
        """The root namespace's address on the bridge: where the fake upstream listens."""
        return f"{self.subnet}.1"

    @property
    def database_address(self) -> str:
        return f"{self.subnet}.{DB_ADDRESS}"

    @property
    def redis_address(self) -> str:
        return f"{self.subnet}.{REDIS_ADDRESS}"

    def host_address(self, host: int) -> str:
        return f"{self.subnet}.{FIRST_HOST + host}"

    def namespace(self, name: str) -> str:
        return f"tg{self.tag}{name}"

    def host_namespace(self, host: int) -> str:
        return self.namespace(f"h{host}")

    @property
    def database_namespace(self) -> str:
        return self.namespace("db")

    def prefix(self, namespace: str) -> list[str]:
        """The argv prefix that runs a command inside ``namespace``."""
        return ["ip", "netns", "exec", namespace]

    def build(self) -> Topology:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        self._attach(self.database_namespace, "d", [self.database_address, self.redis_address])
        for host in range(self.hosts):
            self._attach(self.host_namespace(host), f"h{host}", [self.host_address(host)])
        return self

    def _attach(self, namespace: str, short: str, addresses: list[str]) -> None:
        _ip("netns", "add", namespace)
        self.built.append(namespace)
        outside, inside = f"tg{self.tag}{short}", f"tg{self.tag}{short}i"
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        _ip("link", "set", "lo", "up", namespace=namespace)
        _ip("link", "set", inside, "name", "eth0", namespace=namespace)
        for address in addresses:
            _ip("addr", "add", f"{address}/24", "dev", "eth0", namespace=namespace)
        _ip("link", "set", "eth0", "up", namespace=namespace)

    def remove(self) -> None:
        for namespace in reversed(self.built):
            _ip("netns", "del", namespace, check=False)  # its end of each link goes with it, and the other end
        self.built.clear()
        _ip("link", "del", self.bridge, check=False)

    # -- faults on a host's link ---------------------------------------------------------------------

    def cut(self, host: int, destinations: list[str]) -> None:
        """Drop every packet the host sends to ``destinations``: a partition from them (its clients
        still reach it, and what the destinations send it still arrives)."""
        self.heal(host)
        for destination in destinations:
            _run("iptables", "-A", "OUTPUT", "-d", destination, "-j", "DROP", namespace=self.host_namespace(host))

    def degrade(self, host: int, loss_percent: float) -> None:
        """Drop a share of the packets the host sends to the database and Redis, at random."""
        self.heal(host)
        for destination in (self.database_address, self.redis_address):
            _run(
                "iptables", "-A", "OUTPUT", "-d", destination, "-m", "statistic", "--mode", "random",
                "--probability", f"{loss_percent / 100:.4f}", "-j", "DROP", namespace=self.host_namespace(host),
            )  # fmt: skip

    def heal(self, host: int) -> None:
        _run("iptables", "-F", "OUTPUT", namespace=self.host_namespace(host))
