"""Drives the Python package against the running service; prints one JSON line of what it saw.

argv: base URL, API key, product ref, the file holding a delivery's body, its SV-Signature, secret.
"""
import json
import sys

from mcp_meter import Meter, MeterApiError, WebhookVerificationError, verify_webhook

base, key, product, body_file, header, secret = sys.argv[1:7]
body = open(body_file, "rb").read()
seen = {"event": verify_webhook(body, header, secret)["type"]}


def reason(run):
    try:
        run()
        return "accepted"
    except WebhookVerificationError as error:
        return error.reason


seen["tampered"] = reason(lambda: verify_webhook(body.replace(b"payment", b"pAyment"), header, secret))
seen["other_secret"] = reason(lambda: verify_webhook(body, header, "whsec_another"))
seen["rotating"] = reason(lambda: verify_webhook(body, header, ["whsec_another", secret]))
seen["stale"] = reason(lambda: verify_webhook(body, header, secret, now=int(header[2:12]) + 301))
seen["missing"] = reason(lambda: verify_webhook(body, None, secret))
seen["malformed"] = reason(lambda: verify_webhook(body, "t=abc,v1=zz", secret))

meter = Meter(key, base)
seen["limits"] = [meter.check_limit("py-user", product)["withinLimits"] for _ in range(3)]
meter.record_event("py-user", 2.5, event_id="py-order-1")
try:
    meter.check_limit("nobody-at-all", product)
    seen["unknown"] = "accepted"
except MeterApiError as error:
    seen["unknown"] = [error.status, error.code]
print(json.dumps(seen))
