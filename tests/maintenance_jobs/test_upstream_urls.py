"""Where a doc-sync upstream may point: the write-time URL rules and the run-time address rules, probed as an
attacker would (every form below was accepted before these rules)."""

from __future__ import annotations

import pytest

from maintenance_jobs import upstream_urls
from maintenance_jobs.upstream_urls import (
    AddressRefused,
    check_host_name,
    check_upstream_url,
    is_public_address,
    pin_public_host,
)

pytestmark = pytest.mark.unit


def check(url: str, hosts: frozenset[str] = frozenset()) -> str:
    return check_upstream_url(url, allowed_schemes={"https"}, allowed_hosts=hosts)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/fastapi/fastapi.git",
        "https://github.com/fastapi/fastapi",
        "https://GitHub.com/org/repo.git",
        "https://github.com:443/org/repo.git",
        "https://gitlab.example.co.nz/group/sub/repo.git",
        "https://xn--bcher-kva.example/repo.git",
    ],
)
def test_public_https_hosts_by_name_are_accepted(url: str) -> None:
    assert check(url) == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        # Loopback, private, link-local (metadata), unique-local, multicast, unspecified: as IP literals.
        ("https://127.0.0.1:5432/x", "not an IP address"),
        ("https://127.0.0.1/x", "not an IP address"),
        ("https://[::1]/x", "not an IP address"),
        ("https://[::ffff:127.0.0.1]/x", "not an IP address"),
        ("https://10.0.0.5/x", "not an IP address"),
        ("https://192.168.1.10/x", "not an IP address"),
        ("https://172.16.0.1/x", "not an IP address"),
        ("https://169.254.169.254/latest/meta-data", "not an IP address"),
        ("https://[fd00::1]/x", "not an IP address"),
        ("https://[fe80::1]/x", "not an IP address"),
        ("https://224.0.0.1/x", "not an IP address"),
        ("https://0.0.0.0/x", "not an IP address"),
        ("https://[::]/x", "not an IP address"),
        ("https://8.8.8.8/x", "not an IP address"),  # public, but upstreams are named
        # Numeric forms that resolvers read as addresses.
        ("https://0x7f000001/x", "fully qualified"),
        ("https://2130706433/x", "fully qualified"),
        ("https://017700000001/x", "fully qualified"),
        ("https://127.1/x", "numeric host form"),
        ("https://0x7f.1/x", "numeric host form"),
        ("https://0177.0.0.1/x", "numeric host form"),
        ("https://1.0x7f/x", "numeric host form"),
        # Inward names: compose services (single labels), localhost, internal and local zones.
        ("https://postgres/x", "fully qualified"),
        ("https://postgres:5432/x", "fully qualified"),
        ("https://localhost/x", "fully qualified"),
        ("https://db.localhost/x", "local or internal"),
        ("https://metadata.google.internal/computeMetadata/v1", "local or internal"),
        ("https://nas.local/x", "local or internal"),
        ("https://router.lan/x", "local or internal"),
        ("https://printer.home.arpa/x", "local or internal"),
        # Ports: invalid, or not https's own.
        ("https://github.com:99999/x", "not a valid URL"),
        ("https://github.com:-1/x", "not a valid URL"),
        ("https://github.com:5432/x", "port 5432 is not allowed"),
        ("https://github.com:80/x", "port 80 is not allowed"),
        ("https://github.com:0/x", "port 0 is not allowed"),
        # Credentials belong in settings, never in a task row (readable through GraphQL's runConfigYaml).
        ("https://user:password@github.com/x", "credentials"),
        ("https://token@github.com/x", "credentials"),
        ("https://:pw@github.com/x", "credentials"),
        ("https://github.com@evil.example/x", "credentials"),
        # Other schemes and shapes.
        ("http://github.com/x", "https://"),
        ("file:///etc", "https://"),
        ("ssh://git@github.com/x", "https://"),
        ("git@github.com:org/x.git", "https://"),
        ("ext::sh -c touch% /tmp/pwned", "whitespace"),
        ("https::/github.com/x", "https://"),
        ("https://github.com", "repository"),
        ("https://github.com/x?ref=1", "query"),
        ("https://github.com/x#frag", "query"),
        ("https://github.com/x\n", "control"),
        ("https://gith\u00fcb.com/x", "ASCII"),
        ("https://-github.com/x", "fully qualified"),
        (f"https://{'a' * 64}.com/x", "fully qualified"),
    ],
)
def test_inward_numeric_credentialed_and_odd_urls_are_refused(url: str, reason: str) -> None:
    with pytest.raises(AddressRefused, match=reason):
        check(url)


def test_the_allowed_hosts_setting_narrows_further() -> None:
    hosts = frozenset({"github.com"})
    assert check("https://github.com/a/b", hosts)
    with pytest.raises(AddressRefused, match="not in the allowed hosts"):
        check("https://gitlab.com/a/b", hosts)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.31.255.255", False),
        ("192.168.0.1", False),
        ("100.64.0.1", False),  # shared (carrier-grade NAT)
        ("169.254.169.254", False),  # link-local: cloud metadata
        ("0.0.0.0", False),
        ("224.0.0.251", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fd12:3456::1", False),
        ("fe80::1%eth0", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped
        ("::ffff:93.184.216.34", True),
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("2001:db8::1", False),  # documentation
    ],
)
def test_public_addresses(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_pin_refuses_a_name_with_any_inward_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"ok.example.org": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
               "mixed.example.org": ["93.184.216.34", "10.0.0.1"]}
    monkeypatch.setattr(upstream_urls, "resolve", lambda host, port: answers[host])
    pinned = pin_public_host("https://ok.example.org/a/b.git")
    assert pinned.curl_resolve == "ok.example.org:443:93.184.216.34,[2606:2800:220:1:248:1893:25c8:1946]"
    with pytest.raises(AddressRefused, match="non-public"):
        pin_public_host("https://mixed.example.org/a/b.git")

    def unknown(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    monkeypatch.setattr(upstream_urls, "resolve", unknown)
    with pytest.raises(AddressRefused, match="could not be resolved"):
        pin_public_host("https://gone.example.org/a/b.git")
    assert pin_public_host("file:///srv/repo.git") is None


@pytest.mark.parametrize("host", ["github.com", "docs.python.org", "a-b.c-d.io"])
def test_host_names(host: str) -> None:
    assert check_host_name(host) == host


# --- What a refused writer reads: each refusal's whole message (the control API's 422 shows it) --------------------

@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://github.com/x y", "must not contain whitespace or control characters"),
        ("https://github.com/x\x01y", "must not contain whitespace or control characters"),
        ("https://github.com/x\x7fy", "must not contain whitespace or control characters"),  # DEL
        ("https://github.com:99999/x", "is not a valid URL (bad host or port)"),
        ("http://github.com/x", "must be an https:// URL"),
        ("https://token@github.com/x", "must not contain credentials (user:password@): upstreams are read anonymously"),
        ("https://@github.com/x", "must not contain credentials (user:password@): upstreams are read anonymously"),
        ("https://github.com/x?", "must not have a query or fragment"),  # an empty query is still one
        ("https://github.com/x#", "must not have a query or fragment"),
        ("https://github.com/x?ref=1", "must not have a query or fragment"),
        ("https://github.com/", "must name a repository (a path after the host)"),
        ("https://github.com//", "must name a repository (a path after the host)"),
        ("https:///x", "must name a host"),
        ("https://10.0.0.5/x", "must be a host name, not an IP address"),
        ("https://gith\u00fcb.com/x", "must be an ASCII host name (use the xn-- form of an international name)"),
        ("https://postgres/x", "'postgres' is not a fully qualified host name"),
        ("https://127.1/x", "'127.1' is a numeric host form, not a host name"),
        ("https://nas.local/x", "'nas.local' is a local or internal name"),
        ("https://github.com:8443/x", "port 8443 is not allowed (https upstreams use 443)"),
    ],
)
def test_each_refusal_says_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(AddressRefused) as refused:
        check(url)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com./org/repo.git",  # a fully qualified name with its root dot
        "https://git.1und1.de/org/repo.git",  # a label may start with a digit; only the top label may not
        "https://github.com/X",  # a one-letter repository
    ],
)
def test_more_public_forms_are_accepted(url: str) -> None:
    assert check(url) == url


@pytest.mark.parametrize(("host", "name"), [("GitHub.com.", "github.com"), ("git.1und1.de", "git.1und1.de")])
def test_a_host_name_is_read_lowercase_without_its_root_dot(host: str, name: str) -> None:
    assert check_host_name(host) == name


def test_a_host_name_may_be_253_characters_long_and_no_longer() -> None:
    longest = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(longest) == 253 and check_host_name(longest) == longest
    with pytest.raises(AddressRefused, match="not a fully qualified host name"):
        check_host_name(longest + "d")


def test_an_empty_host_name_is_refused() -> None:
    with pytest.raises(AddressRefused) as refused:
        check_host_name("")
    assert str(refused.value) == "must name a host"


def test_file_urls_pass_as_they_are_where_tests_allow_them() -> None:
    assert check_upstream_url("file:///srv/docs.git", allowed_schemes={"https", "file"},
                              allowed_hosts=frozenset()) == "file:///srv/docs.git"


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8: routed to a public address
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("fe80::1%", False),  # whatever follows the % is not read
        ("2606:2800:220:1:248:1893:25c8:1946%eth0", True),
        ("2606:2800:220:1:248:1893:25c8:1946%eth0%x", True),  # from the first %
        ("2002:5db8:d822::a00:1", True),  # 6to4 of 93.184.216.34, read by the address it embeds
        # Only NAT64 addresses are read by their last 32 bits: a unique-local address ending in a public IPv4 is
        # not public, a public one ending in a private IPv4 is.
        ("fd00::5db8:d822", False),
        ("2606:4700::a00:1", True),
    ],
)
def test_embedded_and_scoped_addresses(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_pin_resolves_the_schemes_port_and_says_which_host_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return [] if host == "empty.example.org" else ["93.184.216.34"]

    monkeypatch.setattr(upstream_urls, "resolve", resolver)
    assert pin_public_host("http://plain.example.org/r").curl_resolve == "plain.example.org:80:93.184.216.34"
    assert pin_public_host("https://ok.example.org:8443/r").port == 8443
    assert pin_public_host("https://ok.example.org/r").port == 443
    assert asked == [("plain.example.org", 80), ("ok.example.org", 8443), ("ok.example.org", 443)]
    with pytest.raises(AddressRefused) as refused:
        pin_public_host("https://empty.example.org/r")
    assert str(refused.value) == "upstream host 'empty.example.org' could not be resolved"
