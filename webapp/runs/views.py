"""Thin views: validate input, call one service or selector, render."""
from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from training.fields import FieldErrors
from webapp.projects.idempotency import FORM_FIELD, form_launch, new_form_token
from webapp.jobs.views import transition_view
from webapp.projects.models import Role
from webapp.projects.selectors import audit_trail, get_visible, has_role, visible

from . import copies, search, selectors, services
from .forms import RunForm, preset_form_values
from .models import Checkpoint, Run


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    """The runs table: search, sort, columns and page all in the URL (``webapp.runs.search``)."""
    params = search.parse_params(request.GET)
    if "final" in request.GET:  # the column picker's free box (empty or a metric): to the state's own address
        return redirect(reverse("runs:list") + params.link())
    table = selectors.run_table(user=request.user, params=params)
    headers = params.headers()
    final_headers = [headers[f"{search.FINAL}{m}"] for m in params.final_cols]
    return render(request, "runs/run_list.html", {
        **table, **rows_context(params, table), "params": params, "headers": headers, "final_headers": final_headers,
        "config_headers": search.config_headers(params, headers),
        "status_links": params.status_links(),
        "pager": params.pager(table["page"].number, table["page"].paginator.num_pages),
        "config_keys": search.CONFIG_KEYS,
        "metric_choices": list(dict.fromkeys([*search.STANDARD_METRICS, *params.final_cols]))})


def rows_context(params: search.RunListParams, table: dict) -> dict:
    """What the rows fragment (templates/runs/_run_rows.html) needs besides the rows: whether a row shown is live
    (queued or running: the rows are polled while one is), the address it polls (this page's search, sort,
    columns and page) and the width of the "no runs" row."""
    return {"live": any(not row["run"].is_ended for row in table["rows"]), "rows_query": params.link(),
            "n_columns": 10 + len(params.config_cols) + len(params.final_cols)}


@require_GET
def run_rows(request: HttpRequest) -> HttpResponse:
    """The rows of the runs table that ``/runs/`` with the same query shows, polled by htmx while one of them is
    live; once none is, the answer is 286 (htmx stops polling). The page's selection stays: the answer is morphed
    into the table (static/seedbed/morph.js), row by row."""
    params = search.parse_params(request.GET)
    table = selectors.run_table(user=request.user, params=params)
    context = {**table, **rows_context(params, table), "params": params}
    return fragment(request, "runs/_run_rows.html", context, ended=not context["live"])


def parent_checkpoint_of(request: HttpRequest) -> Checkpoint | None:
    """"New run (or sweep) from this checkpoint": ?from_checkpoint=ID on the form, a hidden field once
    submitted."""
    value = (request.POST if request.method == "POST" else request.GET).get("from_checkpoint")
    if not value:
        return None
    try:  # only a checkpoint of a run the user may read
        return visible(Checkpoint.objects.select_related("run"), request.user, field="run__project").get(pk=int(value))
    except (ValueError, Checkpoint.DoesNotExist):
        messages.error(request, f"from_checkpoint: checkpoint {value} no longer exists; starting from scratch.")
        return None


def copied_run_of(request: HttpRequest) -> Run | None:
    """"Re-run with changes": ?copy_of=ID on the form, a hidden field once submitted; a run the user may read."""
    value = (request.POST if request.method == "POST" else request.GET).get("copy_of")
    if not value:
        return None
    try:
        return visible(Run.objects.select_related("project"), request.user).get(pk=int(value))
    except (ValueError, Run.DoesNotExist):
        messages.error(request, f"copy_of: run {value} does not exist or is not one you may read; the form is "
                                "not prefilled from it.")
        return None


def run_form_for(request: HttpRequest, form_class, parent: Checkpoint | None, copy: Run | None = None, **kwargs):
    """The run form (or a form built on it) for a GET: the preset asked for, a checkpoint's config, or a run's
    full config ("Re-run with changes": webapp.runs.copies)."""
    if copy is not None and parent is None:
        config = dict(copy.config)
        form = form_class(preset=config.get("preset", "grpo"), initial_config=config, user=request.user, **kwargs)
        copies.prefill_identity(form, name=copies.default_name(copy, selectors.names_like(copy)),
                                project=copy.project)
        return form
    if parent is not None:
        _, config = selectors.new_run_prefill(checkpoint_id=parent.pk)
        return form_class(preset=config.get("preset", "grpo"), initial_config=config, user=request.user, **kwargs)
    task = request.GET.get("task")  # "New run on it" from a dataset's page
    initial = {"task": task} if isinstance(task, str) and len(task) <= 300 else None
    model_path = request.GET.get("model_path")  # "New run" from a model's page: its folder (checked on submit)
    if isinstance(model_path, str) and model_path and len(model_path) <= 4096:
        initial = {**(initial or {}), "model_path": model_path}
    if initial and str(initial.get("task", "")).startswith("dataset:"):
        # the form shows what the run will use: the dataset's file, mapping and split (not the knobs' defaults)
        from webapp.datasets.selectors import resolve_dataset_config

        try:
            initial = resolve_dataset_config(initial, user=request.user)
        except FieldErrors:
            pass  # not one of the user's: the form says so when it is submitted
    return form_class(preset=request.GET.get("preset", "grpo"), initial_config=initial, user=request.user, **kwargs)


def run_new(request: HttpRequest) -> HttpResponse:
    parent = parent_checkpoint_of(request)
    copy = copied_run_of(request) if parent is None else None
    if request.method == "POST":
        form = RunForm(request.POST, user=request.user)
        if form.is_valid():
            def launch() -> str:
                name = copy_launch_name(request, copy, form.cleaned_data["name"],
                                        lambda: run_form_for(request, RunForm, None, copy))
                run = services.run_create(config=form.config, user=request.user, name=name,
                                          project=form.cleaned_data["project"],
                                          parent_run=parent.run if parent else None,
                                          parent_step=parent.step if parent else None, copied_from=copy,
                                          queue=form.cleaned_data.get("queue") or "")
                messages.success(request, f"Run {run.pk} queued.")
                return reverse("runs:detail", args=[run.pk])
            try:
                url, replayed = form_launch(request, launch)  # once per form: a second submit finds the first
            except FieldErrors as exc:  # e.g. a model folder removed between validation and launch
                form.add_config_errors(exc)
            else:
                return launched_redirect(request, url, replayed)
    else:
        form = run_form_for(request, RunForm, parent, copy)
    copied = copy_context(copy, form, lambda: run_form_for(request, RunForm, None, copy))
    return render(request, "runs/run_new.html", {"form": form, "preset_values": preset_form_values(),
                                                 "parent_checkpoint": parent, **copied,
                                                 "launch_token": new_form_token(request),
                                                 "launch_token_field": FORM_FIELD},
                  status=400 if form.errors else 200)


@require_GET
def run_estimate(request: HttpRequest) -> HttpResponse:
    """The run (and sweep) form's memory and time estimates for its fields as they stand (?the form's fields;
    ``RunForm.launch_estimate``), the fragment htmx swaps in as they change."""
    return render(request, "runs/_launch_estimate_body.html", {"form": RunForm(request.GET, user=request.user)})


def copy_context(copy, form, opened) -> dict:
    """What a launch form copied from a run (or a sweep) shows: the original and, for the page's differences
    list, what each field showed when the form opened (``form`` itself when unbound, else ``opened()``: an
    unbound form filled from the original)."""
    if copy is None:
        return {}
    return {"copy_source": copy, "copy_kind": "run" if isinstance(copy, Run) else "sweep",
            "copy_original": copies.form_values(opened() if form.is_bound else form)}


def copy_launch_name(request: HttpRequest, copy, submitted: str, opened) -> str:
    """The name a copy (a run or a sweep) launches under: the form's default (``copies.is_default_name``) becomes
    the original's with what the submitted form changes (``copies.changed_fields`` against ``opened()``, the form
    as the copy opened), never a name its project has; a name the user wrote is kept."""
    if copy is None or not copies.is_default_name(submitted, copies.name_of(copy)):
        return submitted
    changes = copies.changed_fields(copies.form_values(opened()), request.POST)
    return copies.copy_name(copies.name_of(copy), changes, selectors.names_like(copy))


def launched_redirect(request: HttpRequest, url: str, replayed: bool) -> HttpResponse:
    """After a launch form's POST: to what it launched; a form submitted again (a double click, a POST resent
    after a crash) launched nothing and says so."""
    if replayed:
        messages.info(request, "This form was already submitted: here is what it launched (nothing new was "
                               "launched). Open the form again to launch another.")
    return redirect(url)


def visible_run(request: HttpRequest, run_id: int, qs=None) -> Run:
    """The run if the user may read it (a member of its project, or staff); 404 otherwise."""
    return get_visible(qs if qs is not None else Run.objects.all(), request.user, pk=run_id)


def can_act(request: HttpRequest, obj) -> bool:
    """Whether the page shows the object's action buttons (kill, resume, cancel): members and admins."""
    return has_role(request.user, obj.project_id, Role.MEMBER)


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = visible_run(request, run_id, Run.objects.select_related("sweep", "parent_run", "project", "copied_from"))
    return render(request, "runs/run_detail.html", {
        "run": run, "can_act": can_act(request, run),
        "copied": copies.copied_note(run.copied_from, run.config, lambda r: r.config, request.user),
        "audit": audit_trail(targets=[("run", run.pk)]),
        "config_json": json.dumps(run.config, indent=2, sort_keys=True),
        "charts": selectors.run_charts(run.config),
        "live_keys": ",".join(dict.fromkeys(key for keys in selectors.CHART_METRICS for key in keys)),
        "other_charts": selectors.run_other_charts(run_id=run.pk),
        "checkpoints": selectors.run_checkpoints(run_id=run.pk),
        "samples": selectors.run_samples_table(run_id=run.pk),
        "logs": selectors.run_log_tail(run=run),
        "engine_config": selectors.run_engine_config(run=run),
    })


HTMX_STOP_POLLING = 286  # htmx swaps this answer and stops polling (the run has ended)


def fragment(request: HttpRequest, template: str, context: dict, *, ended: bool) -> HttpResponse:
    """A server-rendered live section; once what it shows has ended, status 286 tells htmx to stop polling."""
    return render(request, template, context, status=HTMX_STOP_POLLING if ended else 200)


@require_GET
def run_state(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's status, facts and actions (templates/runs/_run_state.html), polled by htmx, with its
    Activity (replacing the page's, out of band): a kill or resume asked for elsewhere (the API, another tab) and
    the run's restarts show while the page is open, and in the answer after its end."""
    run = visible_run(request, run_id, Run.objects.select_related("sweep", "parent_run"))
    return fragment(request, "runs/_run_state.html", {"run": run, "can_act": can_act(request, run),
                                                      "audit": audit_trail(targets=[("run", run.pk)]),
                                                      "audit_oob": True},
                    ended=run.is_ended)


@require_GET
def run_engine_config(request: HttpRequest, run_id: int) -> HttpResponse:
    """The engine's resolved config (templates/runs/_engine_config.html), polled by htmx until the engine reported
    it or the run ended."""
    run = visible_run(request, run_id)
    section = selectors.run_engine_config(run=run)
    if section is None:
        return HttpResponse(status=HTMX_STOP_POLLING)
    return fragment(request, "runs/_engine_config.html", {"run": run, "engine_config": section},
                    ended=section["stored"] or section["ended"])


@require_GET
def run_prompt(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's prompt rendered for one example (templates/runs/_prompt.html), loaded by htmx after the page."""
    run = visible_run(request, run_id)
    return render(request, "runs/_prompt.html", {"run": run, "preview": selectors.run_prompt_preview(run=run)})


@require_GET
def run_samples(request: HttpRequest, run_id: int) -> HttpResponse:
    """The newest steps' sampled completions (templates/runs/_samples.html), polled by htmx."""
    run = visible_run(request, run_id)
    return fragment(request, "runs/_samples.html", {"run": run, "samples": selectors.run_samples_table(run_id=run.pk)},
                    ended=run.is_ended)


def _step_param(request: HttpRequest, name: str, default: int) -> int:
    value = request.GET.get(name)
    if value is None:
        return default
    try:
        step = int(value)
    except ValueError:
        raise ValueError(f"{name}: expected an integer step; got {value!r}") from None
    if not 0 <= step <= MAX_STEP:
        raise ValueError(f"{name}: expected a step in [0, {MAX_STEP}]; got {value!r}")
    return step


MAX_STEP = 2**31 - 1  # steps are 32-bit integers in the database


@require_GET
def run_live(request: HttpRequest, run_id: int) -> JsonResponse:
    """Polled by the run page: new metric points (step > ?since=) and samples, and the status."""
    try:
        since = _step_param(request, "since", 0)
        samples_since = _step_param(request, "samples_since", since)
        keys = _keys_param(request, required=False)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    visible_run(request, run_id)
    return JsonResponse(selectors.run_live_state(run_id=run_id, since_step=since, samples_since_step=samples_since,
                                                 keys=keys))


MAX_KEYS = 64  # metrics one request may name: the important charts and the opened ones


def _keys_param(request: HttpRequest, *, required: bool) -> list[str] | None:
    """?keys=a,b as a list of metric names (None when absent and not required); ValueError naming it otherwise."""
    text = request.GET.get("keys")
    if text is None and not required:
        return None
    keys = [k for k in (text or "").split(",") if k]
    if not keys or len(keys) > MAX_KEYS or any(len(k) > 100 for k in keys):
        raise ValueError(f"keys: one to {MAX_KEYS} metric names of at most 100 characters, separated by commas")
    return keys


def run_series(request: HttpRequest, run_id: int) -> JsonResponse:
    """A zoomed chart asks for its metrics over the steps it shows: ?keys=a,b&from=&to= (full resolution when
    they fit the chart's points, else finer buckets)."""
    try:
        lo = _step_param(request, "from", 0)
        hi = _step_param(request, "to", 0)
        if hi < lo:
            raise ValueError(f"to: must be >= from ({lo}); got {hi}")
        keys = _keys_param(request, required=True)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    visible_run(request, run_id)
    return JsonResponse({"series": selectors.run_series_range(run_id=run_id, keys=keys, from_step=lo, to_step=hi)})


def _kill(request: HttpRequest, run_id: int) -> str:
    reason = request.POST.get("reason", "").strip()[:1000] or "killed from the run page"
    services.run_kill(run_id=run_id, user=request.user, reason=reason)
    return f"Kill requested for run {run_id}."


def _resume(request: HttpRequest, run_id: int) -> str:
    ranks = request.POST.get("nproc_per_node", "")
    if ranks and not (ranks.isascii() and ranks.isdigit() and 1 <= int(ranks) <= 64):
        raise services.TransitionError(f"nproc_per_node: a number of ranks from 1 to 64; got {ranks[:20]!r}")
    services.run_resume(run_id=run_id, user=request.user, nproc_per_node=int(ranks) if ranks else None)
    return (f"Run {run_id} queued again; it resumes from its last checkpoint"
            + (f" on {ranks} rank(s) per node." if ranks else "."))


# a user's transitions (the job core's view, webapp.jobs.views): refused loudly, on the run's page
run_kill = transition_view(visible=visible_run, act=_kill, page="runs:detail", pk_name="run_id")
run_resume = transition_view(visible=visible_run, act=_resume, page="runs:detail", pk_name="run_id")


@require_GET
def run_export(request: HttpRequest, run_id: int, fmt: str) -> HttpResponse:
    """Every metric of the run as CSV or JSONL (webapp.runs.export), for the project's members."""
    from .export import export_response

    run = visible_run(request, run_id)
    return export_response(runs={run.pk: run.seed}, fmt=fmt, filename=f"run-{run.pk}-metrics")


@require_GET
def run_log(request: HttpRequest, run_id: int) -> HttpResponse:
    """The end of the run's logs (templates/runs/_log.html), polled by htmx while the run goes on."""
    run = visible_run(request, run_id)
    return fragment(request, "runs/_log.html", {"run": run, "logs": selectors.run_log_tail(run=run)},
                    ended=run.is_ended)


@require_POST
def run_annotate(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's name, tags and notes form."""
    visible_run(request, run_id)
    try:
        services.run_annotate(run_ids=[run_id], user=request.user, name=request.POST.get("name", ""),
                              notes=request.POST.get("notes", ""),
                              tags=services.parse_tags(request.POST.get("tags", "")))
        messages.info(request, "Saved.")
    except FieldErrors as exc:
        messages.error(request, "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))
    return redirect("runs:detail", run_id=run_id)


@require_POST
def run_archive(request: HttpRequest, run_id: int) -> HttpResponse:
    visible_run(request, run_id)
    archived = request.POST.get("archived", "1") == "1"
    try:
        services.run_archive(run_ids=[run_id], user=request.user, archived=archived)
        messages.info(request, "Archived: hidden from the runs list." if archived else "Back in the runs list.")
    except services.TransitionError as exc:
        messages.error(request, str(exc))
    return redirect("runs:detail", run_id=run_id)


MAX_BULK = 500


@require_POST
def run_bulk(request: HttpRequest) -> HttpResponse:
    """The runs table's bulk actions on the selected runs: kill, add tags, archive, unarchive (members of each
    run's project; a run the user cannot read is not touched, and not named)."""
    from django.utils.http import url_has_allowed_host_and_scheme

    from .compare import as_id

    ids = [i for i in map(as_id, request.POST.getlist("run")[:MAX_BULK]) if i is not None]
    runs = list(visible(Run.objects.all(), request.user).filter(pk__in=ids).values_list("pk", flat=True))
    action = request.POST.get("action", "")
    try:
        if not runs:
            messages.error(request, "Select at least one run.")
        elif not action:
            messages.error(request, "action: choose an action (kill, add tags, archive or unarchive); nothing was "
                                    "applied.")
        elif action == "kill":
            done, refused = 0, []
            for run_id in runs:
                try:
                    services.run_kill(run_id=run_id, user=request.user, reason="killed from the runs table")
                    done += 1
                except services.TransitionError:
                    refused.append(run_id)
            messages.info(request, f"Kill requested for {done} run(s)"
                          + (f"; not for runs {refused} (already ended or being killed)." if refused else "."))
        elif action == "tag":
            services.run_annotate(run_ids=runs, user=request.user,
                                  add_tags=services.parse_tags(request.POST.get("tags", "")))
            messages.info(request, f"Tagged {len(runs)} run(s).")
        elif action in ("archive", "unarchive"):
            changed = services.run_archive(run_ids=runs, user=request.user, archived=action == "archive")
            messages.info(request, f"{action.capitalize()}d {changed} run(s).")
        else:
            messages.error(request, f"action: one of kill, tag, archive, unarchive; got {action[:20]!r}")
    except FieldErrors as exc:
        messages.error(request, "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))
    except services.TransitionError as exc:
        messages.error(request, str(exc))
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("runs:list")
    return redirect(target)
