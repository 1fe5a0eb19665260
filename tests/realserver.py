"""A real Seedbed web server for the tests that measure one: gunicorn serving webapp.wsgi on a free port, started as
``./seedbed up`` starts it, on a $SEEDBED_HOME of its own set up the real way (migrate, the admin account, an API
token). Its processes start with the umask an operator's shell usually has (022), so what the files end up as is
the app's own doing."""
from __future__ import annotations

import http.client
import http.cookiejar
import os
import re
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from tests.conftest import REPO, wait_for

SHELL_UMASK = 0o022
GUNICORN = str(Path(sys.executable).parent / "gunicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(home: Path, **extra: str) -> dict:
    env = {**os.environ, "SEEDBED_HOME": str(home), "DJANGO_SETTINGS_MODULE": "webapp.settings",
           "PYTHONPATH": str(REPO), "SEEDBED_DEMO": "0", **extra}
    env.pop("DATABASE_URL", None)  # its own SQLite under its home, whichever database the test session uses
    return env


def manage(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, umask=SHELL_UMASK)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def prepare_home(home: Path) -> dict:
    """Migrate, make the admin account and an API token for it, as the set-up and an operator do."""
    env = app_env(home)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "ensure_admin")
    token = manage(env, "api_token", "admin").strip().splitlines()[-1]
    return {"password": (home / "admin_password").read_text().strip(), "token": token}


class Server:
    """gunicorn webapp.wsgi with the launcher's arguments; one worker process (``--workers 1``) so that the
    process whose memory a test measures is the one that served its request."""

    def __init__(self, home: Path, *gunicorn_args: str, **env_extra: str):
        self.home, self.port = home, free_port()
        self.env = app_env(home, **env_extra)
        (home / "logs").mkdir(parents=True, exist_ok=True)
        self.log_path = home / "logs" / f"web-{self.port}.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [GUNICORN, "webapp.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4",
             "--access-logfile", "-", "--graceful-timeout", "5", *gunicorn_args],
            cwd=REPO, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, umask=SHELL_UMASK)
        wait_for(self._answers, timeout=90, what=f"gunicorn on port {self.port} (log {self.log_path})")

    def _answers(self) -> bool:
        assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return [int(pid) for pid in children]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()


def log_in(server: Server, username: str, password: str) -> dict[str, str]:
    """Log in through the login form; the cookies the browser would then hold (sessionid, csrftoken)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{server.url}/accounts/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    opener.open(urllib.request.Request(f"{server.url}/accounts/login/", data=data.encode(),
                                       headers={"Referer": f"{server.url}/accounts/login/"}), timeout=30).read()
    cookies = {c.name: c.value for c in jar}
    assert "sessionid" in cookies, cookies
    return cookies


def multipart(fields: dict[str, str], file_field: str, filename: str, file_chunks, boundary: str = "seedbedbound"):
    """A multipart/form-data body as a generator: the fields, then the file from ``file_chunks`` (never held
    whole), then the closing boundary. Returns (content type, generator, length of everything but the file)."""
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                    for k, v in fields.items())
    head += (f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\n'
             f"Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body():
        yield head
        yield from file_chunks
        yield tail
    return f"multipart/form-data; boundary={boundary}", body(), len(head) + len(tail)


def request(server: Server, method: str, path: str, headers: dict[str, str], body=b"", timeout: float = 60):
    """A small request through http.client: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def cookie_header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{k}={v}" for k, v in cookies.items())

