"""tests/http_tls.py: the shared context saves the per-client cost and verifies as httpx's own."""

import ssl
import time

import httpx
import pytest

from tests.http_tls import share_default_tls_context


def test_clients_share_one_verifying_context_and_are_cheap() -> None:
    shared = share_default_tls_context()
    assert share_default_tls_context() is shared
    assert (shared.verify_mode, shared.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert shared.cert_store_stats()["x509_ca"] > 50  # certifi's bundle, loaded once
    with httpx.Client() as one, httpx.Client() as two:
        assert one._transport._pool._ssl_context is two._transport._pool._ssl_context is shared  # noqa: SLF001
    started = time.process_time()
    for _ in range(20):
        httpx.Client().close()
    assert (time.process_time() - started) / 20 < 0.01  # httpx's own: ~0.048 s of CPU per client


@pytest.mark.parametrize("verify", [False, "context"])
def test_any_other_verify_takes_httpx_own_path(verify) -> None:
    shared = share_default_tls_context()
    asked = ssl.create_default_context() if verify == "context" else verify
    with httpx.Client(verify=asked) as client:
        context = client._transport._pool._ssl_context  # noqa: SLF001
    assert context is not shared
    assert context is asked if verify == "context" else context.verify_mode == ssl.CERT_NONE
