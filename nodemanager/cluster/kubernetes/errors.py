"""What a failed call to the API server looks like, and its own words for it."""

from __future__ import annotations

import json

import urllib3
from kubernetes.client.exceptions import ApiException

NETWORK_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError)


def api_message(exc: BaseException) -> str:
    """The API server's own words for a refusal (its Status message and causes)."""
    if isinstance(exc, ApiException):
        try:
            body = json.loads(exc.body or "{}")
        except (TypeError, ValueError):
            body = {}
        causes = [c.get("message", "") for c in (body.get("details") or {}).get("causes") or [] if c.get("message")]
        text = body.get("message") or exc.reason or f"HTTP {exc.status}"
        return f"{text} ({'; '.join(causes)})" if causes else str(text)
    return f"API server unreachable: {type(exc).__name__}"
