#!/bin/sh
# Entrypoint of the alertmanager service (docker-compose.yml): Alertmanager's configuration cannot read environment
# variables, so the webhook URL (ALERT_WEBHOOK_URL, a secret) is written to a file on the service's tmpfs, readable by
# its user only, where slack_configs' api_url_file reads it at each notification. Then Alertmanager itself.
set -eu
url_file=/run/alertmanager/webhook_url
umask 077
if [ -z "${ALERT_WEBHOOK_URL:-}" ]; then
    echo "alertmanager: ALERT_WEBHOOK_URL is not set: alerts are evaluated but every delivery fails (set it in .env)" >&2
fi
printf '%s' "${ALERT_WEBHOOK_URL:-}" > "$url_file"
exec /bin/alertmanager "$@"
