"""The HTTP side of the client: JSON requests to a Seedbed server's /api/v1/ with a bearer token.

``SeedbedClient(url, token).get("/runs", status="queued")`` returns the decoded JSON answer; an HTTP error is
an ``ApiError`` (status and decoded body), a server that cannot be reached is an ``Unreachable``, a redirect to
another host, port or scheme (which would carry the token there) is a ``RedirectRefused``. A launch
(``launch``) carries an ``Idempotency-Key`` and is retried with that key when the connection breaks, so a launch
whose answer was lost is made once. A request the server refuses for the token's rate (429) is sent again after
the seconds its ``Retry-After`` says (the server did nothing with it), at most ``RATE_LIMIT_WAITS`` times and
``MAX_RATE_WAIT_S`` each. Standard library only.
"""
from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

API_PREFIX = "/api/v1"
TIMEOUT_S = 30.0
IDEMPOTENCY_HEADER = "Idempotency-Key"
LAUNCH_ATTEMPTS = 4          # a launch whose connection broke is sent again at most 3 times, with its key
LAUNCH_RETRY_WAIT_S = 1.0    # 1 s, 2 s, 4 s between them
RETRIED_STATUSES = (502, 503, 504)  # a proxy's answer while the server restarts
RATE_LIMIT_WAITS = 3         # a 429 is waited out this many times before it is an error
MAX_RATE_WAIT_S = 60.0       # ... each wait at most this long (a longer Retry-After is an error at once)


class ApiError(Exception):
    """The server answered with an HTTP error: ``status`` and the decoded JSON ``body`` (``{}`` if not JSON)."""

    def __init__(self, status: int, body: dict, url: str, retry_after: str | None = None):
        super().__init__(f"HTTP {status} from {url}")
        self.status, self.body, self.url = status, body, url
        # Retry-After in seconds (RFC 9110 delta-seconds; an HTTP date is not waited for)
        self.retry_after_s = float(retry_after) if retry_after and retry_after.strip().isdigit() else None


class Unreachable(Exception):
    """No HTTP answer at all: connection refused, unknown host, time-out."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"cannot reach {url}: {reason}")
        self.url, self.reason = url, reason


class RedirectRefused(Exception):
    """The server redirected to another origin (host, port or scheme): the token is not sent there."""

    def __init__(self, url: str, location: str):
        super().__init__(f"{url} redirected to {location}")
        self.url, self.location = url, location


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """urllib follows a redirect anywhere with every header of the request, the token's Authorization among
    them: a redirect within the server is followed, one to another host, port or scheme (https to http
    included) is refused before anything is sent there."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != _origin(req.full_url):
            fp.close()
            raise RedirectRefused(req.full_url, newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_opener = urllib.request.build_opener(_SameOriginRedirects)


def server_root(url: str) -> str:
    """The server's address without a trailing slash or API prefix: "http://h:8000/api/v1/" -> "http://h:8000"."""
    root = url.strip().rstrip("/")
    return root[:-len(API_PREFIX)] if root.endswith(API_PREFIX) else root


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return getattr(reason, "strerror", None) or str(reason)


class SeedbedClient:
    """One server and one token; every call is one request."""

    def __init__(self, url: str, token: str, timeout: float = TIMEOUT_S, retry_wait_s: float = LAUNCH_RETRY_WAIT_S):
        self.root, self.token, self.timeout, self.retry_wait_s = server_root(url), token, timeout, retry_wait_s

    def get(self, path: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        return self._send("GET", f"{path}{suffix}", None)

    def post(self, path: str, body: dict | None = None) -> Any:
        return self._send("POST", path, body if body is not None else {})

    def launch(self, path: str, body: dict, key: str | None = None, attempts: int = LAUNCH_ATTEMPTS) -> Any:
        """POST a launch (a run, a sweep, an evaluation) with an ``Idempotency-Key`` (``key``, default a new
        UUID): when no answer comes (the connection is reset or refused, it times out, a proxy answers 502-504, the
        server says the key's first request is still in progress) it is sent again with the same key, at most
        ``attempts`` times in all, so the server makes it once and answers the first launch."""
        key = key or str(uuid.uuid4())
        for attempt in range(1, attempts + 1):
            try:
                return self._send("POST", path, body, headers={IDEMPOTENCY_HEADER: key})
            except (Unreachable, ApiError) as exc:
                in_progress = (isinstance(exc, ApiError) and exc.status == 409
                               and "in progress" in str(exc.body.get("detail", "")))
                retried = isinstance(exc, Unreachable) or exc.status in RETRIED_STATUSES or in_progress
                if not retried or attempt == attempts:
                    raise
                why = exc.reason if isinstance(exc, Unreachable) else f"HTTP {exc.status}"
                wait = self.retry_wait_s * 2 ** (attempt - 1)
                print(f"launch: no answer from {self.root} ({why}); sending it again with the same "
                      f"{IDEMPOTENCY_HEADER} in {wait:g} s ({attempt + 1}/{attempts})", file=sys.stderr)
                time.sleep(wait)
        raise AssertionError("unreachable")

    def post_file(self, path: str, fields: dict, file_field: str, filename: str, content: bytes) -> Any:
        """A multipart/form-data POST: ``fields`` as form values and one file."""
        boundary = f"seedbed-{uuid.uuid4().hex}"
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                 for name, value in fields.items() if value is not None]
        safe_name = os.path.basename(filename).replace('"', "_")
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{safe_name}"'
                     f'\r\nContent-Type: application/octet-stream\r\n\r\n'.encode() + content + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return self._send("POST", path, None, raw=(body, f"multipart/form-data; boundary={boundary}"))

    def _send(self, method: str, path: str, body: dict | None, raw: tuple[bytes, str] | None = None,
              headers: dict[str, str] | None = None) -> Any:
        for wait in range(RATE_LIMIT_WAITS + 1):
            try:
                return self._send_once(method, path, body, raw, headers)
            except ApiError as exc:
                retry_after = exc.retry_after_s if exc.status == 429 else None
                if retry_after is None or retry_after > MAX_RATE_WAIT_S or wait == RATE_LIMIT_WAITS:
                    raise
                print(f"{method} {path}: the server's rate limit for this token; sending it again in "
                      f"{retry_after:g} s ({wait + 1}/{RATE_LIMIT_WAITS})", file=sys.stderr)
                time.sleep(retry_after)
        raise AssertionError("unreachable")

    def _send_once(self, method: str, path: str, body: dict | None, raw: tuple[bytes, str] | None,
                   headers: dict[str, str] | None) -> Any:
        url = f"{self.root}{API_PREFIX}{path}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        content_type = "application/json" if data is not None else None
        if raw is not None:
            data, content_type = raw
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json",
            **({"Content-Type": content_type} if content_type else {}), **(headers or {})})
        try:
            with _opener.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            body = _decode(exc.read())
            raise ApiError(exc.code, body if isinstance(body, dict) else {}, url,
                           retry_after=exc.headers.get("Retry-After")) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:  # refused, unknown host, reset,
            # time-out, an answer cut short
            raise Unreachable(self.root, _reason(exc)) from None
        answer = _decode(raw)
        if answer is None:
            raise ApiError(200, {"detail": f"{url} did not answer with JSON; is {self.root} a Seedbed server?"}, url)
        return answer
