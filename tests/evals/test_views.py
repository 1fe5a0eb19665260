"""Evaluation views and the runs pages' evaluation pieces: form errors per field, exports, a problem's
completions, "New run from this checkpoint" and the lineage it records."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from tests.evals.conftest import make_job_with_results, model_keys
from webapp.evals.models import EvalJob
from webapp.runs.models import Run
from webapp.projects.services import default_project

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def form_data(run, **overrides) -> dict:
    data = {"models": model_keys(run), "task": "arithmetic", "problems": "5", "n": "8", "k": "", "temperature": "1.0",
            "top_p": "1.0", "max_new_tokens": "8", "seed": "0", "keep_completions": "2", "rewards": "",
            "data_path": "", "prompt_field": "prompt", "answer_field": "answer", "name": ""}
    data.update(overrides)
    return data


def test_the_form_is_prefilled_from_the_run(client_in, run_with_checkpoints):
    run = run_with_checkpoints
    resp = client_in.get(reverse("evals:new") + f"?run={run.pk}")
    assert resp.status_code == 200
    html = resp.content.decode()
    for c in run.checkpoints.all():
        assert f'value="ckpt:{c.pk}"' in html
    form = resp.context["form"]
    # ticked by default: the base model and the run's last checkpoint
    assert form.initial["models"] == ["base", f"ckpt:{run.checkpoints.get(step=4).pk}"]
    assert form.initial["task"] == "arithmetic"


@pytest.mark.parametrize("overrides, field, words", [
    ({"n": "4", "k": "1,2,8"}, "k", "every k must lie in 1..n (n = 4)"),
    ({"k": "1,two"}, "k", "comma-separated integers"),
    ({"n": "0"}, "n", "must lie in 1..1024"),
    ({"models": ["ckpt:424242"]}, "models", "checkpoint 424242 no longer exists"),
    ({"rewards": "[{"}, "rewards", "not valid JSON"),
    ({"problems": "0"}, "problems", "empty dataset"),
])
def test_bad_input_is_shown_on_its_field_and_nothing_is_created(client_in, run_with_checkpoints, overrides, field,
                                                                words):
    resp = client_in.post(reverse("evals:new") + f"?run={run_with_checkpoints.pk}",
                          form_data(run_with_checkpoints, **overrides))
    assert resp.status_code == 400
    html = resp.content.decode()
    assert f'data-field="{field}"' in html and words in html
    assert EvalJob.objects.count() == 0


def test_a_valid_form_creates_the_job_and_opens_its_page(client_in, run_with_checkpoints):
    resp = client_in.post(reverse("evals:new") + f"?run={run_with_checkpoints.pk}",
                          form_data(run_with_checkpoints, k="1,4", n="4"))
    job = EvalJob.objects.get()
    assert resp.status_code == 302 and resp["Location"] == reverse("evals:detail", args=[job.pk])
    assert (job.n, job.ks, job.models.count(), job.keep_completions) == (4, [1, 4], 3, 2)
    page = client_in.get(resp["Location"])
    assert page.status_code == 200 and b'id="progress"' in page.content
    # its progress is a fragment htmx polls; once the job ended, the answer makes htmx reload the page
    poll = client_in.get(reverse("evals:state", args=[job.pk]))
    assert poll.status_code == 200 and b'hx-trigger="every 1s"' in poll.content and "HX-Refresh" not in poll
    assert b'id="eval-status"' in poll.content and b'hx-swap-oob="true"' in poll.content
    EvalJob.objects.filter(pk=job.pk).update(status="cancelled")
    done = client_in.get(reverse("evals:state", args=[job.pk]))
    assert done["HX-Refresh"] == "true" and b"hx-trigger" not in done.content


def test_exports_hold_curves_and_per_problem_counts(client_in, run_with_checkpoints):
    job = make_job_with_results(run_with_checkpoints)
    payload = client_in.get(reverse("evals:export", args=[job.pk, "json"])).json()
    assert payload["job"]["n"] == 4
    base, ckpt = payload["models"]
    assert base["pass_at_k"]["4"] == pytest.approx(0.4) and ckpt["pass_at_k"]["4"] == pytest.approx(0.6)
    assert [(p["index"], p["c"]) for p in ckpt["per_problem"]] == [(0, 0), (1, 4), (2, 2), (3, 3), (4, 0)]

    resp = client_in.get(reverse("evals:export", args=[job.pk, "csv"]))
    assert resp["Content-Type"] == "text/csv" and "attachment" in resp["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(resp.content.decode())))
    assert {(r["model"], r["k"]) for r in rows} == {(m, k) for m in ("base", "step 4") for k in ("1", "2", "4")}
    by = {(r["model"], r["k"]): float(r["pass_at_k"]) for r in rows}
    assert by[("step 4", "1")] == pytest.approx(9 / 20)

    resp = client_in.get(reverse("evals:export", args=[job.pk, "csv"]) + "?table=problems")
    rows = list(csv.DictReader(io.StringIO(resp.content.decode())))
    assert len(rows) == 10 and {"model", "problem", "n", "c"} <= set(rows[0])
    assert client_in.get(reverse("evals:export", args=[job.pk, "xml"])).status_code == 404


def test_the_page_has_the_chart_data_coverage_and_a_problem_fragment(client_in, run_with_checkpoints):
    job = make_job_with_results(run_with_checkpoints)
    resp = client_in.get(reverse("evals:detail", args=[job.pk]))
    html = resp.content.decode()
    chart = resp.context["chart"]
    assert [s["name"] for s in chart] == ["base", "step 4"] and chart[0]["k"] == [1, 2, 4]
    assert resp.context["coverage"]["counts"] == {"a_only": 1, "b_only": 2, "both": 1, "neither": 1}
    assert 'id="coverage"' in html and "vendor/plotly/plotly-basic.min." in html  # (a hashed name once collected)
    frag = client_in.get(reverse("evals:problem", args=[job.pk, 1])).content.decode()
    assert "1+0=" in frag and "4 / 4 correct" in frag and "0 / 4 correct" in frag
    assert client_in.get(reverse("evals:problem", args=[job.pk, 99])).status_code == 404


def test_new_run_from_a_checkpoint_records_its_parent_and_shows_the_lineage(client_in, run_with_checkpoints):
    parent = run_with_checkpoints
    ckpt = parent.checkpoints.get(step=4)
    resp = client_in.get(reverse("runs:new") + f"?from_checkpoint={ckpt.pk}")
    assert resp.status_code == 200
    form = resp.context["form"]
    assert form["model_path"].value() == ckpt.path
    assert form["preset"].value() == "dapo" and form["total_steps"].value() == "4" and form["seed"].value() == "7"
    assert b'name="from_checkpoint"' in resp.content

    # submit the form as the browser would: every field with its prefilled value
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data = {k: v for k, v in data.items() if v is not False}
    data.update({"from_checkpoint": str(ckpt.pk), "name": "child"})
    resp = client_in.post(reverse("runs:new"), data)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    child = Run.objects.get(name="child")
    assert (child.parent_run_id, child.parent_step) == (parent.pk, 4)
    assert child.config["model_path"] == ckpt.path and child.config["preset"] == "dapo"

    page = client_in.get(reverse("runs:detail", args=[child.pk])).content.decode()
    assert 'id="lineage"' in page and f'data-run="{parent.pk}"' in page and "step 4" in page
    parent_page = client_in.get(reverse("runs:detail", args=[parent.pk])).content.decode()
    assert f'data-child="{child.pk}"' in parent_page
    assert f"?from_checkpoint={ckpt.pk}" in parent_page and f"?run={parent.pk}" in parent_page


def test_a_sweep_from_a_checkpoint_records_the_parent_on_every_seed(client_in, run_with_checkpoints):
    parent = run_with_checkpoints
    ckpt = parent.checkpoints.get(step=4)
    run_form = client_in.get(reverse("runs:new") + f"?from_checkpoint={ckpt.pk}").content.decode()
    assert f'{reverse("sweeps:new")}?from_checkpoint={ckpt.pk}' in run_form  # "a new sweep from this checkpoint"
    resp = client_in.get(reverse("sweeps:new") + f"?from_checkpoint={ckpt.pk}")
    assert b'id="from-checkpoint"' in resp.content
    form = resp.context["form"]
    assert form["model_path"].value() == ckpt.path and form["preset"].value() == "dapo"
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data = {k: v for k, v in data.items() if v is not False}
    data.update({"from_checkpoint": str(ckpt.pk), "name": "children", "seeds": "3", "concurrency": "1",
                 "policy_name": "manual"})
    resp = client_in.post(reverse("sweeps:new"), data)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    children = Run.objects.filter(sweep__isnull=False, parent_run=parent)
    assert children.count() == 3
    assert {(r.parent_step, r.config["model_path"]) for r in children} == {(4, ckpt.path)}


def test_a_vanished_checkpoint_link_says_so(client_in):
    resp = client_in.get(reverse("runs:new") + "?from_checkpoint=987654", follow=True)
    assert resp.status_code == 200 and "checkpoint 987654 no longer exists" in resp.content.decode()


def test_the_run_page_shows_an_eval_chart_when_the_run_evaluates(client_in, run_with_checkpoints):
    run = run_with_checkpoints
    assert b'id="chart-eval"' not in client_in.get(reverse("runs:detail", args=[run.pk])).content
    run.config = {**run.config, "eval_every": 10, "eval_k": [1, 4]}
    run.save()
    html = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'id="chart-eval" data-keys="eval/pass@1,eval/pass@4"' in html


def test_a_sweep_page_offers_evaluation_of_its_runs(client_in, run_with_checkpoints, tmp_path):
    from webapp.sweeps.models import Sweep

    sweep = Sweep.objects.create(project=default_project(), name="s", config=run_with_checkpoints.config, seeds=[7])
    run_with_checkpoints.sweep = sweep
    run_with_checkpoints.save()
    assert f"?sweep={sweep.pk}".encode() in client_in.get(reverse("sweeps:detail", args=[sweep.pk])).content
    resp = client_in.get(reverse("evals:new") + f"?sweep={sweep.pk}")
    assert "parent step 4" in resp.content.decode()  # checkpoints are labelled with their run
