"""One TLS context for every httpx client a test process makes.

httpx builds a verifying TLS context from certifi's bundle for each Client (and each top-level `httpx.get`), even for
the http:// URLs the tests use: ~48 ms of CPU apiece. The tests make thousands of clients, so that was ~8% of the
fast tier's test-process CPU (BENCHMARKS.md "Test suite"). The default context is made once and shared; it verifies
exactly as httpx's own does (from SSL_CERT_FILE or SSL_CERT_DIR when set, as httpx reads them), and any other `verify`
or a client certificate take httpx's own path. The product's processes make few clients (one per TAB resource, one
per alert) and keep httpx's behaviour.
"""

from __future__ import annotations

import os
import ssl

from httpx._transports import default as httpx_transports


def share_default_tls_context() -> ssl.SSLContext:
    """Patch httpx's transports (in this process) to reuse the default context, one per SSL_CERT_FILE/SSL_CERT_DIR
    setting (httpx reads them for each client); returns the one for the current setting. Idempotent."""
    made = httpx_transports.create_ssl_context
    contexts = getattr(made, "contexts", None)
    if contexts is None:
        contexts = {}

        def create_ssl_context(verify=True, cert=None, trust_env=True) -> ssl.SSLContext:
            if verify is not True or cert is not None:
                return made(verify=verify, cert=cert, trust_env=trust_env)
            key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else None
            if key not in contexts:
                contexts[key] = made(verify=True, trust_env=trust_env)
            return contexts[key]

        create_ssl_context.contexts = contexts
        httpx_transports.create_ssl_context = create_ssl_context
    return httpx_transports.create_ssl_context()
