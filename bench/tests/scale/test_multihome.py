"""The multi-homed worker check: which address a worker listening on every
interface advertises, when its default route is not the scheduler's network."""

from __future__ import annotations

from asynciocomm_bench.scale import multihome


def test_advertised_interfaces(namespaces: None) -> None:
    out = multihome.check(cases=("tcp (stock)", "tcp (asynciocomm takeover)", "asyncio"),
                          reach=False)
    by = {c["case"]: c for c in out["cases"]}
    assert all("error" not in c for c in out["cases"]), out
    # distributed gives tcp's listener the scheduler-facing address (default_host),
    # under the takeover too, whose listener is asynciocomm's
    for case in ("tcp (stock)", "tcp (asynciocomm takeover)"):
        assert by[case]["interface"].startswith("eth0"), by[case]
    assert by["tcp (asynciocomm takeover)"]["listener"] == \
        "asynciocomm.listener.AsyncioListener"
    assert by["tcp (stock)"]["listener"] == "distributed.comm.tcp.TCPListener"
    # ... but not asyncio's: it advertises get_ip(), the default route's address
    # (the limit in the README; patches/0002 fixes it upstream)
    assert by["asyncio"]["interface"].startswith("eth1"), by["asyncio"]
