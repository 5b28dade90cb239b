"""How a receiver checks a Baton webhook call (docs/webhooks.md shows this code).

verify(key, headers, raw_body, seen) returns "" for a call signed with `key` within the
replay window whose delivery id is new (and remembers the id), else why it is refused.
`headers` are the call's headers by lowercase name; `raw_body` the bytes as received.
"""
import hashlib
import hmac
import time

WINDOW = 300  # seconds: older (or later) calls are refused


def verify(key: bytes, headers: dict, raw_body: bytes, seen: set, now: float = None) -> str:
    delivery = headers.get("x-baton-delivery", "")
    fields = dict(p.split("=", 1) for p in headers.get("x-baton-signature", "").split(",") if "=" in p)
    t, v1 = fields.get("t", ""), fields.get("v1", "")
    if not delivery or not t.isdigit() or not v1:
        return "unsigned"
    signed = t.encode() + b"." + delivery.encode() + b"." + raw_body
    expected = hmac.new(key, signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, v1):
        return "bad signature"
    if abs((time.time() if now is None else now) - int(t)) > WINDOW:
        return "outside the replay window"
    if delivery in seen:
        return "already seen"  # a retry of a delivered call, or a replay: answer 2xx, do nothing
    seen.add(delivery)
    return ""
