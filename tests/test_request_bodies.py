"""Request bodies are bounded at the edge: a real gunicorn serving webapp.wsgi (as ``./seedbed up`` runs it) gets a
256 MB body at each entry point that reads one, anonymous and logged in, with a Content-Length and chunked, and
answers 413 having stored almost nothing of it. Measured from outside, as an attacker would cost it: the disk used
under the server's $SEEDBED_HOME and its temporary folder (peak, sampled while the body goes in) and the resident
memory of the server's processes. The body comes from a generator: the test never holds it either."""
from __future__ import annotations

import json
import os
import select
import shutil
import socket
import threading

import pytest

from tests.realserver import Server, cookie_header, log_in, multipart, prepare_home, request

MB = 2**20
BODY = 256 * MB
MAX_DISK_GROWTH = 5 * MB
MAX_RSS_GROWTH = 20 * MB
PIECE = b"x" * (64 * 1024)
FIGURES: dict[str, dict] = {}


def pieces(total: int):
    """``total`` bytes, 64 KiB at a time, the same piece each time."""
    left = total
    while left > 0:
        yield PIECE if left >= len(PIECE) else PIECE[:left]
        left -= len(PIECE)


def _vm(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _disk(folders) -> int:
    total = 0
    for folder in folders:
        for top, _, files in os.walk(folder):
            for name in files:
                try:
                    total += os.lstat(os.path.join(top, name)).st_blocks * 512
                except FileNotFoundError:
                    pass
    return total


class Meter:
    """Disk under ``folders`` (the first one's file system for free space) and the server processes' memory:
    before, and sampled every few milliseconds by a thread while a body goes in (``with meter:``)."""

    def __init__(self, server: Server, folders):
        self.folders, self.free_path = folders, folders[0]
        self.pids = [server.proc.pid] + server.worker_pids()
        self.disk0 = self.peak_disk = _disk(folders)
        self.folder0 = {folder: _disk([folder]) for folder in folders}
        self.folder_peak = {folder: 0 for folder in folders}
        self.free0 = self.low_free = shutil.disk_usage(self.free_path).free
        self.rss0 = {pid: _vm(pid, "VmRSS") for pid in self.pids}
        self.hwm0 = {pid: _vm(pid, "VmHWM") for pid in self.pids}
        self.peak_rss = dict(self.rss0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        for folder in self.folders:
            self.folder_peak[folder] = max(self.folder_peak[folder], _disk([folder]) - self.folder0[folder])
        self.peak_disk = max(self.peak_disk, _disk(self.folders))
        self.low_free = min(self.low_free, shutil.disk_usage(self.free_path).free)
        for pid in self.pids:
            self.peak_rss[pid] = max(self.peak_rss[pid], _vm(pid, "VmRSS"))

    def _run(self) -> None:
        while not self._stop.wait(0.003):
            self.sample()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def figures(self) -> dict:
        self.sample()
        rss_growth = 0
        for pid in self.pids:
            hwm = _vm(pid, "VmHWM")
            peak = max(self.peak_rss[pid], hwm if hwm > self.hwm0[pid] else 0)
            rss_growth = max(rss_growth, peak - self.rss0[pid])
        return {"disk_peak_growth": self.peak_disk - self.disk0, "disk_left": _disk(self.folders) - self.disk0,
                "free_space_drop": self.free0 - self.low_free, "rss_growth": rss_growth}


def send(server: Server, path: str, headers: dict, chunks, *, length: int | None):
    """POST a body from ``chunks`` over a raw socket (chunked when ``length`` is None), stopping as soon as the
    server answers; (status, bytes of the body sent, the answer's first bytes)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    head = {"Host": f"127.0.0.1:{server.port}", **headers}
    head.update({"Transfer-Encoding": "chunked"} if length is None else {"Content-Length": str(length)})
    sock.sendall((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    sock.setblocking(False)
    sent, pending, ended = 0, b"", False
    chunks = iter(chunks)
    try:
        while True:
            if not pending:
                piece = next(chunks, None)
                if piece is None:
                    if length is not None or ended:
                        break
                    pending, ended = b"0\r\n\r\n", True
                else:
                    pending = piece if length is not None else b"%x\r\n%s\r\n" % (len(piece), piece)
            readable, writable, _ = select.select([sock], [sock], [], 60)
            if readable:
                break  # the server answered (or closed) before taking the whole body
            assert writable, "the server neither reads the body nor answers"
            n = sock.send(pending)
            pending, sent = pending[n:], sent + n
    except (BrokenPipeError, ConnectionResetError):
        pass
    sock.setblocking(True)
    sock.settimeout(120)
    answer = b""
    try:
        while len(answer) < 256 * 1024:  # the answer: its head, and as much of a page as says why
            data = sock.recv(65536)
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer:
                sock.settimeout(0.5)
    except (ConnectionResetError, TimeoutError, socket.timeout):
        pass
    sock.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None
    return status, sent, answer


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("bodies") / "home"
    return home, prepare_home(home)


@pytest.fixture(scope="module")
def server(home):
    """The app as ``./seedbed up`` serves it, every limit at its default (datasets: 200 MB)."""
    path, account = home
    temp = path.parent / "tmp-default"
    temp.mkdir()
    server = Server(path, TMPDIR=str(temp))
    server.temp = temp
    server.cookies = log_in(server, "admin", account["password"])
    server.token = account["token"]
    # anyone gets a CSRF cookie from the login page: with it the CSRF check reads the body to find the token
    _, answer_headers, _ = request(server, "GET", "/accounts/login/", {})
    server.anonymous_cookies = {"csrftoken": answer_headers["Set-Cookie"].split("csrftoken=", 1)[1].split(";")[0]}
    yield server
    server.stop()
    for name, figures in FIGURES.items():
        print(f"{name}: " + ", ".join(f"{k} {v / MB:.2f} MB" if k != "sent" else f"{k} {v / MB:.1f} MB"
                                      for k, v in figures.items()))


def entry(server: Server, name: str, size: int):
    """(path, headers, content type, body generator, length) of a ``size``-byte file posted to entry ``name``."""
    anonymous = {"Cookie": cookie_header(server.anonymous_cookies)}
    if name == "login":
        path, headers, fields = "/accounts/login/", anonymous, {"username": "admin", "password": "guess"}
    elif name == "anonymous-page":
        path, headers, fields = "/runs/new/", anonymous, {"preset": "grpo"}
    elif name == "api-dataset-upload":
        path, headers, fields = "/api/v1/datasets", {"Authorization": f"Bearer {server.token}"}, {"name": "big"}
    else:  # the datasets page's upload form, logged in
        path = "/datasets/"
        headers = {"Cookie": cookie_header(server.cookies), "Referer": f"{server.url}/datasets/"}
        fields = {"csrfmiddlewaretoken": server.cookies["csrftoken"], "form": "upload", "name": "big"}
    content_type, body, extra = multipart(fields, "file", "big.jsonl", pieces(size))
    return path, {**headers, "Content-Type": content_type}, body, size + extra


ENTRIES = ["login", "anonymous-page", "api-dataset-upload", "web-dataset-upload"]


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("name", ENTRIES)
def test_a_256_mb_body_is_refused_with_413_before_it_costs_disk_or_memory(server, name, framing):
    # warm up: the same entry with a small body, so what is measured is the big body's cost, not first imports
    for _ in range(2):
        path, headers, body, length = entry(server, name, 64 * 1024)
        send(server, path, headers, body, length=length if framing == "content-length" else None)
    path, headers, body, length = entry(server, name, BODY)
    with Meter(server, [server.home, server.temp]) as meter:
        status, sent, answer = send(server, path, headers, body,
                                    length=length if framing == "content-length" else None)
    figures = {**meter.figures(), "sent": sent}
    FIGURES[f"{name} ({framing})"] = figures
    assert status == 413, (status, answer[:1000], figures)
    assert figures["disk_peak_growth"] <= MAX_DISK_GROWTH, figures
    assert figures["disk_left"] <= MAX_DISK_GROWTH, figures
    assert figures["rss_growth"] <= MAX_RSS_GROWTH, figures
    if name.startswith("api"):  # the API's one error shape
        assert b'{"errors": {"body": ' in answer, answer


@pytest.fixture(scope="module")
def small_limit_server(home):
    """The same home served with a 1 MB dataset limit: an upload that passes the edge but not the dataset limit."""
    path, _ = home
    temp = path.parent / "tmp-small"
    temp.mkdir()
    server = Server(path, TMPDIR=str(temp), SEEDBED_MAX_DATASET_MB="1")
    server.temp = temp
    yield server
    server.stop()


@pytest.mark.parametrize("name", ["api-dataset-upload", "web-dataset-upload"])
def test_an_upload_past_the_dataset_limit_streams_into_seedbed_home_and_stops_there(server, small_limit_server,
                                                                                    name):
    """Within the body limit (the dataset limit plus room for the form) but past the dataset limit: the file goes
    into $SEEDBED_HOME (where its dataset would live, not the system's temporary folder), is stopped at the limit
    as it arrives, and nothing of it is left."""
    small = small_limit_server
    small.token, small.cookies, small.anonymous_cookies = server.token, server.cookies, server.anonymous_cookies
    path, headers, body, length = entry(small, name, 5 * MB)
    with Meter(small, [small.home, small.temp]) as meter:
        status, sent, answer = send(small, path, headers, body, length=length)
    figures = meter.figures()
    temp_used = meter.folder_peak[small.temp]
    FIGURES[f"{name} (5 MB, 1 MB limit)"] = {**figures, "sent": sent}
    assert status == 400 and b"SEEDBED_MAX_DATASET_MB" in answer, (status, answer[:1000])
    assert temp_used == 0 and figures["disk_peak_growth"] <= 2 * MB, (temp_used, figures)
    assert figures["disk_left"] <= 256 * 1024, figures
    for folder in (small.home / "uploads", small.home / "library"):
        leftovers = [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
        assert not leftovers, leftovers


def test_a_dataset_within_the_limits_is_uploaded_through_the_real_server(server):
    rows = b"".join(b'{"prompt": "%d+1=", "answer": "%d"}\n' % (i, i + 1) for i in range(50))
    content_type, body, _ = multipart({"name": "sums"}, "file", "sums.jsonl", [rows])
    status, _, content = request(server, "POST", "/api/v1/datasets",
                                 {"Authorization": f"Bearer {server.token}", "Content-Type": content_type},
                                 body=b"".join(body))
    assert status == 201, content
    assert json.loads(content)["rows"] == 50
    # a small chunked body is read (the edge gives it its length), not seen as empty
    status, _, content = request(server, "POST", "/api/v1/projects",
                                 {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
                                 body=iter([b'{"name": "chunky"}']))
    assert status == 201, content


def _through_the_edge(headers: dict, body: bytes = b"") -> tuple[str, bytes]:
    """One request through BodyLimit (1,000-byte anonymous limit, 5,000 otherwise) around an application that
    reads its whole body: (status, what the application read or the refusal said)."""
    import io

    from webapp.bodylimit import BodyLimit

    def app(environ, start_response):
        read = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [read]

    answer = {}
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/x/", "wsgi.input": io.BytesIO(body), **headers}
    content = b"".join(BodyLimit(app, anonymous=1000, authenticated=5000)(
        environ, lambda status, _headers: answer.setdefault("status", status)))
    return answer["status"].split()[0], content


def test_who_gets_which_limit_is_decided_from_the_headers_alone():
    big = b"x" * 3000
    length = {"CONTENT_LENGTH": "3000"}
    assert _through_the_edge(length, big)[0] == "413"  # anonymous
    assert _through_the_edge({**length, "HTTP_COOKIE": "csrftoken=abc; sessionid="}, big)[0] == "413"  # empty
    # a session cookie or a token, even forged (Django refuses it later), buys the upload limit, never more
    for signed in ({"HTTP_COOKIE": "csrftoken=abc; sessionid=forged"}, {"HTTP_AUTHORIZATION": "Bearer forged"}):
        assert _through_the_edge({**length, **signed}, big) == ("200", big)
        assert _through_the_edge({**signed, "CONTENT_LENGTH": "6000"}, b"x" * 6000)[0] == "413"
    assert _through_the_edge({"CONTENT_LENGTH": "lots"}, big)[0] == "400"
    # chunked (no length): read and counted up to the anonymous limit whoever sends it, then handed on with a length
    assert _through_the_edge({"HTTP_TRANSFER_ENCODING": "chunked"}, b"x" * 999) == ("200", b"x" * 999)
    status, said = _through_the_edge({"HTTP_TRANSFER_ENCODING": "chunked", "HTTP_AUTHORIZATION": "Bearer t"}, big)
    assert status == "413" and b"without a Content-Length may have at most 1,000 bytes" in said
