#!/bin/sh
# Starts the front of the Dagster webserver (nginx.conf.template beside this file): renders the config from the FRONT_*
# settings, writes the login file (user and a SHA-512 crypt hash; the password itself is never written), then runs
# nginx in the foreground. docker-compose.yml sets FRONT_USER, FRONT_PASSWORD and FRONT_PUBLIC_ORIGIN from .env;
# tests/deploy/test_front.py runs this same script with a loopback upstream.
#   FRONT_PUBLIC_ORIGIN  the address users open, scheme://host[:port] (default http://127.0.0.1:3000); browsers send
#                        it as Origin, and its host[:port] part is the only Host accepted
#   FRONT_UPSTREAM       the webserver, host:port (default webserver:3000)
#   FRONT_LISTEN         where nginx listens (default 3000); FRONT_HEALTH_LISTEN the healthcheck's (127.0.0.1:8081)
#   FRONT_RESOLVER       DNS server for the upstream's name (default 127.0.0.11, Docker's)
#   FRONT_RUN_DIR        writable folder for the rendered config, login file, pid and temp files (default /run/front)
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
template="$here/nginx.conf.template"
run_dir="${FRONT_RUN_DIR:-/run/front}"
origin="${FRONT_PUBLIC_ORIGIN:-http://127.0.0.1:3000}"
upstream="${FRONT_UPSTREAM:-webserver:3000}"
listen="${FRONT_LISTEN:-3000}"
health_listen="${FRONT_HEALTH_LISTEN:-127.0.0.1:8081}"
resolver="${FRONT_RESOLVER:-127.0.0.11}"

fail() {
    echo "front: $*" >&2
    exit 64
}

[ -n "${FRONT_USER:-}" ] || fail "FRONT_USER is empty: set the UI login (FRONT_USER, FRONT_PASSWORD) in .env"
[ -n "${FRONT_PASSWORD:-}" ] || fail "FRONT_PASSWORD is empty: set the UI login (FRONT_USER, FRONT_PASSWORD) in .env"
case "$FRONT_USER" in
    *:* | *[[:space:]]*) fail "FRONT_USER must not contain ':' or white space" ;;
esac
# What a browser sends as Origin: scheme, host and a port only when it is not the scheme's default; no path.
printf '%s' "$origin" | grep -Eq '^https?://[a-z0-9.-]+(:[0-9]+)?$' \
    || fail "FRONT_PUBLIC_ORIGIN must be scheme://host[:port] in lower case, no path or slash: '$origin'"
public_host="${origin#*://}"
for value in "$upstream" "$listen" "$health_listen" "$resolver" "$run_dir"; do
    printf '%s' "$value" | grep -Eq '^[A-Za-z0-9_./:-]+$' || fail "unexpected character in setting '$value'"
done

umask 077
mkdir -p "$run_dir"
hash="$(printf '%s\n' "$FRONT_PASSWORD" | openssl passwd -6 -stdin)"
printf '%s:%s\n' "$FRONT_USER" "$hash" >"$run_dir/htpasswd"
sed -e "s|@RUN_DIR@|$run_dir|g" \
    -e "s|@PUBLIC_HOST@|$public_host|g" \
    -e "s|@PUBLIC_ORIGIN@|$origin|g" \
    -e "s|@UPSTREAM@|$upstream|g" \
    -e "s|@LISTEN@|$listen|g" \
    -e "s|@HEALTH_LISTEN@|$health_listen|g" \
    -e "s|@RESOLVER@|$resolver|g" \
    "$template" >"$run_dir/nginx.conf"
if grep -q '@[A-Z_]*@' "$run_dir/nginx.conf"; then
    fail "a field of $template was left unrendered"
fi
# The access log goes to this process's stdout through a FIFO and `cat`, which keeps the stdout it inherits: nginx
# would reopen /dev/stdout by name, which a non-root user may not do with the pipe the container engine created as root.
rm -f "$run_dir/access.log"
mkfifo "$run_dir/access.log"
cat "$run_dir/access.log" &
echo "front: serving $origin (Host $public_host) for $upstream, login '$FRONT_USER'" >&2
exec nginx -p "$run_dir" -e stderr -c "$run_dir/nginx.conf"
