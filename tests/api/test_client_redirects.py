"""The command-line client and redirects: urllib follows a redirect anywhere and copies the request's headers,
the token's Authorization among them. The client follows a redirect within its server and refuses one to
another host or port, with a clear error, before the token reaches it. Two real local HTTP servers."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import REPO

TOKEN = "sb_redirect-test-token"


class Server:
    """A local HTTP server in a thread that records every request's path and Authorization header and answers
    with ``answer(path) -> (status, headers, body)``."""

    def __init__(self, answer):
        self.seen: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.seen.append((self.path, self.headers.get("Authorization")))
                status, headers, body = answer(self.path)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made = []

    def make(answer):
        made.append(Server(answer))
        return made[-1]
    yield make
    for server in made:
        server.close()


def projects_json(path):
    return 200, {"Content-Type": "application/json"}, json.dumps({"projects": [{"name": "vision", "role": "admin", "personal": False}]}).encode()


def cli(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seedbed_client", *args, "--url", url, "--token", TOKEN],
                          cwd=REPO, capture_output=True, text=True, timeout=30)


def test_a_redirect_to_another_port_is_refused_and_the_token_never_sent_there(servers):
    elsewhere = servers(projects_json)
    server = servers(lambda path: (302, {"Location": f"{elsewhere.url}{path}"}, b""))
    done = cli(server.url, "projects", "list")
    assert server.seen == [("/api/v1/projects", f"Bearer {TOKEN}")]
    assert elsewhere.seen == []  # not even a request: the token never reached it
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"error: {server.url}/api/v1/projects redirected to {elsewhere.url}/api/v1/projects, another host, port or "
        "scheme: refused, so the token is not sent there; if that is the server, give its address as SEEDBED_URL")


def test_a_redirect_to_another_host_is_refused(servers):
    # localhost and 127.0.0.1 are one machine but two hosts to a browser's origin rule, and to the client's
    elsewhere = servers(projects_json)
    other_host = elsewhere.url.replace("127.0.0.1", "localhost")
    server = servers(lambda path: (307, {"Location": f"{other_host}{path}"}, b""))
    done = cli(server.url, "projects", "list")
    assert elsewhere.seen == [] and done.returncode == 2
    assert f"redirected to {other_host}/api/v1/projects" in done.stderr


def test_a_redirect_within_the_server_is_followed_with_the_token(servers):
    def answer(path):
        if path == "/api/v1/projects":
            return 301, {"Location": "/api/v1/projects/"}, b""
        return projects_json(path)
    server = servers(answer)
    done = cli(server.url, "projects", "list")
    assert done.returncode == 0, done.stderr
    assert "vision" in done.stdout
    assert server.seen == [("/api/v1/projects", f"Bearer {TOKEN}"), ("/api/v1/projects/", f"Bearer {TOKEN}")]


@pytest.mark.parametrize(("start", "target", "refused"), [
    ("https://seedbed.lab/api/v1/runs", "http://seedbed.lab/api/v1/runs", True),        # https to http
    ("https://seedbed.lab/api/v1/runs", "https://seedbed.lab:8443/api/v1/runs", True),  # another port
    ("https://seedbed.lab/api/v1/runs", "https://evil.example/api/v1/runs", True),     # another host
    ("https://seedbed.lab/api/v1/runs", "https://SEEDBED.lab:443/api/v1/runs/", False),  # the same origin
    ("http://seedbed.lab/api/v1/runs", "http://seedbed.lab:80/api/v1/runs/", False),
])
def test_which_redirects_are_refused(start, target, refused):
    """The origin rule itself, for what the local servers cannot show (TLS, default ports, host case)."""
    import io
    import urllib.request
    from email.message import Message

    from seedbed_client.client import RedirectRefused, _SameOriginRedirects

    request = urllib.request.Request(start, headers={"Authorization": f"Bearer {TOKEN}"})
    handler = _SameOriginRedirects()
    if refused:
        with pytest.raises(RedirectRefused):
            handler.redirect_request(request, io.BytesIO(), 302, "Found", Message(), target)
    else:
        followed = handler.redirect_request(request, io.BytesIO(), 302, "Found", Message(), target)
        assert followed.full_url == target
