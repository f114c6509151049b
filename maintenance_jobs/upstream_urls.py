"""Where a doc-sync upstream may point: public https hosts by name, checked when a task is written and again when
the run resolves the name (a name that resolves inward is refused, and git is pinned to the addresses checked).

A task's upstream URL is input from whoever holds an API key or can reach the webserver: without these rules it could
aim git at the homelab's own services (Postgres, the Docker API, a cloud metadata endpoint) and read their answers
back from the run's error text.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

HTTPS_PORT = 443
# Names that lead inward by convention (RFC 6761/6762/8375, cloud metadata names under .internal).
_INWARD_SUFFIXES = ("localhost", "local", "internal", "lan", "home.arpa", "localdomain", "intranet")
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_TOP_LABEL = re.compile(r"([a-z][a-z0-9-]{0,61}[a-z0-9]|xn--[a-z0-9-]{1,59})")
# Prefixes whose IPv6 addresses carry an IPv4 address that the network may route to (NAT64, 6to4).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")


class AddressRefused(ValueError):
    """An upstream URL or the address it resolves to is not a public https host."""


def check_host_name(host: str) -> str:
    """`host` (lowercase) when it is a public DNS name; AddressRefused for IP literals, numeric forms such as
    `0x7f000001` or `127.1`, single labels (`postgres`, a compose service) and inward names (`*.internal`)."""
    if not host:
        raise AddressRefused("must name a host")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        raise AddressRefused("must be a host name, not an IP address")
    if not host.isascii():
        raise AddressRefused("must be an ASCII host name (use the xn-- form of an international name)")
    name = host.lower().rstrip(".")
    labels = name.split(".")
    if len(name) > 253 or len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        raise AddressRefused(f"{host!r} is not a fully qualified host name")
    if not _TOP_LABEL.fullmatch(labels[-1]):
        # `127.1`, `0x7f.1`, `1.0x7f`: numeric forms that resolvers read as an address.
        raise AddressRefused(f"{host!r} is a numeric host form, not a host name")
    if any(name == suffix or name.endswith(f".{suffix}") for suffix in _INWARD_SUFFIXES):
        raise AddressRefused(f"{host!r} is a local or internal name")
    return name


def check_upstream_url(value: str, *, allowed_schemes: Iterable[str], allowed_hosts: frozenset[str]) -> str:
    """The write-time rules of an upstream URL: scheme, no credentials, a public host name, the scheme's own port,
    a repository path and nothing after it. `file` (tests only) has no host."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise AddressRefused("must not contain whitespace or control characters")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise AddressRefused("is not a valid URL (bad host or port)") from None
    scheme = parts.scheme.lower()
    if scheme not in set(allowed_schemes) or not value.lower().startswith(f"{scheme}://"):
        raise AddressRefused("must be an https:// URL")
    if scheme == "file":  # FOR TESTS ONLY (MAINTENANCE_DOC_SYNC_TEST_SCHEMES): a local path, no host
        return value
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise AddressRefused("must not contain credentials (user:password@): upstreams are read anonymously")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise AddressRefused("must not have a query or fragment")
    if not parts.path.strip("/"):
        raise AddressRefused("must name a repository (a path after the host)")
    host = check_host_name(parts.hostname or "")
    if scheme == "https" and port not in (None, HTTPS_PORT):
        raise AddressRefused(f"port {port} is not allowed (https upstreams use {HTTPS_PORT})")
    if allowed_hosts and host not in allowed_hosts:
        raise AddressRefused(f"host {host!r} is not in the allowed hosts (MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS)")
    return value


def is_public_address(address: str) -> bool:
    """True for a globally routable unicast address; False for loopback, private, link-local (metadata), unique-local,
    shared, multicast, unspecified, reserved, and IPv6 forms that embed such an IPv4 address."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public_address(str(embedded))
        if ip in _SIX_TO_FOUR:
            return False
    return ip.is_global and not ip.is_multicast and not ip.is_reserved and not ip.is_unspecified


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (TCP), as the run's resolver answers now."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({info[4][0] for info in infos})


# The run-time resolver; tests replace it to make a public name resolve inward.
resolve: Callable[[str, int], list[str]] = system_resolver


@dataclass(frozen=True)
class PinnedHost:
    """A host checked at run time and the addresses git must connect to (curl's `--resolve`)."""

    host: str
    port: int
    addresses: tuple[str, ...]

    @property
    def curl_resolve(self) -> str:
        shown = ",".join(f"[{a}]" if ":" in a else a for a in self.addresses)
        return f"{self.host}:{self.port}:{shown}"


def pin_public_host(url: str) -> PinnedHost | None:
    """Resolve the URL's host now and refuse it unless every address is public; None for host-less (test) URLs."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (HTTPS_PORT if parts.scheme.lower() == "https" else 80)
    try:
        addresses = resolve(parts.hostname, port)
    except (OSError, UnicodeError):
        raise AddressRefused(f"upstream host {parts.hostname!r} could not be resolved") from None
    if not addresses:
        raise AddressRefused(f"upstream host {parts.hostname!r} could not be resolved")
    if not all(is_public_address(address) for address in addresses):
        raise AddressRefused(f"upstream host {parts.hostname!r} resolves to a non-public address")
    return PinnedHost(parts.hostname, port, tuple(addresses))
