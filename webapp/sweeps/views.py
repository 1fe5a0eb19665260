"""Thin views for sweeps: the list, the sweep form, the dashboard, its JSON endpoints, the multi-select kill, Stop."""
from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from training.fields import FieldErrors
from webapp.projects.idempotency import FORM_FIELD, form_launch, new_form_token
from webapp.runs.forms import preset_form_values
from webapp.projects.selectors import audit_trail, get_visible, visible
from webapp.runs.models import ENDED_STATUSES
from webapp.runs import copies
from webapp.runs import services as run_services
from webapp.runs.views import (can_act, copy_context, copy_launch_name, fragment, launched_redirect,
                               parent_checkpoint_of, run_form_for)
from webapp.runs.selectors import names_like

from . import forecasts, halting, launch_check, selectors, services, what_if
from .forms import ReplayForm, SweepForm
from .models import Sweep, SweepPlan


@require_GET
def sweep_list(request: HttpRequest) -> HttpResponse:
    return render(request, "sweeps/sweep_list.html", {"sweeps": selectors.sweep_list_rows(user=request.user)})


def visible_sweep(request: HttpRequest, sweep_id: int) -> Sweep:
    """The sweep if the user may read it (a member of its project, or staff); 404 otherwise."""
    return get_visible(Sweep.objects.select_related("project"), request.user, pk=sweep_id)


def copied_sweep_of(request: HttpRequest) -> Sweep | None:
    """"Re-run with changes" of a sweep: ?copy_of=ID on the form, a hidden field once submitted; a sweep the user
    may read."""
    value = (request.POST if request.method == "POST" else request.GET).get("copy_of")
    if not value:
        return None
    try:
        return visible(Sweep.objects.select_related("project", "plan"), request.user).get(pk=int(value))
    except (ValueError, Sweep.DoesNotExist):
        messages.error(request, f"copy_of: sweep {value} does not exist or is not one you may read; the form is "
                                "not prefilled from it.")
        return None


def sweep_form_copied(request: HttpRequest, sweep: Sweep) -> SweepForm:
    """The sweep form filled with ``sweep``'s knobs, seeds, concurrency, grid and policy (webapp.runs.copies)."""
    plan = SweepPlan.objects.filter(sweep=sweep).first()
    config = dict(sweep.config)
    form = SweepForm(preset=config.get("preset", "grpo"), initial_config=config, user=request.user,
                     initial=copies.sweep_form_initial(sweep, plan))
    copies.prefill_identity(form, name=copies.default_name(sweep, names_like(sweep)), project=sweep.project)
    return form


def sweep_new(request: HttpRequest) -> HttpResponse:
    parent = parent_checkpoint_of(request)
    copy = copied_sweep_of(request) if parent is None else None
    if request.method == "POST":
        form = SweepForm(request.POST, user=request.user)
        if form.is_valid():
            def launch() -> str:
                name = copy_launch_name(request, copy, form.sweep_args["name"],
                                        lambda: sweep_form_copied(request, copy))
                sweep = services.sweep_create(user=request.user, parent_run=parent.run if parent else None,
                                              parent_step=parent.step if parent else None, copied_from=copy,
                                              **{**form.sweep_args, "name": name})
                messages.success(request, f"Sweep {sweep.pk} launched: {sweep.runs.count()} runs queued.")
                return reverse("sweeps:detail", args=[sweep.pk])
            try:
                url, replayed = form_launch(request, launch)  # once per form: a second submit finds the first
            except FieldErrors as exc:
                form.add_service_errors(exc)
            else:
                return launched_redirect(request, url, replayed)
    elif copy is not None:
        form = sweep_form_copied(request, copy)
    else:
        form = run_form_for(request, SweepForm, parent, initial={"seeds": "4"})
    copied = copy_context(copy, form, lambda: sweep_form_copied(request, copy))
    warning = launch_check.form_policy_warning(request.POST if form.is_bound else copies.form_values(form))
    return render(request, "sweeps/sweep_new.html", {"form": form, "preset_values": preset_form_values(),
                                                     "parent_checkpoint": parent, **copied,
                                                     "policy_warning": warning,
                                                     "launch_token": new_form_token(request),
                                                     "launch_token_field": FORM_FIELD},
                  status=400 if form.errors else 200)


@require_GET
def sweep_policy_warning(request: HttpRequest) -> HttpResponse:
    """The sweep form's "this policy can never stop a run" warning for its fields as they stand (?the form's
    fields; ``launch_check``), the fragment htmx swaps in next to the policy field as they change."""
    return render(request, "sweeps/_policy_form_warning_body.html",
                  {"policy_warning": launch_check.form_policy_warning(request.GET)})


@require_GET
def sweep_detail(request: HttpRequest, sweep_id: int) -> HttpResponse:
    sweep = visible_sweep(request, sweep_id)
    keys = selectors.sweep_metric_keys(sweep_id=sweep.pk)
    logged = list(keys)  # what the chart calls "no such metric" when a typed key has no points (none: "no data yet")
    metric = request.GET.get("metric") or sweep.policy.get("metric") or selectors.DEFAULT_METRIC
    if metric not in keys:
        keys = sorted({*keys, metric})
    panel = selectors.sweep_panel(sweep=sweep, metric=metric, viewer=request.user)
    plan = SweepPlan.objects.filter(sweep=sweep).first()
    return render(request, "sweeps/sweep_detail.html", {
        "budget": services.budget_use(sweep, plan) if plan is not None else None,
        "replay_form": ReplayForm(initial=replay_initial(sweep)), "forecast_on": sweep.policy.get("name") in ("bayes", "auto"),
        "sweep": sweep, "plan": plan, "metric": metric, "metric_keys": keys,
        "copied": copies.copied_note(sweep.copied_from, copies.sweep_settings(sweep, plan),
                                     lambda s: copies.sweep_settings(s, SweepPlan.objects.filter(sweep=s).first()),
                                     request.user),
        "logged_metrics": json.dumps(logged),
        "policy_json": json.dumps(sweep.policy, indent=2, sort_keys=True) if sweep.policy else "",
        "config_json": json.dumps(sweep.config, indent=2, sort_keys=True),
        "sample_steps": selectors.sweep_sample_steps(sweep_id=sweep.pk)[:200],
        "panel": panel, "can_act": can_act(request, sweep),
        # "Kill selected" only while a run can still be killed (an ended sweep's boxes are all disabled)
        "any_live": not sweep.is_ended,
        **sweep_activity_context(sweep, ended=panel["ended"]),
    })


def sweep_activity_context(sweep: Sweep, *, ended: bool) -> dict:
    """The Activity section's (templates/projects/_audit.html): the audit rows of the sweep and of its runs (its
    launch, the policy's and people's kills), and while the sweep is live the fragment URL it polls."""
    targets = [("sweep", sweep.pk), *(("run", pk) for pk in sweep.runs.values_list("pk", flat=True))]
    return {"audit": audit_trail(targets=targets),
            "audit_poll_url": "" if ended else reverse("sweeps:activity", args=[sweep.pk])}


@require_GET
def sweep_activity(request: HttpRequest, sweep_id: int) -> HttpResponse:
    """The dashboard's Activity (templates/projects/_audit.html), polled by htmx while the sweep is live, so a kill
    or stop recorded meanwhile shows without a reload; 286 once every run ended (``Sweep.is_ended``)."""
    sweep = visible_sweep(request, sweep_id)
    ended = sweep.is_ended
    return fragment(request, "projects/_audit.html", sweep_activity_context(sweep, ended=ended), ended=ended)


def parse_since(text: str) -> dict[int, int]:
    """"12:40,13:38" -> {12: 40, 13: 38}: per run, the step after which to send points."""
    since = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        run_id, sep, step = part.partition(":")
        if not sep or int(step) < 0:
            raise ValueError(part)
        since[int(run_id)] = int(step)
    return since


MAX_WIDTH = 1_000_000  # a bucket of more steps than the longest run (total_steps <= 1,000,000) is never needed


def _width_param(request: HttpRequest) -> int | None:
    """?width= as a bucket width in [1, MAX_WIDTH], None when absent; ValueError with the message otherwise."""
    value = request.GET.get("width")
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_WIDTH:
        raise ValueError(f"width: expected a whole number in [1, {MAX_WIDTH}]; got {value!r}")
    return number


@require_GET
def sweep_live(request: HttpRequest, sweep_id: int) -> JsonResponse:
    """Polled by the dashboard: ?metric=KEY&since=RUN:STEP,...&width=W (the width fixed by the first answer)."""
    visible_sweep(request, sweep_id)
    try:
        since = parse_since(request.GET.get("since", ""))
    except ValueError:
        return JsonResponse({"error": "since: expected run:step pairs separated by commas, e.g. 12:40,13:38"},
                            status=400)
    try:
        width = _width_param(request)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    metric = request.GET.get("metric") or selectors.DEFAULT_METRIC
    return JsonResponse(selectors.sweep_live_state(sweep_id=sweep_id, metric=metric, since=since, width=width))


@require_GET
def sweep_panel(request: HttpRequest, sweep_id: int) -> HttpResponse:
    """The dashboard's live tables (templates/sweeps/_panel.html), polled by htmx; 286 once every run ended."""
    sweep = visible_sweep(request, sweep_id)
    metric = request.GET.get("metric") or sweep.policy.get("metric") or selectors.DEFAULT_METRIC
    panel = selectors.sweep_panel(sweep=sweep, metric=metric, viewer=request.user)
    return fragment(request, "sweeps/_panel.html", {"sweep": sweep, "panel": panel, "can_act": can_act(request, sweep)},
                    ended=panel["ended"])


@require_GET
def sweep_samples(request: HttpRequest, sweep_id: int) -> HttpResponse:
    """Sampled completions of one step, one column per run (templates/sweeps/_samples.html), for htmx."""
    visible_sweep(request, sweep_id)
    try:
        step = int(request.GET["step"])
        if not 0 <= step <= 2**31 - 1:  # a step the database compares (23 digits overflowed SQLite: a 500)
            raise ValueError
    except (KeyError, ValueError):
        return HttpResponse('<p class="error">step: give the step whose samples to show</p>', status=400)
    return render(request, "sweeps/_samples.html",
                  {"step": step, "columns": selectors.sweep_samples_at(sweep_id=sweep_id, step=step)})


@require_POST
def sweep_kill(request: HttpRequest, sweep_id: int) -> HttpResponse:
    from webapp.runs.compare import as_id

    visible_sweep(request, sweep_id)
    run_ids = [as_id(v) for v in request.POST.getlist("run")]
    if None in run_ids:  # "²" passes isdigit, 23 digits pass int: neither is a run id the database can hold
        messages.error(request, "run: expected run ids")
        return redirect("sweeps:detail", sweep_id=sweep_id)
    if not run_ids:
        messages.error(request, "Select at least one run to kill.")
        return redirect("sweeps:detail", sweep_id=sweep_id)
    reason = request.POST.get("reason", "").strip()[:1000] or "killed from the sweep dashboard"
    try:
        killed, refused = services.sweep_kill_runs(sweep_id=sweep_id, run_ids=run_ids, user=request.user,
                                                   reason=reason)
    except FieldErrors as exc:  # a reason with a control character
        messages.error(request, str(exc))
        return redirect("sweeps:detail", sweep_id=sweep_id)
    if killed:
        messages.info(request, f"Kill requested for run(s) {', '.join(map(str, killed))}.")
    for message in refused.values():
        messages.error(request, message)
    return redirect("sweeps:detail", sweep_id=sweep_id)


@require_POST
def sweep_stop(request: HttpRequest, sweep_id: int) -> HttpResponse:
    """Stop the whole sweep (halting.sweep_stop): its live runs killed, nothing more started."""
    visible_sweep(request, sweep_id)
    reason = request.POST.get("reason", "").strip()[:halting.MAX_REASON_CHARS] or "stopped from the sweep page"
    try:
        _, killed = halting.sweep_stop(sweep_id=sweep_id, user=request.user, reason=reason)
    except (run_services.TransitionError, FieldErrors) as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Sweep stopped; kill requested for run(s) {', '.join(map(str, killed))}." if killed
                      else "Sweep stopped; none of its runs was still live.")
    return redirect("sweeps:detail", sweep_id=sweep_id)


@require_GET
def sweep_export(request: HttpRequest, sweep_id: int, fmt: str) -> HttpResponse:
    """Every metric of every run of the sweep as CSV or JSONL (webapp.runs.export)."""
    from webapp.runs.export import export_response

    sweep = visible_sweep(request, sweep_id)
    runs = dict(sweep.runs.values_list("pk", "seed"))
    return export_response(runs=runs, fmt=fmt, filename=f"sweep-{sweep.pk}-metrics")


@require_GET
def sweep_parallel(request: HttpRequest, sweep_id: int) -> HttpResponse:
    """Parallel coordinates of the sweep: every config knob that differs between its runs, then their final
    value of the metric (webapp/sweeps/selectors.sweep_parallel_dimensions)."""
    sweep = visible_sweep(request, sweep_id)
    metric = (request.GET.get("metric") or sweep.policy.get("metric") or selectors.DEFAULT_METRIC)[:100]
    return render(request, "sweeps/parallel.html", {
        "sweep": sweep, "metric": metric, "dims": selectors.sweep_parallel_dimensions(sweep=sweep, metric=metric)})


@require_GET
def sweep_forecast(request: HttpRequest, sweep_id: int) -> JsonResponse:
    """Each run's forecast of ?metric= to its horizon with its 95 % band, forecast final and P(near-best)
    (webapp/sweeps/forecasts.py), polled by the dashboard while its forecast toggle is on."""
    sweep = visible_sweep(request, sweep_id)
    metric = (request.GET.get("metric") or sweep.policy.get("metric") or selectors.DEFAULT_METRIC)[:100]
    return JsonResponse(forecasts.sweep_forecast(sweep=sweep, metric=metric, mode=selectors.metric_mode(metric, sweep)))


def replay_initial(sweep: Sweep) -> dict:
    """The replay form's first values: the sweep's own policy (bayes for a manual sweep)."""
    return {"policy_name": sweep.policy.get("name") or "bayes",
            "policy_metric": sweep.policy.get("metric") or selectors.DEFAULT_METRIC,
            "policy_mode": sweep.policy.get("mode") or "max"}


@require_GET
def sweep_replay(request: HttpRequest, sweep_id: int) -> HttpResponse:
    """"What would policy X have done?": a policy replayed on the finished sweep's stored curves
    (webapp/sweeps/what_if.py); reads only, so a GET. The form's errors on its fields (400)."""
    sweep = visible_sweep(request, sweep_id)
    asked = "policy_name" in request.GET
    form = ReplayForm(request.GET if asked else None, initial=replay_initial(sweep))
    result, error = None, ""
    if asked and form.is_valid():
        try:
            result = what_if.sweep_replay(sweep=sweep, policy=form.policy)
        except FieldErrors as exc:
            form.add_service_errors(exc)
        except what_if.ReplayTooLong as exc:
            error = f"{exc}: try it on fewer runs, or ask an operator to run bench/early_stopping.py on its curves"
    status = 400 if form.errors else (503 if error else 200)
    return render(request, "sweeps/replay.html", {"sweep": sweep, "form": form, "result": result, "error": error,
                                                  "points": what_if.REPLAY_POINTS,
                                                  "ended": not sweep.runs.exclude(status__in=ENDED_STATUSES).exists()},
                  status=status)
