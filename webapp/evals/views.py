"""Thin views: validate input, call one service or selector, render."""
from __future__ import annotations

import csv
import json

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from training.fields import FieldErrors
from webapp.projects.idempotency import FORM_FIELD, form_launch, new_form_token
from webapp.jobs.views import transition_view
from webapp.projects.selectors import get_visible
from webapp.runs.models import Run
from webapp.runs.views import can_act, launched_redirect
from webapp.sweeps.models import Sweep

from . import selectors, services
from .forms import EvalForm, initial_from_config
from .models import EvalJob, EvalModel, EvalResult


def _origin(request: HttpRequest) -> tuple[Run | None, Sweep | None]:
    run_id, sweep_id = request.GET.get("run"), request.GET.get("sweep")
    if bool(run_id) == bool(sweep_id):
        raise Http404("evaluate from a run (?run=ID) or a sweep (?sweep=ID)")
    try:
        if run_id:
            return get_visible(Run.objects.all(), request.user, pk=int(run_id)), None
        return None, get_visible(Sweep.objects.all(), request.user, pk=int(sweep_id))
    except ValueError:
        raise Http404("run and sweep ids are integers") from None


def eval_new(request: HttpRequest) -> HttpResponse:
    run, sweep = _origin(request)
    choices = services.model_choices(run=run, sweep=sweep)
    if request.method == "POST":
        form = EvalForm(request.POST, choices=choices)
        if form.is_valid():
            def launch() -> str:
                job = services.eval_create(run=run, sweep=sweep, user=request.user, **form.service_inputs())
                messages.success(request, f"Evaluation {job.pk} queued.")
                return reverse("evals:detail", args=[job.pk])
            try:
                url, replayed = form_launch(request, launch)  # once per form: a second submit finds the first
            except FieldErrors as exc:
                for name, message in exc.errors.items():
                    form.add_error("k" if name == "ks" else name if name in form.fields else None, message)
            else:
                return launched_redirect(request, url, replayed)
    else:
        config = services.origin_config(run=run, sweep=sweep)
        form = EvalForm(initial=initial_from_config(config, choices), choices=choices)
    return render(request, "evals/eval_new.html", {"form": form, "run": run, "sweep": sweep,
                                                   "launch_token": new_form_token(request),
                                                   "launch_token_field": FORM_FIELD},
                  status=400 if form.errors else 200)


@require_GET
def eval_list(request: HttpRequest) -> HttpResponse:
    return render(request, "evals/eval_list.html", {"jobs": selectors.eval_job_list(user=request.user)[:200]})


def visible_job(request: HttpRequest, job_id: int, qs=None) -> EvalJob:
    """The job if the user may read it (a member of its project, or staff); 404 otherwise."""
    return get_visible(qs if qs is not None else EvalJob.objects.all(), request.user, pk=job_id)


def _pick_model(job: EvalJob, value: str | None, default: EvalModel | None) -> EvalModel | None:
    if not value:
        return default
    try:
        return job.models.get(pk=int(value))
    except (ValueError, EvalModel.DoesNotExist):
        return default


@require_GET
def eval_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = visible_job(request, job_id, EvalJob.objects.select_related("run", "sweep", "project"))
    counts = selectors.model_counts(job=job)
    curves = selectors.job_curves(job=job, counts=counts)
    a_default, b_default = selectors.default_pair(job=job)
    a = _pick_model(job, request.GET.get("a"), a_default)
    b = _pick_model(job, request.GET.get("b"), b_default)
    cov = selectors.job_coverage(job=job, a=a, b=b, counts=counts) if a and b and a.pk != b.pk else None
    chart = [{"name": c.model.label, "k": list(c.curve), "pass": list(c.curve.values()), "base": c.model.is_base}
             for c in curves if c.curve]
    return render(request, "evals/eval_detail.html", {
        "job": job, "curves": curves, "chart": chart, "coverage": cov, "models": list(job.models.all()),
        "problem_rows": selectors.job_problem_rows(job=job, counts=counts),
        "table_ks": [k for k in sorted(set(job.ks) | {1, job.n})],
        "crossing": selectors.curves_crossing(curves=curves), "rewards_json": json.dumps(job.rewards),
        "can_act": can_act(request, job)})


@require_GET
def eval_state(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job's progress and status badge (templates/evals/_progress.html), polled by htmx; at its end, htmx
    is told to reload the page (the curves are drawn from what the job stored)."""
    job = visible_job(request, job_id)
    response = render(request, "evals/_progress.html", {"job": job, "can_act": can_act(request, job)})
    if job.is_ended:
        response["HX-Refresh"] = "true"
    return response


@require_GET
def eval_progress(request: HttpRequest, job_id: int) -> JsonResponse:
    job = visible_job(request, job_id)
    return JsonResponse({"id": job.pk, "status": job.status, "ended": job.is_ended, "done": job.done_units,
                         "total": job.total_units, "error": job.error,
                         "cancel_requested": job.cancel_requested_at is not None})


@require_GET
def eval_problem(request: HttpRequest, job_id: int, index: int) -> HttpResponse:
    job = visible_job(request, job_id)
    try:
        detail = selectors.problem_detail(job=job, index=index)
    except EvalResult.DoesNotExist as exc:
        raise Http404(str(exc)) from None
    return render(request, "evals/_problem.html", {"job": job, "p": detail})


@require_GET
def eval_export(request: HttpRequest, job_id: int, fmt: str) -> HttpResponse:
    """pass@k results as JSON (curves and per-problem counts) or CSV (?table=curves, the default, or
    ?table=problems for one row per model and problem)."""
    if fmt not in ("json", "csv"):
        raise Http404("export formats: json, csv")
    job = visible_job(request, job_id)
    payload = selectors.export_payload(job=job)
    filename = f"seedbed-eval-{job.pk}"
    if fmt == "json":
        resp = JsonResponse(payload, json_dumps_params={"indent": 2})
        resp["Content-Disposition"] = f'attachment; filename="{filename}.json"'
        return resp
    table = request.GET.get("table", "curves")
    if table not in ("curves", "problems"):
        return HttpResponseBadRequest("table: must be curves or problems")
    resp = HttpResponse(content_type="text/csv")
    resp["Content-Disposition"] = f'attachment; filename="{filename}-{table}.csv"'
    writer = csv.writer(resp)
    if table == "curves":
        writer.writerow(["model_id", "model", "is_base", "run_id", "step", "k", "pass_at_k", "problems"])
        for m in payload["models"]:
            for k, v in m["pass_at_k"].items():
                writer.writerow([m["id"], m["label"], m["is_base"], m["run_id"], m["step"], k, f"{v:.10g}",
                                 m["problems_evaluated"]])
    else:
        writer.writerow(["model_id", "model", "problem", "n", "c"])
        for m in payload["models"]:
            for row in m["per_problem"]:
                writer.writerow([m["id"], m["label"], row["index"], row["n"], row["c"]])
    return resp


def _cancel(request: HttpRequest, job_id: int) -> str:
    services.eval_cancel(job_id=job_id, user=request.user)
    return f"Cancel requested for evaluation {job_id}."


def _resume(request: HttpRequest, job_id: int) -> str:
    services.eval_resume(job_id=job_id, user=request.user)
    return f"Evaluation {job_id} queued again; it keeps the results stored so far."


# a user's transitions (the job core's view, webapp.jobs.views): refused loudly, on the job's page
eval_cancel = transition_view(visible=visible_job, act=_cancel, page="evals:detail", pk_name="job_id")
eval_resume = transition_view(visible=visible_job, act=_resume, page="evals:detail", pk_name="job_id")
