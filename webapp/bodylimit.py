"""Request bodies bounded at the edge: a WSGI middleware around Django's application (webapp/wsgi.py).

Without it one anonymous request could fill the disk: Django spools a multipart body to a temporary file before
any view (or the CSRF check) decides to refuse it. Here the limit is decided from the headers alone, before a
byte of the body is read:
- a request that carries no session cookie and no ``Authorization`` header gets the small anonymous limit
  (``SEEDBED_MAX_ANON_BODY_MB``, 1 MB); one that carries either gets the upload limit (``SEEDBED_MAX_BODY_MB``,
  the dataset limit plus room for the form's other fields). Whether the session or token is valid is Django's
  business later: a forged cookie only buys the upload limit, which is bounded too;
- a declared ``Content-Length`` above the limit is answered 413 at once, its body never read;
- a chunked body (no ``Content-Length``) is read through a counting wrapper, at most the anonymous limit whoever
  sends it (a real upload declares its length), and answered 413 the moment it passes. One within the limit is
  handed to Django with its length, which otherwise reads a body without one as empty.
"""
from __future__ import annotations

import json
import logging
import tempfile

log = logging.getLogger("seedbed.bodylimit")

READ_BYTES = 64 * 1024


class BodyTooLarge(Exception):
    pass


class CountingInput:
    """``wsgi.input`` read through a counter that raises BodyTooLarge once more than ``limit`` bytes came."""

    def __init__(self, stream, limit: int):
        self.stream, self.limit, self.count = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        room = self.limit - self.count + 1  # one byte past the limit is enough to know
        data = self.stream.read(room if size is None or size < 0 else min(size, room))
        self.count += len(data)
        if self.count > self.limit:
            raise BodyTooLarge(self.count)
        return data


class BodyLimit:
    def __init__(self, app, *, anonymous: int, authenticated: int, session_cookie: str = "sessionid",
                 spool_dir: str | None = None):
        self.app, self.anonymous, self.authenticated = app, anonymous, authenticated
        self.session_cookie, self.spool_dir = session_cookie, spool_dir

    def _signed_in(self, environ) -> bool:
        """Cheap and header-only: an Authorization header, or a non-empty session cookie."""
        if environ.get("HTTP_AUTHORIZATION", "").strip():
            return True
        for part in environ.get("HTTP_COOKIE", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.session_cookie and value.strip():
                return True
        return False

    def __call__(self, environ, start_response):
        signed_in = self._signed_in(environ)
        limit = self.authenticated if signed_in else self.anonymous
        setting = "SEEDBED_MAX_BODY_MB" if signed_in else "SEEDBED_MAX_ANON_BODY_MB"
        declared = environ.get("CONTENT_LENGTH", "").strip()
        if declared:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                return self._answer(environ, start_response, "400 Bad Request", "the Content-Length is not a number")
            if length > limit:
                return self._refuse(environ, start_response, length, limit, setting)
            return self.app(environ, start_response)
        if not environ.get("HTTP_TRANSFER_ENCODING", "").strip():
            return self.app(environ, start_response)  # no body
        # chunked: read it here, counted, into memory (a spooled file past the anonymous limit's size)
        limit = min(limit, self.anonymous)
        counted = CountingInput(environ["wsgi.input"], limit)
        body = tempfile.SpooledTemporaryFile(max_size=self.anonymous + 1, dir=self.spool_dir)
        try:
            while data := counted.read(READ_BYTES):
                body.write(data)
        except BodyTooLarge:
            body.close()
            return self._refuse(environ, start_response, None, limit, "SEEDBED_MAX_ANON_BODY_MB", chunked=True)
        except BaseException:
            body.close()
            raise
        size = body.tell()
        body.seek(0)
        environ = {**environ, "wsgi.input": body, "CONTENT_LENGTH": str(size)}
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        try:
            response = self.app(environ, start_response)
        except BaseException:
            body.close()
            raise
        file_wrapper = environ.get("wsgi.file_wrapper")
        if isinstance(file_wrapper, type) and isinstance(response, file_wrapper):
            return response  # the server sends it its own way; the spooled body goes with the garbage
        return _ClosingResponse(response, body)

    def _refuse(self, environ, start_response, length, limit, setting, chunked=False):
        log.warning("refused a request body to %s %s from %s: %s, limit %s bytes", environ.get("REQUEST_METHOD"),
                    environ.get("PATH_INFO"), environ.get("REMOTE_ADDR"),
                    "chunked, past the limit" if chunked else f"{length} bytes declared", limit)
        if chunked:
            message = (f"a request body without a Content-Length may have at most {limit:,} bytes ({setting}); "
                       "send its length")
        else:
            message = f"{length:,} bytes; a request body may have at most {limit:,} bytes ({setting})"
        return self._answer(environ, start_response, "413 Content Too Large", message)

    @staticmethod
    def _answer(environ, start_response, status, message):
        if environ.get("PATH_INFO", "").startswith("/api/"):  # the API's one error shape
            content, kind = json.dumps({"errors": {"body": message}}).encode(), "application/json"
        else:
            content, kind = (message + "\n").encode(), "text/plain; charset=utf-8"
        # the unread body is not worth reading: the server drains a little of it at most, then closes
        start_response(status, [("Content-Type", kind), ("Content-Length", str(len(content)))])
        return [content]


class _ClosingResponse:
    """The application's response, closing the spooled body with it (the WSGI server calls close())."""

    def __init__(self, response, body):
        self.response, self.body = response, body

    def __iter__(self):
        return iter(self.response)

    def close(self):
        try:
            if hasattr(self.response, "close"):
                self.response.close()
        finally:
            self.body.close()
