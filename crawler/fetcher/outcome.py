"""From an HTTP answer (or a failure) to the fetch status a segment records (DESIGN 6a)."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

from crawler.statuses import FetchStatus

_REDIRECTS = {301: FetchStatus.REDIRECT_PERM, 308: FetchStatus.REDIRECT_PERM,
              302: FetchStatus.REDIRECT_TEMP, 303: FetchStatus.REDIRECT_TEMP, 307: FetchStatus.REDIRECT_TEMP}


def status_for_http(code: int, has_location: bool) -> FetchStatus:
    if 200 <= code < 300:
        return FetchStatus.SUCCESS
    if code == 304:
        return FetchStatus.NOTMODIFIED
    if code in _REDIRECTS:
        return _REDIRECTS[code] if has_location else FetchStatus.GONE
    if code == 429 or 500 <= code < 600:
        return FetchStatus.RETRY
    if 300 <= code < 500:
        return FetchStatus.GONE
    return FetchStatus.FAILED


def status_for_error(kind: str) -> FetchStatus:
    """Network trouble is worth another try; a refused address or a broken protocol is not.

    ``tls`` retries too: a site may mend or renew its certificate, and ``http.tls.ca_file`` may be set
    before the next round; so does ``proxy`` (the egress proxy down or refusing the tunnel)."""
    if kind in ("blocked_address", "unsupported_scheme"):
        return FetchStatus.FAILED
    return FetchStatus.RETRY


def http_status_class(code: int) -> str:
    return f"{code // 100}xx"


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
