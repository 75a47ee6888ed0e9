"""Network namespaces joined by veth links to a bridge: create, tear down, sweep.

Every namespace this module makes is named ``acsc-<pid>-<start>-<host>``, where
``<pid>`` and ``<start>`` (the kernel's start time of that process, in clock
ticks) identify the bench process that owns it. The bridge lives in a namespace
of its own (``...-br``), so nothing is added to the root namespace: deleting the
namespaces removes every link with them.

Teardown runs from ``finally``, from SIGTERM/SIGHUP handlers (turned into
:class:`Interrupted`, so ``finally`` blocks run) and from ``atexit``; a
process killed outright leaves namespaces behind, and the next bench run's
:func:`sweep_stale` removes those whose owner is gone, after stopping the
processes inside them by PID.
"""

from __future__ import annotations

import atexit
import dataclasses
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

PREFIX = "acsc"
#: Namespace names of this module: owner pid, owner start time, host name.
NAME_RE = re.compile(rf"^{PREFIX}-(\d+)-(\d+)-([a-z0-9]+)$")
BRIDGE_HOST = "br"
#: Seconds a stopped process gets between SIGTERM and SIGKILL.
TERM_GRACE_S = 5.0
#: Every ``ip`` call is bounded, so a wedged netlink never hangs the bench.
IP_TIMEOUT_S = 20.0


class NetnsError(RuntimeError):
    """An ``ip`` command failed."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP reached the bench: unwinds like KeyboardInterrupt."""


def ip(*args: str, check: bool = True, input: str | None = None) -> str:
    """Run ``ip ARGS`` (bounded in time); returns stdout."""
    exe = shutil.which("ip") or "/usr/sbin/ip"
    proc = subprocess.run([exe, *args], capture_output=True, text=True,
                          timeout=IP_TIMEOUT_S, input=input)
    if check and proc.returncode:
        raise NetnsError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks (``/proc/PID/stat`` field 22)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.name != "posix" or not os.path.isdir("/proc"):
        return "not Linux"
    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    if not (shutil.which("ip") or os.path.exists("/usr/sbin/ip")):
        return "no `ip` command (iproute2)"
    name = f"{PREFIX}-{os.getpid()}-{start_ticks(os.getpid())}-probe"
    try:
        ip("netns", "add", name)
    except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns add` failed: {exc}"
    try:
        ip("-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
    except (NetnsError, subprocess.TimeoutExpired) as exc:
        return f"veth links cannot be made: {exc}"
    finally:
        ip("netns", "del", name, check=False)
    return None


def list_namespaces() -> list[str]:
    """Names of every network namespace ``ip netns`` knows."""
    out = ip("netns", "list", check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _stop_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + TERM_GRACE_S
    for pid in pids:
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def delete_namespace(name: str) -> None:
    """Stop the processes inside ``name`` (by PID), then delete it."""
    if not NAME_RE.match(name):  # never touch a namespace that is not ours
        raise ValueError(f"{name!r} is not a namespace of this bench")
    pids = [int(p) for p in ip("netns", "pids", name, check=False).split()
            if p.strip().isdigit() and int(p) != os.getpid()]
    if pids:
        _stop_pids(pids)
    ip("netns", "del", name, check=False)


def owner_alive(pid: int, ticks: int) -> bool:
    """Whether the process that named a namespace still runs."""
    return start_ticks(pid) == ticks


def sweep_stale() -> list[str]:
    """Delete this bench's namespaces whose owning process is gone."""
    removed = []
    for name in list_namespaces():
        m = NAME_RE.match(name)
        if m and not owner_alive(int(m.group(1)), int(m.group(2))):
            delete_namespace(name)
            removed.append(name)
    return removed


@dataclasses.dataclass(frozen=True)
class Host:
    """One namespace: its name, its address on the bridge and, optionally, a
    second address on a network the scheduler is not on."""

    host: str
    netns: str | None
    address: str
    second: str | None = None

    def exec_prefix(self) -> list[str]:
        """The argv prefix that runs a command inside this host's namespace."""
        if self.netns is None:
            return []
        exe = shutil.which("ip") or "/usr/sbin/ip"
        return [exe, "netns", "exec", self.netns]


#: The bridged network (one /24, so up to 250 hosts) and the second network of a
#: multi-homed host. Both exist only inside this bench's namespaces.
SUBNET = ipaddress.ip_network("10.218.0.0/24")
SECOND_SUBNET = ipaddress.ip_network("10.219.0.0/24")


class Network:
    """A bridge namespace and one namespace per host, each with one veth link.

    ``multihomed`` names hosts that also get a second link, to a second bridge
    on which no other host is, carrying their default route: as a host whose
    public interface is not the cluster's network.
    """

    def __init__(self, hosts: list[str], multihomed: tuple[str, ...] = ()) -> None:
        me = os.getpid()
        self.base = f"{PREFIX}-{me}-{start_ticks(me)}"
        self.names = list(hosts)
        self.multihomed = tuple(multihomed)
        self.hosts: dict[str, Host] = {}
        self._made: list[str] = []
        self._closed = False

    def _ns(self, host: str) -> str:
        return f"{self.base}-{host}"

    def create(self) -> dict[str, Host]:
        """Make every namespace and link; on failure, remove what was made."""
        try:
            self._create()
        except BaseException:
            self.teardown()
            raise
        return self.hosts

    def _add_ns(self, host: str) -> str:
        ns = self._ns(host)
        ip("netns", "add", ns)
        self._made.append(ns)
        ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def _create(self) -> None:
        br = self._add_ns(BRIDGE_HOST)
        ip("-n", br, "link", "add", "br0", "type", "bridge")
        ip("-n", br, "link", "set", "br0", "up")
        if self.multihomed:
            ip("-n", br, "link", "add", "br1", "type", "bridge")
            ip("-n", br, "link", "set", "br1", "up")
        addrs = list(SUBNET.hosts())
        second = list(SECOND_SUBNET.hosts())
        for i, host in enumerate(self.names):
            ns = self._add_ns(host)
            addr = str(addrs[i])
            self._link(br, "br0", ns, f"v{i}", "eth0", addr, SUBNET.prefixlen)
            two = None
            if host in self.multihomed:
                two = str(second[i])
                self._link(br, "br1", ns, f"x{i}", "eth1", two, SECOND_SUBNET.prefixlen)
                # the default route, which distributed's get_ip() follows, leaves
                # through the other link; the other hosts have no route to it at all
                ip("-n", ns, "route", "add", "default", "dev", "eth1")
            self.hosts[host] = Host(host, ns, addr, two)

    @staticmethod
    def _link(br: str, bridge: str, ns: str, outer: str, inner: str, addr: str,
              plen: int) -> None:
        ip("-n", br, "link", "add", outer, "type", "veth", "peer", "name", inner,
           "netns", ns)
        ip("-n", br, "link", "set", outer, "master", bridge, "up")
        ip("-n", ns, "addr", "add", f"{addr}/{plen}", "dev", inner)
        ip("-n", ns, "link", "set", inner, "up")

    def teardown(self) -> None:
        """Delete every namespace made (processes inside are stopped by PID)."""
        if self._closed:
            return
        self._closed = True
        for ns in reversed(self._made):
            try:
                delete_namespace(ns)
            except Exception:  # keep going: the others must go too
                pass
        self._made = []

    def remaining(self) -> list[str]:
        """This network's namespaces that still exist (empty after teardown)."""
        return [n for n in list_namespaces() if n.startswith(self.base + "-")]


def loopback_hosts(names: list[str]) -> dict[str, Host]:
    """The fallback without namespaces: every host is 127.0.0.1 in the root one."""
    return {h: Host(h, None, "127.0.0.1") for h in names}


@contextmanager
def signals_unwind() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` (main
    thread only), so that ``finally`` blocks tear namespaces down."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> Any:
        raise Interrupted(f"signal {signal.Signals(signum).name}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def network(hosts: list[str], multihomed: tuple[str, ...] = (),
            loopback: bool = False) -> Iterator[tuple[dict[str, Host], str | None]]:
    """The hosts of a run and, if they are on loopback, the reason.

    Namespaces are made unless ``loopback`` or they cannot be; stale ones of
    earlier runs are swept first; every exit path removes them.
    """
    reason = "loopback requested" if loopback else unavailable_reason()
    if reason is not None:
        yield loopback_hosts(hosts), reason
        return
    sweep_stale()
    net = Network(hosts, multihomed)
    atexit.register(net.teardown)
    try:
        with signals_unwind():
            yield net.create(), None
    finally:
        net.teardown()
        atexit.unregister(net.teardown)
