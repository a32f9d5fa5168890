"""MCP Meter for Python: verify the service's webhooks, record usage and check limits.

Standard library only. The TypeScript SDK (@mcp-meter/sdk) is the full client; this package
covers what a Python backend needs most: trusting a webhook, and metering its own API calls.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Iterable, Optional, Union

__all__ = ["verify_webhook", "WebhookVerificationError", "Meter", "MeterApiError"]

TOLERANCE_SECONDS = 300


class WebhookVerificationError(Exception):
    """The webhook is not to be trusted: answer 401 and do not process it.

    `reason` is one of missing_header, malformed_header, timestamp_out_of_tolerance,
    no_matching_signature (the same reasons as the TypeScript SDK).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def verify_webhook(
    raw_body: Union[bytes, str],
    header: Optional[str],
    secret: Union[str, Iterable[str]],
    tolerance_seconds: int = TOLERANCE_SECONDS,
    now: Optional[float] = None,
) -> Any:
    """Checks `SV-Signature` over the body's bytes as received and returns the parsed event.

    The signature is HMAC-SHA256 of `<t>.<body>` keyed with the whole `whsec_` secret, written
    `t=<unix seconds>,v1=<hex>` (several v1 entries while a secret rotates). It is compared in
    constant time, and `t` must be within `tolerance_seconds` of now either way. Pass every live
    secret during a rotation. Raises WebhookVerificationError otherwise.
    """
    if not header:
        raise WebhookVerificationError("missing_header", "SV-Signature header missing")
    timestamp: Optional[int] = None
    signatures = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1" and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
            signatures.append(value)
    if timestamp is None or not signatures:
        raise WebhookVerificationError(
            "malformed_header", "SV-Signature must be t=<timestamp>,v1=<hex digest>"
        )
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise WebhookVerificationError(
            "timestamp_out_of_tolerance", "SV-Signature timestamp is outside the tolerance"
        )
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else raw_body
    signed = str(timestamp).encode("ascii") + b"." + body
    secrets = [secret] if isinstance(secret, str) else list(secret)
    for each in secrets:
        expected = hmac.new(each.encode("utf-8"), signed, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(expected, candidate) for candidate in signatures):
            return json.loads(body.decode("utf-8"))
    raise WebhookVerificationError(
        "no_matching_signature", "No SV-Signature entry matches the secret"
    )


class MeterApiError(Exception):
    """An answer outside 2xx: its status, the problem's machine code and the whole problem."""

    def __init__(self, status: int, problem: Any) -> None:
        self.status = status
        self.problem = problem if isinstance(problem, dict) else {"detail": str(problem)}
        self.code = self.problem.get("code", f"http_{status}")
        super().__init__(f"{status} {self.code}: {self.problem.get('detail', '')}")


class Meter:
    """The usage calls of the API with a secret key (sk_test_… sandbox, sk_live_… live)."""

    def __init__(self, api_key: str, base_url: str = "http://127.0.0.1:8080", timeout: float = 10) -> None:
        if not api_key.startswith("sk_"):
            raise ValueError("api_key must be a secret key: sk_test_…, sk_sandbox_… or sk_live_…")
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None, headers: Optional[dict] = None) -> Any:
        """One call; the parsed answer, or MeterApiError for a status outside 2xx."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("authorization", f"Bearer {self.api_key}")
        if data is not None:
            request.add_header("content-type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                text = answer.read().decode("utf-8")
                return json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8")
            try:
                problem = json.loads(text)
            except ValueError:
                problem = text
            raise MeterApiError(error.code, problem) from None

    def record_event(self, customer_ref: str, value: float = 1, event_id: Optional[str] = None, properties: Optional[dict] = None) -> Any:
        """Records one usage event (POST /v1/sdk/meter-events); an `event_id` makes a retry count once."""
        body: dict = {"customerRef": customer_ref, "value": value, "id": event_id or str(uuid.uuid4())}
        if properties is not None:
            body["properties"] = properties
        return self.request("POST", "/v1/sdk/meter-events", body)

    def check_limit(self, customer_ref: str, product_ref: str, consume: bool = True) -> Any:
        """Whether one more call may run under the customer's plan, consuming it by default (POST /v1/sdk/limits)."""
        return self.request(
            "POST",
            "/v1/sdk/limits",
            {"customerRef": customer_ref, "productRef": product_ref, "consume": consume},
        )
