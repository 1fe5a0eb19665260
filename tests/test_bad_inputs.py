"""Bad input through every entry point, one table: the web forms and the pages' JSON/htmx endpoints, the token
API (/api/v1/) and the training CLI. Each case must give a field-level error (400 naming the field, or the
CLI's one ``error: FIELD: message`` line and exit code 2), never a server error, and create nothing.

A case is ``(id, via, data, field, fragment)``: ``via`` picks how it is sent (``SENDERS``), ``field`` is the
field the error must name and ``fragment`` a piece of its message (its start when written "^..."). ``{tmp}``,
``{model}``, ``{run}``, ``{sweep}`` and ``{job}`` in the data are filled per test (a temporary folder, a model
folder, and a run, a sweep and an evaluation job ada and alice may see).

``pytest -s`` or not, the last test prints ``bad inputs: N tried, N field errors, 0 server errors``.
"""
from __future__ import annotations

import html
import json
import os
import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from tests.api.conftest import Api, _user_with_token
from tests.conftest import join_default_project
from tests.evals.test_views import form_data as eval_form_data
from tests.runs.test_views import field_errors, form_post
from tests.sweeps.test_views import form_data as sweep_form_data
from tests.training.test_cli import CLI_BAD_INPUTS, bad_files
from webapp.evals.models import EvalJob
from webapp.projects.models import Membership, Project
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Case:
    id: str
    via: str      # a key of SENDERS
    data: Any     # what is sent (see each sender)
    field: str    # the field the error must name
    fragment: str  # a piece of its message

    @property
    def entry(self) -> str:
        return self.via.split("_")[0]  # web, api or cli


def judge(**params) -> str:
    return json.dumps([{"name": "judge", "params": {"endpoint": "grader", **params}}])


POPEN = json.dumps([{"name": "subprocess:Popen", "params": {"args": "id", "shell": True}}])
EVAL = json.dumps([{"name": "builtins:eval", "params": {"source": "1"}}])
DOTTED = "a dotted path may only name a module the operator allows"
TOO_LONG = "x" * 201
NUL = "must not contain a NUL byte"
FORM_NUL = "Null characters are not allowed"  # Django's form fields refuse one themselves
BIG = str(10**30)
HUGE = "1" + "0" * 5000  # past Python's int-from-text limit (4,300 digits): int(HUGE) raises ValueError
HUGE_GRID = ("lr = " + ", ".join(f"{i}e-7" for i in range(1, 1001)) + "\n"
             "eps_high = " + ", ".join(f"0.{i:04d}" for i in range(1, 1001)))
MANY_SEEDS = ", ".join(str(i) for i in range(300))
SEVENTEEN = json.dumps([{"name": "exact"}] * 17)

# --- the web forms: POST changes to a valid form ---------------------------------------------------------------

RUN_FORM = [
    ("lr-nan", {"lr": "nan"}, "lr", "expected a finite number"),
    ("lr-inf", {"lr": "inf"}, "lr", "expected a finite number"),
    ("temperature-minus-inf", {"temperature": "-inf"}, "temperature", "expected a finite number"),
    ("kl-coef-NaN", {"kl_coef": "NaN"}, "kl_coef", "expected a finite number"),
    ("total-steps-2**63", {"total_steps": str(2**63)}, "total_steps", "must be in [1, 1000000]"),
    ("seed-10**30", {"seed": BIG}, "seed", "must be in [0, 4294967295]"),
    ("seed-negative", {"seed": "-1"}, "seed", "must be in [0, 4294967295]"),
    ("seed-5000-digits", {"seed": HUGE}, "seed", "expected an integer"),
    ("lr-5000-digits", {"lr": HUGE}, "lr", "expected a finite number"),
    ("rewards-weight-5000-digits", {"rewards": '[{"name": "exact", "weight": %s}]' % HUGE}, "rewards", "4300 digits"),
    ("prompts-per-step-zero", {"prompts_per_step": "0"}, "prompts_per_step", "must be in [1, 4096]"),
    ("group-size-negative", {"group_size": "-3"}, "group_size", "must be in [2, 1024]"),
    ("max-new-tokens-abc", {"max_new_tokens": "abc"}, "max_new_tokens", "expected an integer"),
    ("total-steps-float", {"total_steps": "2.5"}, "total_steps", "expected an integer"),
    ("eps-low-1.5", {"eps_low": "1.5"}, "eps_low", "must be in [0, 1)"),
    ("top-p-zero", {"top_p": "0"}, "top_p", "must be in (0, 1]"),
    ("dual-clip-below-1", {"dual_clip": "0.5"}, "dual_clip", "must be in (1, 100]"),
    ("eps-high-below-eps-low", {"eps_low": "0.3", "eps_high": "0.1"}, "eps_high", "must be >= eps_low"),
    ("overlong-buffer-too-long", {"overlong_buffer_len": "8", "max_new_tokens": "8"}, "overlong_buffer_len",
     "must be smaller than max_new_tokens"),
    ("unbiased-kl-k1", {"unbiased_kl": "on", "kl_estimator": "k1"}, "unbiased_kl", "k3 estimator only"),
    ("vllm-keep-routing", {"rollout_engine": "vllm", "keep_routing": "on"}, "rollout_engine", "vllm returns no"),
    ("preset-unknown", {"preset": "ppo"}, "preset", "unknown preset 'ppo'"),
    ("task-unknown", {"task": "chess"}, "task", "must be arithmetic, countdown, humaneval, ifbench, file, dataset:<name> or reasoning_gym:<task>"),
    ("loss-agg-unknown", {"loss_agg": "sum"}, "loss_agg", "must be one of"),
    ("device-unknown", {"device": "tpu"}, "device", "must be one of auto, cpu, cuda"),
    ("model-path-etc", {"model_path": "/etc"}, "model_path", "must lie inside the allowed folders"),
    ("model-path-root", {"model_path": "/root"}, "model_path", "/root"),
    ("model-path-dotdot", {"model_path": "../.."}, "model_path", "../.."),
    ("model-path-missing", {"model_path": "/nonexistent/model"}, "model_path", "must lie inside the allowed folders"),
    ("data-path-required", {"task": "file", "data_path": ""}, "data_path", "required when task is 'file'"),
    ("data-path-etc-passwd", {"task": "file", "data_path": "/etc/passwd"}, "data_path", "must lie inside the allowed folders"),
    ("data-path-dotdot", {"task": "file", "data_path": "../../secret.jsonl"}, "data_path", "must lie inside the allowed folders"),
    # a NUL byte (os.path.realpath raises ValueError on one): the form's own check refuses it first
    ("model-path-nul", {"model_path": "{model}\x00x"}, "model_path", FORM_NUL),
    ("data-path-nul", {"task": "file", "data_path": "{tmp}/a\x00.jsonl"}, "data_path", FORM_NUL),
    ("rewards-popen", {"rewards": POPEN}, "rewards", DOTTED),
    ("rewards-builtins-eval", {"rewards": EVAL}, "rewards", "verifier 'builtins:eval'"),
    ("rewards-judge-base-url", {"rewards": judge(base_url="http://attacker.example")}, "rewards",
     "unknown parameter(s) ['base_url']"),
    ("rewards-judge-api-key-env", {"rewards": judge(api_key_env="HOME")}, "rewards",
     "unknown parameter(s) ['api_key_env']"),
    ("rewards-judge-local-model-path", {"rewards": judge(local_model_path="/root")}, "rewards",
     "unknown parameter(s) ['local_model_path']"),
    ("rewards-judge-unregistered", {"rewards": judge()}, "rewards", "no judge endpoint named 'grader'"),
    ("rewards-invalid-json", {"rewards": "[{"}, "rewards", "expected a JSON list"),
    ("rewards-an-object", {"rewards": '{"name": "exact"}'}, "rewards", "expected a list"),
    ("rewards-weight-nan", {"rewards": '[{"name": "exact", "weight": NaN}]'}, "rewards",
     "weight must be a finite number"),
    ("rewards-seventeen", {"rewards": SEVENTEEN}, "rewards", "at most 16 verifiers"),
    ("eval-k-zero", {"eval_k": "[0]"}, "eval_k", "integers >= 1"),
    ("eval-k-above-eval-n", {"eval_k": "[1, 64]", "eval_n": "8"}, "eval_k", "every k must be <= eval_n"),
    ("name-too-long", {"name": TOO_LONG}, "name", "at most 200 characters"),
    ("project-unknown", {"project": "nope"}, "project", "Select a valid choice"),
]

SWEEP_FORM = [
    ("seeds-duplicate", {"seeds": "1, 1"}, "seeds", "seeds must be distinct"),
    ("seeds-count-over-cap", {"seeds": "300"}, "seeds", "a count of seeds must lie in [1, 256]"),
    ("seeds-count-zero", {"seeds": "0"}, "seeds", "a count of seeds must lie in [1, 256]"),
    ("seeds-list-over-cap", {"seeds": MANY_SEEDS}, "seeds", "300 runs; at most 256"),
    ("seeds-negative", {"seeds": "-1, 2"}, "seeds", "seed -1 must be in [0, 4294967295]"),
    ("seeds-huge", {"seeds": f"{BIG}, 1"}, "seeds", f"seed {BIG} must be in [0, 4294967295]"),
    ("seeds-words", {"seeds": "a, b"}, "seeds", "whole numbers"),
    ("seeds-5000-digits", {"seeds": HUGE}, "seeds", "whole numbers"),
    ("seeds-list-5000-digits", {"seeds": f"1, {HUGE}"}, "seeds", "whole numbers"),
    ("grid-5000-digits", {"grid": f"total_steps = 4, {HUGE}"}, "grid", "4300 digits"),
    ("policy-params-5000-digits", {"policy_params": '{"min_peers": %s}' % HUGE}, "policy_params", "4300 digits"),
    ("grid-1000x1000", {"grid": HUGE_GRID}, "grid", "1000000 grid points"),
    ("grid-four-knobs", {"grid": "lr = 1e-4\neps_high = 0.3\nkl_coef = 0.1\ntop_p = 0.9"}, "grid", "at most 3 knobs"),
    ("grid-seed", {"grid": "seed = 1, 2"}, "grid", "seed: cannot be varied"),
    ("grid-nan", {"grid": "lr = NaN, 1e-4"}, "grid", "expected a finite number"),
    ("grid-duplicate-values", {"grid": "lr = 1e-4, 1e-4"}, "grid", "values must be distinct"),
    ("grid-unknown-knob", {"grid": "nope = 1, 2"}, "grid", "nope: not a config knob"),
    ("grid-no-equals", {"grid": "lr 1e-4"}, "grid", "write 'knob = value, value'"),
    ("grid-out-of-range", {"grid": "group_size = 4, 1"}, "grid", "group_size=1: must be in [2, 1024]"),
    ("concurrency-zero", {"concurrency": "0"}, "concurrency", "greater than or equal to 1"),
    ("concurrency-10**30", {"concurrency": BIG}, "concurrency", "less than or equal to 256"),
    ("concurrency-abc", {"concurrency": "abc"}, "concurrency", "Enter a whole number"),
    ("policy-params-invalid-json", {"policy_params": "{not json"}, "policy_params", "not valid JSON"),
    ("policy-params-a-list", {"policy_params": "[1]"}, "policy_params", "expected a JSON object"),
    ("policy-params-min-peers", {"policy_params": '{"min_peers": -1}'}, "policy_params", "min_peers: must be"),
    ("policy-name-unknown", {"policy_name": "nope"}, "policy_name", "Select a valid choice"),
    ("policy-mode-unknown", {"policy_mode": "sideways"}, "policy_mode", "Select a valid choice"),
    ("alert-bounds-nan", {"alert_bounds": '{"entropy_min": NaN}'}, "alert_bounds", "expected a finite number"),
    ("alert-bounds-unknown", {"alert_bounds": '{"bogus": 1}'}, "alert_bounds", "bogus: unknown alert bound"),
    ("free-slot-use-unknown", {"free_slot_use": "teleport"}, "free_slot_use", "Select a valid choice"),
    ("extend-steps-negative", {"extend_steps": "-1"}, "extend_steps", "greater than or equal to 0"),
    ("extend-steps-10**30", {"free_slot_use": "extend", "extend_steps": BIG}, "extend_steps",
     "must lie in [0, 1000000]"),
    ("budget-10**30", {"free_slot_use": "new_seed", "budget": BIG}, "budget", "less than or equal to 4096"),
    ("sweep-lr-inf", {"lr": "inf"}, "lr", "expected a finite number"),
]

EVAL_FORM = [
    ("n-zero", {"n": "0"}, "n", "must lie in 1..1024"),
    ("n-10**30", {"n": BIG}, "n", "must lie in 1..1024"),
    ("n-abc", {"n": "abc"}, "n", "Enter a whole number"),
    ("problems-zero", {"problems": "0"}, "problems", "empty dataset"),
    ("problems-10**30", {"problems": BIG}, "problems", "must be at most 10000"),
    ("problems-negative", {"problems": "-5"}, "problems", "must be at least 1"),
    ("k-words", {"k": "1,two"}, "k", "comma-separated integers"),
    ("k-zero", {"k": "0"}, "k", "every k must lie in 1..n"),
    ("k-huge", {"k": BIG}, "k", "every k must lie in 1..n"),
    ("k-5000-digits", {"k": HUGE}, "k", "comma-separated integers"),
    ("n-5000-digits", {"n": HUGE}, "n", "Enter a whole number"),
    ("temperature-nan", {"temperature": "nan"}, "temperature", "Enter a number"),
    ("temperature-inf", {"temperature": "inf"}, "temperature", "Enter a number"),
    ("temperature-zero", {"temperature": "0"}, "temperature", "must be a finite number > 0"),
    ("top-p-two", {"top_p": "2"}, "top_p", "must lie in (0, 1]"),
    ("max-new-tokens-zero", {"max_new_tokens": "0"}, "max_new_tokens", "must lie in 1..8192"),
    ("max-new-tokens-10**30", {"max_new_tokens": BIG}, "max_new_tokens", "must lie in 1..8192"),
    ("keep-completions-17", {"keep_completions": "17"}, "keep_completions", "must lie in 0..16"),
    ("seed-negative", {"seed": "-1"}, "seed", "must lie in 0..4294967295"),
    ("seed-2**63", {"seed": str(2**63)}, "seed", "must lie in 0..4294967295"),
    ("models-none", {"models": []}, "models", "choose at least one model"),
    ("models-gone-checkpoint", {"models": ["ckpt:424242"]}, "models", "checkpoint 424242 no longer exists"),
    ("models-twice", {"models": ["base", "base"]}, "models", "a model is listed twice"),
    ("models-a-path", {"models": ["../../etc"]}, "models", "unknown model '../../etc'"),
    ("task-unknown", {"task": "chess"}, "task", "must be arithmetic, countdown, humaneval, ifbench, file, dataset:<name> or reasoning_gym:<task>"),
    ("data-path-required", {"task": "file", "data_path": ""}, "data_path", "required when task is 'file'"),
    ("data-path-etc-passwd", {"task": "file", "data_path": "/etc/passwd"}, "data_path", "must lie inside the allowed folders"),
    ("data-path-a-folder", {"task": "file", "data_path": "/root"}, "data_path", "must lie inside the allowed folders"),
    ("data-path-nul", {"task": "file", "data_path": "{tmp}/a\x00.jsonl"}, "data_path", FORM_NUL),
    ("data-path-not-parquet", {"task": "file", "data_path": "{tmp}/fake.parquet"}, "data_path",
     "not a readable Parquet file"),
    ("rewards-popen", {"rewards": POPEN}, "rewards", DOTTED),
    ("rewards-builtins-eval", {"rewards": EVAL}, "rewards", "verifier 'builtins:eval'"),
    ("rewards-invalid-json", {"rewards": "[{"}, "rewards", "not valid JSON"),
    ("rewards-judge-base-url", {"rewards": judge(base_url="http://attacker.example")}, "rewards",
     "unknown parameter(s) ['base_url']"),
    ("name-too-long", {"name": TOO_LONG}, "name", "at most 200 characters"),
]

PROJECT_FORM = [
    ("slash", "a/b", "name", "a project name starts with a letter or digit"),
    ("space", "my project", "name", "a project name starts with a letter or digit"),
    ("151-chars", "p" * 151, "name", "at most 150 characters; got 151"),
    ("empty", "", "name", "give the project a name"),
    ("dotdot", "../etc", "name", "a project name starts with a letter or digit"),
    ("reserved", "default", "name", "'default' is taken or reserved; choose another name"),
]

MEMBER_FORM = [
    ("role-owner", {"username": "alice", "role": "owner"}, "role", "one of viewer, member, admin; got 'owner'"),
    ("role-empty", {"username": "alice", "role": ""}, "role", "one of viewer, member, admin"),
    ("username-unknown", {"username": "nobody", "role": "member"}, "username", "no active user 'nobody'"),
    ("username-empty", {"username": "", "role": "member"}, "username", "give the username"),
    ("username-10000-chars", {"username": "u" * 10000, "role": "member"}, "username", "no active user"),
]

# the pages' JSON and htmx endpoints: 400 with a message "PARAMETER: ..."
WEB_GET = [
    ("run-live-since-abc", "/runs/{run}/live.json?since=abc", "since", "expected an integer step"),
    ("run-live-since-a-fraction", "/runs/{run}/live.json?since=1.5", "since", "expected an integer step"),
    ("run-live-samples-since-x", "/runs/{run}/live.json?samples_since=x", "samples_since", "expected an integer"),
    ("sweep-live-since-x:y", "/sweeps/{sweep}/live.json?since=x:y", "since", "expected run:step pairs"),
    ("sweep-live-since-no-colon", "/sweeps/{sweep}/live.json?since=12", "since", "expected run:step pairs"),
    ("sweep-live-since-negative", "/sweeps/{sweep}/live.json?since=1:-5", "since", "expected run:step pairs"),
    ("sweep-live-width-negative", "/sweeps/{sweep}/live.json?width=-1", "width", "expected a whole number in [1, "),
    ("sweep-live-width-zero", "/sweeps/{sweep}/live.json?width=0", "width", "expected a whole number in [1, "),
    ("sweep-live-width-abc", "/sweeps/{sweep}/live.json?width=abc", "width", "expected a whole number"),
    ("sweep-live-width-huge", "/sweeps/{sweep}/live.json?width=" + BIG, "width", "expected a whole number"),
    ("sweep-samples-step-zz", "/sweeps/{sweep}/samples/?step=zz", "step", "give the step"),
    ("sweep-samples-no-step", "/sweeps/{sweep}/samples/", "step", "give the step"),
    ("sweep-samples-step-a-fraction", "/sweeps/{sweep}/samples/?step=0.5", "step", "give the step"),
    ("eval-export-table-nope", "/evals/{job}/export.csv?table=nope", "table", "must be curves or problems"),
]

# --- the token API ---------------------------------------------------------------------------------------------

CONFIG = {"preset": "grpo", "model_path": "{model}", "total_steps": 6, "prompts_per_step": 4, "group_size": 4}
CONFIG_TEXT = json.dumps(CONFIG)


def run_body(**changes) -> dict:
    return {"config": {**CONFIG, **changes}}


def sweep_body(**fields) -> dict:
    return {"config": CONFIG, "seeds": [1, 2], "concurrency": 1, **fields}


def eval_body(**fields) -> dict:
    return {"run": "{run}", "models": ["base"], "problems": 4, "n": 2, **fields}


API_POST = [
    # runs
    ("runs-malformed-json", "/runs", '{"config": {', "body", "JSON"),
    ("runs-json-array", "/runs", "[1, 2]", "body", "object"),
    ("runs-no-config", "/runs", {"name": "r"}, "config", "required"),
    ("runs-config-a-string", "/runs", {"config": "lr=1"}, "config", "dictionary"),
    ("runs-config-a-list", "/runs", {"config": [1]}, "config", "dictionary"),
    ("runs-lr-NaN-literal", "/runs", '{"config": %s}' % CONFIG_TEXT.replace('"preset"', '"lr": NaN, "preset"'),
     "lr", "expected a finite number"),
    ("runs-temperature-Infinity-literal", "/runs",
     '{"config": %s}' % CONFIG_TEXT.replace('"preset"', '"temperature": Infinity, "preset"'),
     "temperature", "expected a finite number"),
    ("runs-total-steps-10**30", "/runs", run_body(total_steps=10**30), "total_steps", "must be in [1, 1000000]"),
    ("runs-seed-2**63", "/runs", run_body(seed=2**63), "seed", "must be in [0, 4294967295]"),
    ("runs-seed-negative", "/runs", run_body(seed=-1), "seed", "must be in [0, 4294967295]"),
    ("runs-group-size-abc", "/runs", run_body(group_size="abc"), "group_size", "expected an integer"),
    ("runs-group-size-true", "/runs", run_body(group_size=True), "group_size", "expected an integer"),
    ("runs-preset-unknown", "/runs", run_body(preset="ppo"), "preset", "unknown preset"),
    ("runs-model-path-etc", "/runs", run_body(model_path="/etc"), "model_path", "must lie inside the allowed folders"),
    ("runs-model-path-root", "/runs", run_body(model_path="/root"), "model_path", "/root"),
    ("runs-model-path-not-text", "/runs", run_body(model_path=["/etc"]), "model_path", "expected a string"),
    ("runs-model-path-nul", "/runs", run_body(model_path="{model}\x00"), "model_path", NUL),
    ("runs-data-path-nul", "/runs", run_body(task="file", data_path="{tmp}/\x00.jsonl"), "data_path", NUL),
    ("runs-data-path-nul-escaped", "/runs", '{"config": %s}' % CONFIG_TEXT.replace(
        '"preset"', '"task": "file", "data_path": "/data/\\u0000x.jsonl", "preset"'), "data_path", NUL),
    ("runs-data-path-etc-passwd", "/runs", run_body(task="file", data_path="/etc/passwd"), "data_path",
     "must lie inside the allowed folders"),
    ("runs-rewards-popen", "/runs", run_body(rewards=json.loads(POPEN)), "rewards", DOTTED),
    ("runs-rewards-builtins-eval", "/runs", run_body(rewards=json.loads(EVAL)), "rewards", "builtins:eval"),
    ("runs-rewards-judge-base-url", "/runs", run_body(rewards=json.loads(judge(base_url="http://x"))), "rewards",
     "unknown parameter(s) ['base_url']"),
    ("runs-rewards-judge-api-key-env", "/runs", run_body(rewards=json.loads(judge(api_key_env="HOME"))), "rewards",
     "unknown parameter(s) ['api_key_env']"),
    ("runs-rewards-judge-local-model", "/runs", run_body(rewards=json.loads(judge(local_model_path="/m"))),
     "rewards", "unknown parameter(s) ['local_model_path']"),
    ("runs-unknown-knob", "/runs", run_body(lrr=1e-4), "lrr", "unknown key 'lrr'"),
    ("runs-name-too-long", "/runs", {**run_body(), "name": TOO_LONG}, "name", "at most 200 characters"),
    ("runs-project-unknown", "/runs", {**run_body(), "project": "nope"}, "project", "no project 'nope'"),
    ("runs-from-checkpoint-huge", "/runs", {**run_body(), "from_checkpoint": 10**30}, "from_checkpoint",
     "no checkpoint"),
    ("runs-from-checkpoint-abc", "/runs", {**run_body(), "from_checkpoint": "abc"}, "from_checkpoint", "integer"),
    # sweeps
    ("sweeps-no-config", "/sweeps", {"seeds": 2}, "config", "required"),
    ("sweeps-config-lr-NaN", "/sweeps", '{"config": %s}' % CONFIG_TEXT.replace('"preset"', '"lr": NaN, "preset"'),
     "lr", "expected a finite number"),
    ("sweeps-seeds-duplicate", "/sweeps", sweep_body(seeds=[1, 1]), "seeds", "seeds must be distinct"),
    ("sweeps-seeds-count-10**6", "/sweeps", sweep_body(seeds=10**6), "seeds", "a count of seeds must lie in"),
    ("sweeps-seeds-300", "/sweeps", sweep_body(seeds=list(range(300))), "seeds", "at most 256"),
    ("sweeps-seeds-negative", "/sweeps", sweep_body(seeds=[-1]), "seeds", "seed -1 must be in"),
    ("sweeps-seeds-2**63", "/sweeps", sweep_body(seeds=[2**63]), "seeds", "must be in [0, 4294967295]"),
    ("sweeps-seeds-words", "/sweeps", sweep_body(seeds="a,b"), "seeds", "whole numbers"),
    ("sweeps-seeds-a-float", "/sweeps", sweep_body(seeds=1.5), "seeds", "fractional part"),
    ("sweeps-concurrency-zero", "/sweeps", sweep_body(concurrency=0), "concurrency", "greater than or equal to 1"),
    ("sweeps-concurrency-abc", "/sweeps", sweep_body(concurrency="abc"), "concurrency", "integer"),
    ("sweeps-concurrency-10**30", "/sweeps", sweep_body(concurrency=10**30), "concurrency", "less than or equal"),
    ("sweeps-concurrency-Infinity", "/sweeps", '{"config": %s, "concurrency": Infinity}' % CONFIG_TEXT,
     "concurrency", "finite number"),
    ("sweeps-grid-1000x1000", "/sweeps",
     sweep_body(seeds=[1], grid={"lr": [i * 1e-7 for i in range(1, 1001)], "eps_high": [i / 1e4 for i in range(1, 1001)]}),
     "grid", "1000000 grid points"),
    ("sweeps-grid-not-lists", "/sweeps", sweep_body(grid={"lr": "1e-4"}), "grid", "list"),
    ("sweeps-grid-seed", "/sweeps", sweep_body(grid={"seed": [1, 2]}), "grid", "seed: cannot be varied"),
    ("sweeps-model-path-nul", "/sweeps", {**sweep_body(), "config": {**CONFIG, "model_path": "{model}\x00"}},
     "model_path", NUL),
    ("sweeps-policy-unknown", "/sweeps", sweep_body(policy={"name": "nope"}), "policy.name", "nope"),
    ("sweeps-free-slot-use-unknown", "/sweeps", sweep_body(free_slot_use="teleport"), "free_slot_use",
     "must be one of"),
    ("sweeps-extend-steps-negative", "/sweeps", sweep_body(extend_steps=-1), "extend_steps", "greater than or equal"),
    ("sweeps-budget-10**30", "/sweeps", sweep_body(free_slot_use="new_seed", budget=10**30), "budget",
     "less than or equal"),
    ("sweeps-budget-below-the-seeds", "/sweeps", sweep_body(free_slot_use="new_seed", budget=1), "budget",
     "must be at least the"),
    ("sweeps-budget-without-new-seeds", "/sweeps", sweep_body(budget=8), "budget", "only used when freed slots"),
    ("sweeps-alert-bounds-text", "/sweeps", sweep_body(alert_bounds={"entropy_min": "low"}), "alert_bounds",
     "expected a finite number"),
    # evals
    ("evals-no-origin", "/evals", {"models": ["base"]}, "run", "give the run or the sweep"),
    ("evals-run-and-sweep", "/evals", eval_body(sweep="{sweep}"), "run", "give the run or the sweep"),
    ("evals-run-10**30", "/evals", eval_body(run=10**30), "run", "no run"),
    ("evals-run-missing", "/evals", eval_body(run=987654), "run", "no run 987654"),
    ("evals-n-zero", "/evals", eval_body(n=0), "n", "must lie in 1..1024"),
    ("evals-n-10**30", "/evals", eval_body(n=10**30), "n", "must lie in 1..1024"),
    ("evals-k-zero", "/evals", eval_body(k=[0]), "k", "every k must lie in 1..n"),
    ("evals-k-words", "/evals", eval_body(k="abc"), "k", "list"),
    ("evals-temperature-NaN", "/evals", json.dumps(eval_body(temperature=0.5)).replace("0.5", "NaN"),
     "temperature", "must be a finite number > 0"),
    ("evals-temperature-Infinity", "/evals", json.dumps(eval_body(temperature=0.5)).replace("0.5", "Infinity"),
     "temperature", "must be a finite number > 0"),
    ("evals-top-p-NaN", "/evals", json.dumps(eval_body(top_p=0.5)).replace("0.5", "NaN"), "top_p",
     "must lie in (0, 1]"),
    ("evals-seed-2**63", "/evals", eval_body(seed=2**63), "seed", "must lie in 0..4294967295"),
    ("evals-seed-negative", "/evals", eval_body(seed=-1), "seed", "must lie in 0..4294967295"),
    ("evals-problems-10**30", "/evals", eval_body(problems=10**30), "problems", "must be at most 10000"),
    ("evals-models-empty", "/evals", eval_body(models=[]), "models", "choose at least one model"),
    ("evals-rewards-builtins-eval", "/evals", eval_body(rewards=json.loads(EVAL)), "rewards", "builtins:eval"),
    ("evals-keep-completions-10**30", "/evals", eval_body(keep_completions=10**30), "keep_completions",
     "must lie in 0..16"),
    ("evals-max-new-tokens-negative", "/evals", eval_body(max_new_tokens=-1), "max_new_tokens", "must lie in 1..8192"),
    ("evals-task-unknown", "/evals", eval_body(task="chess"), "task", "must be arithmetic, countdown, humaneval, ifbench, file"),
    ("evals-task-reasoning-gym-unknown", "/evals", eval_body(task="reasoning_gym:chess"), "task",
     "reasoning-gym has no task 'chess'"),
    ("evals-data-path-etc-shadow", "/evals", eval_body(task="file", data_path="/etc/shadow"), "data_path",
     "must lie inside the allowed folders"),
    ("evals-data-path-nul", "/evals", eval_body(task="file", data_path="{tmp}/\x00.jsonl"), "data_path", NUL),
    ("datasets-register-path-nul", "/datasets/register", {"name": "d", "path": "{tmp}/\x00.jsonl"}, "path", NUL),
    # projects and members
    ("projects-slash", "/projects", {"name": "a/b"}, "name", "a project name starts with"),
    ("projects-151-chars", "/projects", {"name": "p" * 151}, "name", "at most 150 characters"),
    ("projects-space", "/projects", {"name": "my project"}, "name", "a project name starts with"),
    ("projects-a-number", "/projects", {"name": 123}, "name", "string"),
    ("projects-no-name", "/projects", {}, "name", "required"),
    ("projects-json-array", "/projects", "[]", "body", "object"),
    ("members-role-owner", "/projects/alice/members", {"username": "ada", "role": "owner"}, "role",
     "one of viewer, member, admin; got 'owner'"),
    ("members-username-unknown", "/projects/alice/members", {"username": "nobody", "role": "member"}, "username",
     "no active user 'nobody'"),
    ("members-username-empty", "/projects/alice/members", {"username": " ", "role": "member"}, "username",
     "give the username"),
    ("members-no-role", "/projects/alice/members", {"username": "ada"}, "role", "required"),
]

API_GET = [
    ("runs-status-nope", "/runs", {"status": "nope"}, "status", "got 'nope'"),
    ("runs-limit-zero", "/runs", {"limit": 0}, "limit", "greater than or equal to 1"),
    ("runs-limit-abc", "/runs", {"limit": "abc"}, "limit", "integer"),
    ("sweeps-limit-huge", "/sweeps", {"limit": 10**6}, "limit", "less than or equal to 1000"),
    ("metrics-since-step-negative", "/runs/{run}/metrics", {"since_step": -1}, "since_step", "greater than or equal"),
    ("metrics-since-step-10**30", "/runs/{run}/metrics", {"since_step": 10**30}, "since_step", "less than or equal"),
    ("metrics-max-points-5", "/runs/{run}/metrics", {"max_points": 5}, "max_points", "greater than or equal to 10"),
]

# --- the training CLI ------------------------------------------------------------------------------------------

CLI_RUN = ["run", "{tmp}/ok.yaml", "--out", "{tmp}/o", "--set"]
CLI_EVAL = ["eval", "--model", "{model}", "--data", "arithmetic"]
CLI = [
    ("set-lr-inf", CLI_RUN + ["lr=inf"], "lr", "expected a finite number"),
    ("set-lr-nan", CLI_RUN + ["lr=nan"], "lr", "expected a finite number"),
    ("set-total-steps-huge", CLI_RUN + [f"total_steps={BIG}"], "total_steps", "must be in [1, 1000000]"),
    ("set-seed-negative", CLI_RUN + ["seed=-1"], "seed", "must be in [0, 4294967295]"),
    ("set-seed-5000-digits", CLI_RUN + [f"seed={HUGE}"], "seed", "expected an integer"),
    ("set-group-size-abc", CLI_RUN + ["group_size=abc"], "group_size", "expected an integer"),
    ("set-preset-unknown", CLI_RUN + ["preset=ppo"], "preset", "unknown preset"),
    ("set-model-path-etc", CLI_RUN + ["model_path=/etc"], "model_path", "not a model folder (no config.json): /etc"),
    ("set-model-path-dotdot", CLI_RUN + ["model_path=../.."], "model_path", "../.."),
    ("set-model-path-nul", CLI_RUN + ["model_path={model}\x00"], "model_path", NUL),
    ("set-data-path-nul", CLI_RUN + ["task=file", "data_path={tmp}/\x00.jsonl"], "data_path", NUL),
    ("set-data-path-required", CLI_RUN + ["task=file"], "data_path", "required when task is 'file'"),
    ("set-data-path-etc-passwd", CLI_RUN + ["task=file", "data_path=/etc/passwd"], "data_path",
     "must be a .jsonl, .parquet or .csv"),
    ("set-rewards-builtins-eval", CLI_RUN + [f"rewards={EVAL}"], "rewards", "builtins:eval"),
    ("set-rewards-judge-base-url", CLI_RUN + [f"rewards={judge(base_url='http://x')}"], "rewards",
     "unknown parameter(s) ['base_url']"),
    ("set-rewards-judge-api-key-env", CLI_RUN + [f"rewards={judge(api_key_env='HOME')}"], "rewards",
     "unknown parameter(s) ['api_key_env']"),
    ("set-rewards-invalid-json", CLI_RUN + ["rewards=[{"], "rewards", "expected a JSON list"),
    ("set-eval-k-zero", CLI_RUN + ["eval_k=[0]"], "eval_k", "integers >= 1"),
    ("config-json-list", ["run", "{tmp}/list.json", "--out", "{tmp}/o"], "config", "expected a mapping of knobs"),
    ("config-too-large", ["run", "{tmp}/large.yaml", "--out", "{tmp}/o"], "config", "larger than 100 kB"),
    ("config-a-folder", ["run", "{tmp}", "--out", "{tmp}/o"], "config", "cannot read"),
    ("config-unknown-key", ["run", "{tmp}/typo.yaml", "--out", "{tmp}/o"], "lrr", "unknown key 'lrr'"),
    ("eval-n-zero", CLI_EVAL + ["--n", "0", "--k", "1"], "--n", "must lie in [1, 1024]"),
    ("eval-n-huge", CLI_EVAL + ["--n", "100000000", "--k", "1"], "--n", "must lie in [1, 1024]"),
    ("eval-n-abc", CLI_EVAL + ["--n", "abc"], "--n", "invalid int value"),
    ("eval-temperature-nan", CLI_EVAL + ["--temperature", "nan"], "--temperature", "finite number > 0"),
    ("eval-top-p-two", CLI_EVAL + ["--top-p", "2"], "--top-p", "must lie in (0, 1]"),
    ("eval-max-new-tokens-zero", CLI_EVAL + ["--max-new-tokens", "0"], "--max-new-tokens", "must lie in [1, 8192]"),
    ("eval-problems-zero", CLI_EVAL + ["--problems", "0"], "--problems", "must lie in [1, 10000]"),
    ("eval-keep-completions-negative", CLI_EVAL + ["--keep-completions", "-1"], "--keep-completions",
     "must be >= 0"),
    ("eval-seed-negative", CLI_EVAL + ["--seed", "-1"], "--seed", "must lie in [0, 4294967295]"),
    ("eval-model-etc", ["eval", "--model", "/etc", "--data", "arithmetic"], "--model", "not a model folder"),
    ("eval-data-etc-passwd", ["eval", "--model", "{model}", "--data", "/etc/passwd"], "--data",
     "^must end in .jsonl, .parquet or .csv: /etc/passwd"),  # not "data_path: must ..." under --data
    ("eval-data-not-parquet", ["eval", "--model", "{model}", "--data", "{tmp}/fake.parquet"], "--data",
     "not a readable Parquet file"),
    ("eval-rewards-popen", CLI_EVAL + ["--rewards", POPEN], "--rewards", DOTTED),
]


def _cli_existing() -> list[Case]:
    """tests/training/test_cli.py's table, its expected "error: FIELD: message" split into field and message."""
    cases = []
    for i, (argv, line) in enumerate(CLI_BAD_INPUTS):
        field, _, fragment = line.removeprefix("error: ").partition(": ")
        cases.append(Case(f"cli-table-{i}-{field}", "cli", argv, field, fragment))
    return cases


CASES: list[Case] = [
    *(Case(f"web-run-{i}", "web_run", d, f, m) for i, d, f, m in RUN_FORM),
    *(Case(f"web-sweep-{i}", "web_sweep", d, f, m) for i, d, f, m in SWEEP_FORM),
    *(Case(f"web-eval-{i}", "web_eval", d, f, m) for i, d, f, m in EVAL_FORM),
    *(Case(f"web-project-{i}", "web_project", d, f, m) for i, d, f, m in PROJECT_FORM),
    *(Case(f"web-member-{i}", "web_member", d, f, m) for i, d, f, m in MEMBER_FORM),
    *(Case(f"web-get-{i}", "web_get", d, f, m) for i, d, f, m in WEB_GET),
    *(Case(f"api-post-{i}", "api_post", (p, d), f, m) for i, p, d, f, m in API_POST),
    *(Case(f"api-get-{i}", "api_get", (p, d), f, m) for i, p, d, f, m in API_GET),
    *(Case(f"cli-{i}", "cli", d, f, m) for i, d, f, m in CLI),
    *_cli_existing(),
]

# --- sending -------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: int                 # the HTTP status, or the CLI's exit code
    errors: dict[str, str]      # field -> message
    crash: str = ""             # a server error: the exception (500) or the CLI's traceback


@dataclass
class World:
    web: Client
    api: Api
    fill: dict[str, str]
    run: Run

    def filled(self, value):
        """``value`` with {tmp}, {model}, {run}, {sweep} and {job} filled in (a whole "{run}" becomes the id)."""
        if isinstance(value, str):
            if value in ("{run}", "{sweep}", "{job}"):
                return int(self.fill[value[1:-1]])
            for key, text in self.fill.items():
                value = value.replace("{" + key + "}", text)
            return value
        if isinstance(value, list):
            return [self.filled(v) for v in value]
        if isinstance(value, dict):
            return {k: self.filled(v) for k, v in value.items()}
        return value


def _web(response) -> Outcome:
    crash = repr(response.exc_info[1]) if response.status_code >= 500 and getattr(response, "exc_info", None) else ""
    errors = {f: html.unescape(m) for f, m in field_errors(response).items()}
    return Outcome(response.status_code, errors, crash or ("HTTP 500" if response.status_code >= 500 else ""))


def send_run_form(w: World, data) -> Outcome:
    return _web(w.web.post("/runs/new/", form_post(**{"model_path": w.fill["model"], **w.filled(data)})))


def send_sweep_form(w: World, data) -> Outcome:
    return _web(w.web.post("/sweeps/new/", sweep_form_data(w.fill["model"], **w.filled(data))))


def send_eval_form(w: World, data) -> Outcome:
    return _web(w.web.post(f"/evals/new/?run={w.run.pk}", eval_form_data(w.run, **w.filled(data))))


def send_project_form(w: World, name) -> Outcome:
    return _web(w.web.post("/projects/", {"name": name}))


def send_member_form(w: World, data) -> Outcome:
    return _web(w.web.post("/projects/ada/", data))  # ada's personal project: she is its admin


def send_web_get(w: World, url) -> Outcome:
    response = w.web.get(w.filled(url))
    if response.status_code >= 500:
        return _web(response)
    if response["Content-Type"].startswith("application/json"):
        text = response.json().get("error", "")
    else:
        text = html.unescape(re.sub(r"<[^>]+>", "", response.content.decode())).strip()
    field, sep, message = text.partition(": ")
    return Outcome(response.status_code, {field: message} if sep else {})


def _api(response) -> Outcome:
    if response.status_code >= 500:
        return _web(response)
    try:
        errors = response.json().get("errors", {})
    except ValueError:
        errors = {}
    return Outcome(response.status_code, errors if isinstance(errors, dict) else {})


def send_api_post(w: World, path_and_body) -> Outcome:
    path, body = path_and_body
    if isinstance(body, str):
        raw = body.replace('"{run}"', w.fill["run"]).replace('"{sweep}"', w.fill["sweep"])
        return _api(w.api.post(path, raw=raw.replace("{model}", w.fill["model"])))
    return _api(w.api.post(path, w.filled(body)))


def send_api_get(w: World, path_and_params) -> Outcome:
    path, params = path_and_params
    return _api(w.api.get(w.filled(path), **params))


def send_cli(w: World, argv) -> Outcome:
    """``python -m training`` in-process, as tests/training/test_cli.py runs it: its exit code and its
    "error: FIELD: message" lines (argparse's own say "error: argument FIELD: message")."""
    import contextlib
    import io
    import traceback

    from training.__main__ import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main([w.filled(a) for a in argv])
        except SystemExit as exc:  # argparse refusing a value
            code = exc.code
        except Exception:  # noqa: BLE001 - a traceback is what this test looks for
            return Outcome(1, {}, traceback.format_exc())
    lines = [line for line in err.getvalue().splitlines() if "error: " in line]
    errors = {}
    for line in lines:
        field, _, message = line.split("error: ", 1)[1].removeprefix("argument ").partition(": ")
        errors[field] = message
    crash = "Traceback" if "Traceback" in err.getvalue() else ""
    if len(lines) != 1:
        errors["(lines)"] = f"{len(lines)} error lines: {err.getvalue()!r}"
    return Outcome(code, errors, crash)


SENDERS = {"web_run": send_run_form, "web_sweep": send_sweep_form, "web_eval": send_eval_form,
           "web_project": send_project_form, "web_member": send_member_form, "web_get": send_web_get,
           "api_post": send_api_post, "api_get": send_api_get, "cli": send_cli}

TALLY = {"tried": 0, "field_errors": 0, "server_errors": 0}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """ada's and alice's passwords hashed cheaply: the default hasher costs about half a second per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(client_in, model_dir, tmp_path, django_user_model):
    from webapp.evals import services as eval_services
    from webapp.runs import services as run_services
    from webapp.sweeps import services as sweep_services

    client_in.raise_request_exception = False  # a 500 is counted, not raised
    alice, token = _user_with_token(django_user_model, "alice")
    join_default_project(alice)
    api_client = Client(raise_request_exception=False)
    config = {**CONFIG, "model_path": model_dir}
    run = run_services.run_create(config=config)  # in the default project: ada and alice see it
    sweep = sweep_services.sweep_create(config=config, seeds=[0], concurrency=1)
    job = eval_services.eval_create(run=run, models=["base"], task="arithmetic", problems=4, n=2)
    bad_files(tmp_path)
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "large.yaml").write_text("# padding\n" * 20_000)
    (tmp_path / "typo.yaml").write_text("lrr: 0.001\n")
    (tmp_path / "fake.parquet").write_text("not parquet at all\n")
    fill = {"tmp": str(tmp_path), "model": model_dir, "run": str(run.pk), "sweep": str(sweep.pk), "job": str(job.pk)}
    return World(client_in, Api(api_client, token), fill, run)


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in (Run, Sweep, EvalJob, Project, Membership)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_is_a_field_error_and_creates_nothing(case: Case, world: World,
                                                          django_capture_on_commit_callbacks):
    before = row_counts()
    TALLY["tried"] += 1
    with django_capture_on_commit_callbacks() as callbacks:
        outcome = SENDERS[case.via](world, case.data)
    if outcome.crash or outcome.status >= 500:
        TALLY["server_errors"] += 1
    assert not outcome.crash and outcome.status < 500, outcome.crash or outcome.status
    assert outcome.status == (2 if case.entry == "cli" else 400), (outcome.status, outcome.errors)
    message = outcome.errors.get(case.field)
    fragment = world.filled(case.fragment)
    assert message is not None, outcome.errors
    if fragment.startswith("^"):
        assert message.startswith(fragment[1:]), outcome.errors
    else:
        assert fragment in message, outcome.errors
    assert "(lines)" not in outcome.errors, outcome.errors  # the CLI: exactly one error line
    assert row_counts() == before and callbacks == []  # nothing created, nothing enqueued
    if case.entry == "cli":
        assert not os.path.exists(os.path.join(world.fill["tmp"], "o"))  # nothing started
    TALLY["field_errors"] += 1


def test_the_table_is_large_and_the_summary_is_printed(capsys):
    by_entry = {e: sum(c.entry == e for c in CASES) for e in ("web", "api", "cli")}
    assert len(CASES) >= 100 and min(by_entry.values()) >= 20, by_entry
    assert len({c.id for c in CASES}) == len(CASES)
    with capsys.disabled():
        print(f"\nbad inputs: {TALLY['tried']} tried, {TALLY['field_errors']} field errors, "
              f"{TALLY['server_errors']} server errors  (cases: {len(CASES)}: {by_entry})")
    assert TALLY["server_errors"] == 0
    if TALLY["tried"] == len(CASES):  # the whole table ran (not a -k selection)
        assert TALLY["field_errors"] == len(CASES)
