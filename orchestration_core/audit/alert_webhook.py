"""The alert webhook resource (Slack-compatible incoming webhook)."""

from __future__ import annotations

import time

import dagster as dg
import httpx

ALERT_WEBHOOK_ENV = "ALERT_WEBHOOK_URL"


class AlertDeliveryError(RuntimeError):
    pass


class AlertWebhook(dg.ConfigurableResource):
    """POSTs JSON messages to `url`; without a url alerts are disabled and callers skip with a reason."""

    url: str | None = None
    timeout_seconds: float = 10.0
    attempts: int = 3
    retry_delay_seconds: float = 1.0

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def post(self, message: dict) -> None:
        """Deliver one message; retries transport errors and 5xx; raises AlertDeliveryError (never showing the URL)."""
        if not self.url:
            raise AlertDeliveryError(f"alert webhook disabled: {ALERT_WEBHOOK_ENV} is not set")
        problem = ""
        for attempt in range(1, self.attempts + 1):
            try:
                response = httpx.post(self.url, json=message, timeout=self.timeout_seconds)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # the webhook rejected the message; retrying will not help
            if attempt < self.attempts:
                time.sleep(self.retry_delay_seconds * attempt)
        raise AlertDeliveryError(f"alert webhook delivery failed after {attempt} attempt(s): {problem}")
