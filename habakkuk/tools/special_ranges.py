"""Our own table of special-purpose IP ranges, for the SSRF guard.

The ``ipaddress`` flags (``is_private``, ``is_global``) follow the IANA
registries only as of the Python release that is running: Python 3.11 does not
know 192.88.99.0/24, most of 192.0.0.0/24 or 3fff::/20, so they pass as public.
This table is written from the IANA IPv4 and IPv6 Special-Purpose Address
Registries (plus multicast, the reserved 240.0.0.0/4 and the IPv6 space outside
global unicast) and decides each row for outbound fetches:

* a row that is not globally reachable is blocked;
* anycast service addresses that are answered from the client's own access
  network (PCP, TURN, DNS-SD SRP) are blocked although the registry marks them
  globally reachable: they lead to a gateway next to us, not to a web host;
* ORCHID identifiers are not routable at the IP layer: blocked;
* forms that carry an IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4,
  Teredo) are judged by the IPv4 address they lead to.

:func:`special_range` returns the most specific row containing an address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "SPECIAL_RANGES",
    "SpecialRange",
    "embedded_ipv4",
    "outside_global_unicast",
    "special_range",
]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Embedding = Literal["mapped", "nat64", "6to4", "teredo"]


@dataclass(frozen=True)
class SpecialRange:
    """One row: the range, what it is (a noun phrase), where it is defined, the verdict."""

    network: Network
    kind: str
    source: str
    blocked: bool
    # Set for forms that lead to an IPv4 address: the verdict is that address's.
    embeds: Embedding | None = None


def _row(
    cidr: str, kind: str, source: str, blocked: bool = True, embeds: Embedding | None = None
) -> SpecialRange:
    return SpecialRange(ipaddress.ip_network(cidr), kind, source, blocked, embeds)


_LOCAL_ANYCAST = "of the local access network"

SPECIAL_RANGES: tuple[SpecialRange, ...] = (
    # --- IPv4 special-purpose registry ------------------------------------------------------
    _row("0.0.0.0/8", "an unspecified address of 'this network'", "RFC 791"),
    _row("0.0.0.0/32", "the unspecified address of 'this host'", "RFC 1122"),
    _row("10.0.0.0/8", "a private address", "RFC 1918"),
    _row("100.64.0.0/10", "a carrier-grade NAT address", "RFC 6598"),
    _row("127.0.0.0/8", "a loopback address", "RFC 1122"),
    _row("169.254.0.0/16", "a link-local address", "RFC 3927"),
    _row("172.16.0.0/12", "a private address", "RFC 1918"),
    _row("192.0.0.0/24", "an IETF protocol assignment address", "RFC 6890"),
    _row("192.0.0.0/29", "an IPv4 service continuity (DS-Lite) address", "RFC 7335"),
    _row("192.0.0.8/32", "the IPv4 dummy address", "RFC 7600"),
    _row("192.0.0.9/32", f"the PCP anycast address {_LOCAL_ANYCAST}", "RFC 7723"),
    _row("192.0.0.10/32", f"the TURN anycast address {_LOCAL_ANYCAST}", "RFC 8155"),
    _row("192.0.0.170/32", "a NAT64/DNS64 discovery address", "RFC 8880"),
    _row("192.0.0.171/32", "a NAT64/DNS64 discovery address", "RFC 8880"),
    _row("192.0.2.0/24", "a TEST-NET-1 documentation address", "RFC 5737"),
    _row("192.31.196.0/24", "an AS112 DNS address", "RFC 7535", blocked=False),
    _row("192.52.193.0/24", "an AMT relay anycast address", "RFC 7450", blocked=False),
    _row("192.88.99.0/24", "a deprecated 6to4 relay anycast address", "RFC 7526"),
    _row("192.88.99.2/32", "the 6a44 relay anycast address", "RFC 6751"),
    _row("192.168.0.0/16", "a private address", "RFC 1918"),
    _row("192.175.48.0/24", "an AS112 direct delegation address", "RFC 7534", blocked=False),
    _row("198.18.0.0/15", "a benchmarking address", "RFC 2544"),
    _row("198.51.100.0/24", "a TEST-NET-2 documentation address", "RFC 5737"),
    _row("203.0.113.0/24", "a TEST-NET-3 documentation address", "RFC 5737"),
    _row("224.0.0.0/4", "a multicast address", "RFC 5771"),
    _row("240.0.0.0/4", "a reserved address", "RFC 1112"),
    _row("255.255.255.255/32", "the broadcast address", "RFC 919"),
    # --- IPv6 special-purpose registry and address space -----------------------------------
    _row("::/8", "a reserved address", "RFC 4291"),
    _row("::/96", "a deprecated IPv4-compatible address", "RFC 4291"),
    _row("::/128", "the unspecified address", "RFC 4291"),
    _row("::1/128", "a loopback address", "RFC 4291"),
    _row("::ffff:0:0/96", "an IPv4-mapped", "RFC 4291", embeds="mapped"),
    _row("64:ff9b::/96", "a NAT64", "RFC 6052", embeds="nat64"),
    _row("64:ff9b:1::/48", "a local-use NAT64 address", "RFC 8215"),
    _row("100::/64", "a discard-only address", "RFC 6666"),
    _row("100:0:0:1::/64", "a dummy IPv6 prefix address", "RFC 9780"),
    _row("2001::/23", "an IETF protocol assignment address", "RFC 2928"),
    _row("2001::/32", "a Teredo", "RFC 4380", embeds="teredo"),
    _row("2001:1::1/128", f"the PCP anycast address {_LOCAL_ANYCAST}", "RFC 7723"),
    _row("2001:1::2/128", f"the TURN anycast address {_LOCAL_ANYCAST}", "RFC 8155"),
    _row("2001:1::3/128", f"the DNS-SD SRP anycast address {_LOCAL_ANYCAST}", "RFC 9665"),
    _row("2001:2::/48", "a benchmarking address", "RFC 5180"),
    _row("2001:3::/32", "an AMT relay address", "RFC 7450", blocked=False),
    _row("2001:4:112::/48", "an AS112 DNS address", "RFC 7535", blocked=False),
    _row("2001:10::/28", "a deprecated ORCHID identifier, not routable", "RFC 4843"),
    _row("2001:20::/28", "an ORCHIDv2 identifier, not routable", "RFC 7343"),
    _row("2001:30::/28", "a DRIP entity tag, an identifier, not routable", "RFC 9374"),
    _row("2001:db8::/32", "a documentation address", "RFC 3849"),
    _row("2002::/16", "a 6to4", "RFC 3056", embeds="6to4"),
    _row("2620:4f:8000::/48", "an AS112 direct delegation address", "RFC 7534", blocked=False),
    _row("3fff::/20", "a documentation address", "RFC 9637"),
    _row("5f00::/16", "a segment routing (SRv6) SID", "RFC 9602"),
    _row("fc00::/7", "a unique local private address", "RFC 4193"),
    _row("fe80::/10", "a link-local address", "RFC 4291"),
    _row("fec0::/10", "a deprecated site-local address", "RFC 3879"),
    _row("ff00::/8", "a multicast address", "RFC 4291"),
)

# Most specific first, so the first containing row is the one that applies.
_BY_SPECIFICITY = sorted(SPECIAL_RANGES, key=lambda r: -r.network.prefixlen)
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def special_range(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> SpecialRange | None:
    """The most specific special-purpose row that contains ``ip``, or None."""
    for row in _BY_SPECIFICITY:
        if row.network.version == ip.version and ip in row.network:
            return row
    return None


def embedded_ipv4(row: SpecialRange, ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an embedding form of ``ip`` leads to (Teredo: server and client)."""
    if row.embeds in ("mapped", "nat64"):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    if row.embeds == "6to4":
        return [ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)]
    if row.embeds == "teredo":
        # 2001:0:<server v4>:<flags>:<port>:<client v4 with every bit flipped>
        server = ipaddress.IPv4Address((int(ip) >> 64) & 0xFFFFFFFF)
        client = ipaddress.IPv4Address(~int(ip) & 0xFFFFFFFF)
        return [server, client]
    return []


def outside_global_unicast(ip: ipaddress.IPv6Address) -> bool:
    """Whether an IPv6 address lies outside 2000::/3, the only space assigned for global use."""
    return ip not in _GLOBAL_UNICAST
