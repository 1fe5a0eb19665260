"""judge verifier against a small local chat-completions server (stdlib http.server)."""
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from training.verifiers import VerifierError, get_verifier, score_batch
from training.verifiers.judge import parse_score


class FakeJudge:
    """Answers each request with the next scripted behaviour (the last one repeats)."""

    def __init__(self):
        self.script = [("reply", "Score: 5")]
        self.requests = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                kind, arg = fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
                if kind == "hang":
                    fake.release.wait(arg)  # longer than the client's timeout
                    return
                if kind == "status":
                    self.send_response(arg)
                    self.end_headers()
                    self.wfile.write(b"error")
                    return
                payload = (arg.encode() if kind == "raw" else
                           json.dumps({"choices": [{"message": {"role": "assistant", "content": arg}}]}).encode())
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeJudge()
    yield server
    server.close()


def judge(fake, **kw):
    params = dict(base_url=fake.url, model="grader", retries=2, backoff_s=0.01, timeout_s=2)
    params.update(kw)
    return get_verifier("judge", **params)


def test_scores_map_to_unit_interval_and_prompt_is_rendered(fake):
    fake.script = [("reply", "Reasoning here.\nScore: 8")]
    v = judge(fake, rubric="Be {strict}.", scale=[0, 10],
              template="R={rubric} P={prompt} A={reference} C={completion} [{scale_min}-{scale_max}]")
    r = v("my {answer}", {"prompt": "What is 2+2?", "answer": "4"})
    assert r.score == pytest.approx(0.8) and r.details["judge_score"] == 8.0 and r.details["attempts"] == 1
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["model"] == "grader"
    assert sent["body"]["messages"][0]["content"] == "R=Be {strict}. P=What is 2+2? A=4 C=my {answer} [0-10]"


def test_parse_score_is_strict():
    assert parse_score("**Score:** 3", 1, 5) == 3.0
    assert parse_score("Score: 4\nScore: 4", 1, 5) == 4.0
    for bad, match in [("Score: 4\nScore: 5", "several"), ("I'd say 4/5", "no 'Score"), ("Score: 9", "outside"),
                       ("Score: four", "no 'Score"), ("My score: 4 maybe", "no 'Score")]:
        with pytest.raises(ValueError, match=match):
            parse_score(bad, 1, 5)


def test_retries_after_server_errors_and_malformed_replies(fake):
    fake.script = [("status", 503), ("raw", "not json"), ("reply", "I think it is fine."), ("reply", "Score: 10")]
    r = judge(fake, retries=3)("x", {})
    assert r.score == 1.0 and r.details["attempts"] == 4 and len(r.details["problems"]) == 3
    assert "HTTP 503" in r.details["problems"][0] and "malformed" in r.details["problems"][2]


def test_malformed_reply_every_time_is_verifier_error(fake):
    fake.script = [("reply", "Score: 7 out of 10, or maybe 8")]
    with pytest.raises(VerifierError, match="no valid judgement after 3 attempts"):
        judge(fake)("x", {})
    assert len(fake.requests) == 3


def test_client_error_fails_at_once(fake):
    fake.script = [("status", 404)]
    with pytest.raises(VerifierError, match="HTTP 404"):
        judge(fake)("x", {})
    assert len(fake.requests) == 1


def test_timeout_is_retried_then_verifier_error(fake):
    fake.script = [("hang", 10)]
    with pytest.raises(VerifierError, match="cannot reach|timed out"):
        judge(fake, timeout_s=0.3, retries=1)("x", {})
    assert len(fake.requests) == 2


def test_server_down_is_verifier_error():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    v = get_verifier("judge", base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff_s=0.01, timeout_s=1)
    with pytest.raises(VerifierError, match="cannot reach the judge server"):
        v("x", {})
    out = score_batch(v, ["a", "b"], [{}, {}])
    assert all(isinstance(o, VerifierError) for o in out)


def test_batch_runs_concurrently_and_keeps_order(fake):
    fake.script = [("reply", "Score: 2")]
    out = score_batch(judge(fake, concurrency=4, scale=[0, 4]), ["a", "b", "c"], [{}, {}, {}])
    assert [o.score for o in out] == [0.5, 0.5, 0.5]


def test_bad_params_are_named(fake):
    with pytest.raises(ValueError, match="exactly one of base_url"):
        get_verifier("judge")
    with pytest.raises(ValueError, match="scale"):
        judge(fake, scale=[5, 1])
    with pytest.raises(ValueError, match=r"unknown fields \['answer'\]"):
        judge(fake, template="{answer} {completion}")
    with pytest.raises(ValueError, match="SEEDBED_NO_SUCH_KEY"):
        judge(fake, api_key_env="SEEDBED_NO_SUCH_KEY")


def test_api_key_sent_as_bearer(fake, monkeypatch):
    monkeypatch.setenv("SEEDBED_JUDGE_KEY", "k-123")
    judge(fake, api_key_env="SEEDBED_JUDGE_KEY")("x", {})
    assert fake.requests[-1]["auth"] == "Bearer k-123"
