"""The command-line client's launches are safe to retry: each carries an ``Idempotency-Key`` (a new UUID per
launch command) and one whose connection is reset before the answer comes is sent again with the same key, a
bounded number of times. A local HTTP server that drops the first requests' connections (RST) stands in."""
from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from seedbed_client.client import LAUNCH_ATTEMPTS, SeedbedClient, Unreachable
from tests.conftest import REPO

TOKEN = "sb_retry-test-token"


class ResettingServer:
    """Records each POST's path and Idempotency-Key; resets the connection (no answer) of the first ``drops``
    requests, then answers 201 ``answer``."""

    def __init__(self, drops: int, answer: dict):
        self.seen: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append((self.path, self.headers.get("Idempotency-Key")))
                if len(outer.seen) <= drops:  # as a web worker killed mid-request: RST, no answer
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                body = json.dumps(answer).encode()
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    made = []

    def make(drops: int, answer: dict | None = None):
        made.append(ResettingServer(drops, answer or {"id": 7, "status": "queued", "project": "vision"}))
        return made[-1]
    yield make
    for s in made:
        s.close()


def test_a_launch_whose_connection_is_reset_is_sent_again_with_the_same_key(server, tmp_path):
    srv = server(drops=2)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"preset": "grpo", "total_steps": 4}))
    done = subprocess.run([sys.executable, "-m", "seedbed_client", "runs", "launch", str(config), "--url", srv.url,
                           "--token", TOKEN], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "run 7 queued" in done.stdout
    assert [path for path, _ in srv.seen] == ["/api/v1/runs"] * 3
    keys = {key for _, key in srv.seen}
    assert len(keys) == 1 and uuid.UUID(keys.pop())  # one key, a UUID, on every attempt
    assert done.stderr.count("sending it again with the same Idempotency-Key") == 2
    # a second launch command is another launch: another key
    srv2 = server(drops=0)
    subprocess.run([sys.executable, "-m", "seedbed_client", "runs", "launch", str(config), "--url", srv2.url,
                    "--token", TOKEN], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert srv2.seen[0][1] not in {key for _, key in srv.seen}


def test_a_sweep_launch_is_retried_too(server):
    srv = server(drops=1, answer={"id": 3, "project": "vision", "runs": [1, 2]})
    client = SeedbedClient(srv.url, TOKEN, retry_wait_s=0)
    assert client.launch("/sweeps", {"config": {}, "seeds": 2})["id"] == 3
    assert len(srv.seen) == 2 and srv.seen[0][1] == srv.seen[1][1]


def test_retries_are_bounded_and_end_unreachable(server):
    srv = server(drops=100)
    client = SeedbedClient(srv.url, TOKEN, retry_wait_s=0)
    with pytest.raises(Unreachable):
        client.launch("/runs", {"config": {}}, key="k-1")
    assert srv.seen == [("/api/v1/runs", "k-1")] * LAUNCH_ATTEMPTS
