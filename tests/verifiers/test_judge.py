"""judge verifier against a small local chat-completions server (stdlib http.server)."""
import json
import socket

import pytest

from tests.verifiers.judge_stand_in import FakeJudge
from training.verifiers import VerifierError, get_verifier, score_batch
from training.verifiers import judge as judge_module
from training.verifiers.judge import JudgeEndpoint, parse_score, set_endpoint_provider


@pytest.fixture
def endpoints():
    """The judge endpoints "staff registered" for the test (the web app's come from the database)."""
    registered: dict[str, JudgeEndpoint] = {}
    before = judge_module._provider
    set_endpoint_provider(lambda: dict(registered))
    yield registered
    set_endpoint_provider(before)


@pytest.fixture
def fake(endpoints):
    server = FakeJudge()
    endpoints["grader"] = JudgeEndpoint(name="grader", base_url=server.url, model="grader")
    yield server
    server.close()


def judge(fake, **kw):
    params = dict(endpoint="grader", retries=2, backoff_s=0.01, timeout_s=2)
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


def test_server_down_is_verifier_error(endpoints):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoints["down"] = JudgeEndpoint(name="down", base_url=f"http://127.0.0.1:{port}/v1")
    v = get_verifier("judge", endpoint="down", retries=1, backoff_s=0.01, timeout_s=1)
    with pytest.raises(VerifierError, match="cannot reach the judge server"):
        v("x", {})
    out = score_batch(v, ["a", "b"], [{}, {}])
    assert all(isinstance(o, VerifierError) for o in out)


def test_batch_runs_concurrently_and_keeps_order(fake):
    fake.script = [("reply", "Score: 2")]
    out = score_batch(judge(fake, concurrency=4, scale=[0, 4]), ["a", "b", "c"], [{}, {}, {}])
    assert [o.score for o in out] == [0.5, 0.5, 0.5]


def test_bad_params_are_named(fake, endpoints):
    with pytest.raises(ValueError, match="name a registered judge endpoint"):
        get_verifier("judge")
    with pytest.raises(ValueError, match="no judge endpoint named 'elsewhere'"):
        get_verifier("judge", endpoint="elsewhere")
    with pytest.raises(ValueError, match="scale"):
        judge(fake, scale=[5, 1])
    with pytest.raises(ValueError, match=r"unknown fields \['answer'\]"):
        judge(fake, template="{answer} {completion}")
    with pytest.raises(ValueError, match=r"retries must be a number in \[0, 10\]"):
        judge(fake, retries=10**6)
    endpoints["keyed"] = JudgeEndpoint(name="keyed", base_url=fake.url, secret="NO_SUCH_KEY")
    with pytest.raises(ValueError, match="SEEDBED_SECRET_NO_SUCH_KEY"):
        get_verifier("judge", endpoint="keyed")


def test_the_key_comes_from_the_secret_the_endpoint_names(fake, endpoints, monkeypatch):
    monkeypatch.setenv("SEEDBED_SECRET_JUDGE_KEY", "k-123")
    endpoints["keyed"] = JudgeEndpoint(name="keyed", base_url=fake.url, model="grader", secret="judge_key")
    fake.script = [("reply", "Score: 3")]
    get_verifier("judge", endpoint="keyed")("x", {})
    assert fake.requests[-1]["auth"] == "Bearer k-123"


@pytest.mark.parametrize("params, message", [
    ({"base_url": "file:///etc/shadow#"}, "unknown parameter(s) ['base_url']"),
    ({"endpoint": "grader", "api_key_env": "DJANGO_SECRET_KEY"}, "unknown parameter(s) ['api_key_env']"),
    ({"local_model_path": "/root"}, "unknown parameter(s) ['local_model_path']"),
    ({"endpoint": "file:///etc/shadow"}, "no judge endpoint named"),
])
def test_a_config_can_name_no_url_file_or_environment_variable(fake, params, message):
    """The judge exploits a red team found (a file:// judge reading any file, SSRF, any variable sent as a key): a run's
    config can only name an endpoint staff registered; anything else is a field error at submit time."""
    from training.config import TrainConfig
    from training.fields import FieldErrors

    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": [{"name": "judge", "params": params}]}, check_paths=False)
    assert message in info.value.errors["rewards"]
    assert fake.requests == []


def test_an_endpoint_must_be_http_or_https(endpoints):
    endpoints["disk"] = JudgeEndpoint(name="disk", base_url="file:///etc/passwd")
    with pytest.raises(ValueError, match="must be http:// or https://"):
        get_verifier("judge", endpoint="disk")


def test_a_local_model_folder_with_a_nul_byte_is_refused_when_the_spec_is_checked(endpoints):
    # no folder's name holds a NUL byte; loading one would raise ValueError in the worker, mid-run
    from training.config import TrainConfig
    from training.fields import FieldErrors

    endpoints["local"] = JudgeEndpoint(name="local", local_model_path="/models/judge\x00")
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": [{"name": "judge", "params": {"endpoint": "local"}}]}, check_paths=False)
    assert "the local model folder must not contain a NUL byte" in info.value.errors["rewards"]


def test_only_a_short_excerpt_of_the_reply_is_kept(fake):
    fake.script = [("reply", "x" * 5000 + "\nScore: 5")]
    result = judge(fake)("y", {})
    assert result.score == 0.5 and len(result.details["reply"]) <= judge_module.REPLY_EXCERPT_CHARS
