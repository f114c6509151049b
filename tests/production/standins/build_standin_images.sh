#!/usr/bin/env bash
# STAND-INS, NOT THE OFFICIAL IMAGES. Builds local images under the exact names docker-compose.yml and
# deploy/Dockerfile.* use, for machines that reach no image registry (only Debian's packages and PyPI), so the live
# production test runs the unchanged production files:
#   python:3.11-slim-bookworm  <- a Debian 12 minbase rootfs (debootstrap) with Debian's Python 3.11 and pip
#   postgres:16.4-alpine       <- that rootfs plus Debian's postgresql-15 and an entrypoint doing what the official
#                                 image's does for this project (initdb, POSTGRES_* roles, initdb.d scripts once)
#   prom/prometheus:v2.54.1    <- that rootfs plus Debian's prometheus (2.42), laid out like the official image
#   prom/alertmanager:v0.27.0  <- that rootfs plus Debian's prometheus-alertmanager (0.25), likewise
# Each carries the label org.racing-orchestration.standin=true. An image already present under a name (a real one
# pulled from a registry, or a stand-in from an earlier run) is kept, so this is a no-op on a machine that has them.
# Grafana has no Debian package and no stand-in: the live test leaves it out (its files are tested statically).
# The names must be docker-compose.yml's (tests/deploy/test_compose.py checks them).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${STANDIN_CACHE_DIR:-/var/cache/racing-orchestration-standins}"
docker="${DOCKER:-docker}"

have_image() { "$docker" image inspect "$1" >/dev/null 2>&1; }

log() { printf '[standins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if ! have_image python:3.11-slim-bookworm; then
    rootfs="$cache/bookworm-python-rootfs"
    if [ ! -x "$rootfs/usr/bin/python3" ]; then
        log "debootstrap bookworm (minbase + python3) into $rootfs"
        rm -rf "$rootfs.partial"
        mkdir -p "$cache"
        debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
            bookworm "$rootfs.partial" "$mirror" >"$cache/debootstrap.log" 2>&1 \
            || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
        mv "$rootfs.partial" "$rootfs"
    fi
    # The official image's pip installs system-wide and `python`/`pip` are on PATH under /usr/local/bin.
    rm -f "$rootfs/usr/lib/python3.11/EXTERNALLY-MANAGED"
    mkdir -p "$rootfs/usr/local/bin"
    ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python"
    ln -sf /usr/bin/pip3 "$rootfs/usr/local/bin/pip"
    # Builds reach PyPI and Debian through this machine's TLS-inspecting proxy: trust what the host trusts.
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
    # Same package sources as the host, so apt-get inside builds resolves the same versions.
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/debian.sources"
        : > "$rootfs/etc/apt/sources.list"
    fi
    rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb
    log "importing python:3.11-slim-bookworm (stand-in)"
    tar -C "$rootfs" -c . | "$docker" import \
        -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' \
        -c 'LABEL org.racing-orchestration.standin=true' \
        -c 'CMD ["python3"]' \
        - python:3.11-slim-bookworm >/dev/null
fi

if ! have_image postgres:16.4-alpine; then
    log "building postgres:16.4-alpine (stand-in: Debian postgresql-15)"
    DOCKER_BUILDKIT=0 "$docker" build -q -t postgres:16.4-alpine -f "$here/Dockerfile.postgres" "$here" >/dev/null
fi

if ! have_image prom/prometheus:v2.54.1; then
    log "building prom/prometheus:v2.54.1 (stand-in: Debian prometheus)"
    DOCKER_BUILDKIT=0 "$docker" build -q -t prom/prometheus:v2.54.1 -f "$here/Dockerfile.prometheus" "$here" >/dev/null
fi

if ! have_image prom/alertmanager:v0.27.0; then
    log "building prom/alertmanager:v0.27.0 (stand-in: Debian prometheus-alertmanager)"
    DOCKER_BUILDKIT=0 "$docker" build -q -t prom/alertmanager:v0.27.0 -f "$here/Dockerfile.alertmanager" "$here" \
        >/dev/null
fi
log "stand-in images ready"
