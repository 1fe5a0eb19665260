import os
import re

import pytest
from django.urls import reverse

from webapp.runs import services
from webapp.runs.forms import RunForm
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def form_post(rendered="grpo", **changes):
    """What a browser submits for the form as rendered for preset ``rendered``, with ``changes`` typed in."""
    form = RunForm(preset=rendered)
    data = {"rendered_preset": rendered, "name": ""}
    for name in form.knob_names():
        initial = form.fields[name].initial
        if initial is True:
            data[name] = "on"
        elif initial is not False:
            data[name] = initial
    for name, value in changes.items():
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
    return data


def field_errors(response) -> dict[str, str]:
    html = response.content.decode()
    return {m.group(1): m.group(2) for m in re.finditer(r'data-field="(\w+)"><li>([^<]*)</li>', html)}


def run_urls(run_id, sweep_id):
    return [reverse("runs:list"), reverse("runs:new"), reverse("runs:detail", args=[run_id]),
            reverse("runs:live", args=[run_id]), reverse("sweeps:list"), reverse("sweeps:detail", args=[sweep_id])]


def test_every_page_requires_login(client, config):
    sweep = sweep_services.sweep_create(config=config, seeds=[0], concurrency=1)
    run = sweep.runs.get()
    for url in run_urls(run.pk, sweep.pk):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    for url in (reverse("runs:kill", args=[run.pk]), reverse("runs:resume", args=[run.pk])):
        response = client.post(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    run.refresh_from_db()
    assert run.kill_requested_at is None
    assert client.get(reverse("login")).status_code == 200


def test_pages_render_for_a_logged_in_user(client_in, config):
    sweep = sweep_services.sweep_create(config=config, seeds=[0, 1], concurrency=1, name="two seeds")
    run = sweep.runs.order_by("pk").first()
    for url in run_urls(run.pk, sweep.pk):
        assert client_in.get(url).status_code == 200, url
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert re.search(r"vendor/plotly/plotly-basic\.min(\.[0-9a-f]{12})?\.js", page) and 'id="kill"' in page and "&quot;total_steps&quot;: 6" in page
    assert "two seeds" in client_in.get(reverse("sweeps:list")).content.decode()


def test_the_form_shows_every_knob_with_its_help(client_in):
    from training.config import field_specs

    html = client_in.get(reverse("runs:new")).content.decode()
    for spec in field_specs():
        assert f'name="{spec["name"]}"' in html, spec["name"]
    assert "Upper clip range" in html  # eps_high's help text
    assert 'value="dapo"' in html and 'value="dr_grpo"' in html


@pytest.mark.parametrize("changes, field, message", [
    ({"eps_low": "0.3", "eps_high": "0.2"}, "eps_high", "must be &gt;= eps_low"),
    ({"group_size": "1"}, "group_size", "must be in [2, 1024]; got 1"),
    ({"group_size": "1000000000"}, "group_size", "must be in [2, 1024]"),
    ({"lr": "-0.001"}, "lr", "must be in (0, 1]"),
    ({"lr": "nan"}, "lr", "expected a finite number"),
    ({"temperature": "inf"}, "temperature", "expected a finite number"),
    ({"preset": "ppo-ish"}, "preset", "unknown preset"),
    ({"model_path": "/nonexistent/model"}, "model_path", "must lie inside the allowed folders"),
    ({"model_path": "MODEL_DIR/../missing"}, "model_path", "no such folder"),
    ({"seed": "forty-two"}, "seed", "expected an integer"),
    ({"rewards": '[{"name": "maths"}]'}, "rewards", "unknown verifier &#x27;maths&#x27;"),
])
def test_bad_input_gives_a_field_error_and_launches_nothing(client_in, model_dir, django_capture_on_commit_callbacks,
                                                            changes, field, message):
    changes = {k: v.replace("MODEL_DIR", model_dir) for k, v in changes.items()}
    data = form_post(**{"model_path": model_dir, **changes})
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_in.post(reverse("runs:new"), data)
    assert response.status_code == 400
    errors = field_errors(response)
    assert field in errors and message in errors[field], errors
    assert Run.objects.count() == 0 and Sweep.objects.count() == 0
    assert callbacks == []  # nothing enqueued


def test_a_valid_form_creates_one_queued_run_and_enqueues_it(client_in, model_dir, django_capture_on_commit_callbacks):
    data = form_post(model_path=model_dir, seed="5", total_steps="6", name="my run")
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_in.post(reverse("runs:new"), data)
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("runs:detail", args=[run.pk])
    assert run.status == RunStatus.QUEUED and run.seed == 5 and run.name == "my run"
    assert run.config["total_steps"] == 6 and run.config["kl_coef"] == 0.04
    assert run.created_by.username == "ada"
    assert len(callbacks) == 1


def test_knobs_left_as_rendered_take_the_chosen_preset(client_in, model_dir):
    # rendered for grpo, preset switched to dapo without the page refilling the knobs (no JavaScript):
    # untouched knobs still follow dapo, the one typed in wins.
    data = form_post("grpo", model_path=model_dir, preset="dapo", lr="0.001")
    client_in.post(reverse("runs:new"), data)
    cfg = Run.objects.get().config
    assert cfg["preset"] == "dapo" and cfg["eps_high"] == 0.28 and cfg["loss_agg"] == "token-mean"
    assert cfg["dynamic_sampling"] is True and cfg["lr"] == 0.001


def test_the_run_form_launches_one_seed_and_sends_several_to_the_sweep_form(client_in, model_dir):
    page = client_in.get(reverse("runs:new")).content.decode()
    assert f'href="{reverse("sweeps:new")}" id="as-sweep"' in page and 'name="seeds"' not in page
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, seed="10"))
    run = Run.objects.get()
    assert response["Location"] == reverse("runs:detail", args=[run.pk])
    assert run.seed == 10 and run.sweep is None and not Sweep.objects.exists()


def test_live_endpoint_returns_points_after_since(client_in, config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "reward/mean", s / 10) for s in (1, 2, 3)])
    body = client_in.get(reverse("runs:live", args=[run.pk]), {"since": "1"}).json()
    assert body["status"] == "queued" and body["series"]["reward/mean"] == {
        "x": [2, 3], "y": [0.2, 0.3], "lo": [0.2, 0.3], "hi": [0.2, 0.3], "n": [1, 1], "width": 1}
    assert client_in.get(reverse("runs:live", args=[run.pk]), {"since": "x"}).status_code == 400
    assert client_in.get(reverse("runs:live", args=[run.pk + 1000])).status_code == 404


def test_the_first_answer_buckets_a_long_run_and_keeps_its_spikes(client_in, config):
    from webapp.runs.selectors import LIVE_MAX_POINTS

    run = services.run_create(config=config)
    points = [(s, "reward/mean", 9.0 if s == 4321 else 0.5) for s in range(1, 6001)]
    services.run_metrics_append(run_id=run.pk, points=points)
    s = client_in.get(reverse("runs:live", args=[run.pk])).json()["series"]["reward/mean"]
    assert s["width"] == 4 and len(s["x"]) == 1500 <= LIVE_MAX_POINTS and s["x"][-1] == 6000
    assert max(s["hi"]) == 9.0 and min(s["lo"]) == 0.5 and s["x"][s["hi"].index(9.0)] == 4324  # its bucket's end


def test_the_series_endpoint_gives_every_point_of_a_zoomed_range(client_in, config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, "entropy", s / 1000) for s in range(1, 6001)])
    url = reverse("runs:series", args=[run.pk])
    s = client_in.get(url, {"keys": "entropy", "from": "2000", "to": "2050"}).json()["series"]["entropy"]
    assert s["x"] == list(range(2000, 2051)) and s["y"] == [x / 1000 for x in range(2000, 2051)] and s["width"] == 1
    wide = client_in.get(url, {"keys": "entropy", "from": "1", "to": "6000"}).json()["series"]["entropy"]
    assert wide["width"] == 4 and len(wide["x"]) == 1500
    assert client_in.get(url, {"keys": "entropy", "from": "9", "to": "3"}).status_code == 400
    assert client_in.get(url, {"from": "1", "to": "3"}).status_code == 400
    assert client_in.get(reverse("runs:series", args=[run.pk + 1000]), {"keys": "entropy"}).status_code == 404


def test_kill_button_flags_the_run_and_refuses_twice(client_in, config):
    run = services.run_create(config=config)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    client_in.post(reverse("runs:kill", args=[run.pk]), {"reason": "diverging"})
    run.refresh_from_db()
    assert run.kill_requested_at is not None and run.killed_by == "user:ada" and run.kill_reason == "diverging"
    response = client_in.post(reverse("runs:kill", args=[run.pk]), follow=True)
    assert "already being killed" in response.content.decode()
    assert client_in.get(reverse("runs:kill", args=[run.pk])).status_code == 405


def test_a_run_request_parses_its_config_once(client_in, model_dir, parses, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, lr="0.001"))
    assert response.status_code == 302 and Run.objects.get().config["lr"] == 0.001
    assert len(parses) == 1  # before: 2 (the form, then run_create)


def test_the_run_page_shows_the_prompt_rendered_for_one_example(client_in, tiny_model_dir, smollm2_dir, settings):
    from webapp.runs import services as run_services

    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, os.path.dirname(smollm2_dir),
                                   os.path.dirname(tiny_model_dir)]
    chat_run = run_services.run_create(config={"model_path": smollm2_dir, "task": "reasoning_gym:basic_arithmetic",
                                               "answer_instruction": "Put your answer in <answer></answer>."})
    page = client_in.get(reverse("runs:detail", args=[chat_run.pk])).content.decode()
    assert reverse("runs:prompt", args=[chat_run.pk]) in page  # loaded after the page, by htmx
    html = client_in.get(reverse("runs:prompt", args=[chat_run.pk])).content.decode()
    assert "through the model's chat template" in html and "&lt;|im_start|&gt;assistant" in html
    assert "Calculate" in html and "Put your answer in &lt;answer&gt;&lt;/answer&gt;." in html
    plain_run = run_services.run_create(config={"task": "arithmetic"})
    html = client_in.get(reverse("runs:prompt", args=[plain_run.pk])).content.decode()
    assert "as plain text (no chat template)" in html and "+" in html


def test_the_real_model_demo_run_is_launched_once(smollm2_dir, django_user_model, capsys):
    from django.core.management import call_command

    from webapp.runs.models import Run

    django_user_model.objects.create_superuser(username="admin", password="x")
    call_command("demo_real_run", "--steps", "5")
    call_command("demo_real_run")
    run = Run.objects.get()
    assert run.config["model_path"] == smollm2_dir and run.config["task"] == "reasoning_gym:basic_arithmetic"
    assert run.config["chat_template"] == "auto" and run.config["task_params"]["max_digits"] == 1
    assert run.project.name == "admin" and "exists already" in capsys.readouterr().out


def test_another_users_run_named_like_the_demo_does_not_stop_its_launch(smollm2_dir, django_user_model, capsys,
                                                                         config):
    """b1d04b3 looked for any run of that name: bob's own run, or a run bob (a member of the admin's personal
    project) named so there, kept `./seedbed demo` from ever launching."""
    from django.core.management import call_command

    from webapp.projects.models import Role
    from webapp.projects.services import member_set, personal_project
    from webapp.runs.management.commands.demo_real_run import DEMO_NAME
    from webapp.runs.models import Run

    admin = django_user_model.objects.create_superuser(username="admin", password="x")
    bob = django_user_model.objects.create_user(username="bob", password="x")
    member_set(user=admin, project=personal_project(admin), username="bob", role=Role.MEMBER)
    squatters = {services.run_create(config=config, user=bob, name=DEMO_NAME).pk,
                 services.run_create(config=config, user=bob, project=personal_project(admin), name=DEMO_NAME).pk}
    call_command("demo_real_run", "--steps", "5")
    demo = Run.objects.exclude(pk__in=squatters).get()
    assert demo.name == DEMO_NAME and demo.created_by == admin and demo.config["model_path"] == smollm2_dir
    assert f"real-model demo run {demo.pk} launched" in capsys.readouterr().out
    call_command("demo_real_run")  # and once only
    assert Run.objects.count() == 3 and f"exists already (run {demo.pk})" in capsys.readouterr().out


def test_the_live_endpoint_sends_only_the_metrics_asked_for_and_the_page_lists_the_others(client_in, config):
    run = services.run_create(config=config)
    services.run_metrics_append(run_id=run.pk, points=[(s, k, 1.0) for s in (1, 2) for k in
                                                       ("reward/mean", "entropy", "timing/gen_s", "eval/pass@1")])
    live = reverse("runs:live", args=[run.pk])
    assert set(client_in.get(live).json()["series"]) == {"reward/mean", "entropy", "timing/gen_s", "eval/pass@1"}
    assert set(client_in.get(live, {"keys": "reward/mean,entropy"}).json()["series"]) == {"reward/mean", "entropy"}
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    lazy = re.findall(r'data-keys="([^"]+)" data-lazy="true"', page)
    assert lazy == ["eval/pass@1", "timing/gen_s"]  # the important charts' metrics are not repeated there
    series = reverse("runs:series", args=[run.pk])
    for url, params, field in [(live, {"keys": ""}, "keys"), (live, {"keys": ",".join(f"k{i}" for i in range(65))}, "keys"),
                               (live, {"since": "-1"}, "since"), (series, {"keys": "x", "from": "0", "to": str(10**30)}, "to"),
                               (series, {"from": "0", "to": "5"}, "keys")]:
        response = client_in.get(url, params)
        assert response.status_code == 400 and response.json()["error"].startswith(field + ":"), (params, response.content)


def test_a_runs_metrics_export_as_csv_and_jsonl_for_its_project_only(client_in, client, config, django_user_model):
    import csv
    import io
    import json

    from webapp.runs.models import Run as RunModel

    run = services.run_create(config=config)
    RunModel.objects.filter(pk=run.pk).update(status="running")
    services.run_metrics_append(run_id=run.pk, points=[(1, "reward/mean", 0.25), (1, "accuracy", 0.5),
                                                       (2, "reward/mean", 0.5), (2, "entropy", float("nan"))])
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert reverse("runs:export", args=[run.pk, "csv"]) in page
    response = client_in.get(reverse("runs:export", args=[run.pk, "csv"]))
    assert response["Content-Type"].startswith("text/csv")
    assert f'filename="run-{run.pk}-metrics.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    # (entropy never had a finite value: no CSV column, as the charts have none; the JSONL keeps its null)
    assert rows == [["run", "seed", "step", "accuracy", "reward/mean"],
                    [str(run.pk), str(run.seed), "1", "0.5", "0.25"],
                    [str(run.pk), str(run.seed), "2", "", "0.5"]]
    lines = b"".join(client_in.get(reverse("runs:export", args=[run.pk, "jsonl"])).streaming_content).splitlines()
    assert [json.loads(x) for x in lines] == [
        {"run": run.pk, "seed": run.seed, "step": 1, "metrics": {"accuracy": 0.5, "reward/mean": 0.25}},
        {"run": run.pk, "seed": run.seed, "step": 2, "metrics": {"entropy": None, "reward/mean": 0.5}}]
    assert client_in.get(reverse("runs:export", args=[run.pk, "xml"])).status_code == 404
    outsider = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    client.force_login(outsider)
    assert client.get(reverse("runs:export", args=[run.pk, "csv"])).status_code == 404


def test_the_run_page_shows_the_end_of_its_log_live(client_in, config):
    run = services.run_create(config=config)
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'id="log-none"' in page and "the run has not started" in page
    run.folder.mkdir(parents=True, exist_ok=True)
    (run.folder / "worker.log").write_text("".join(f"line {i}\n" for i in range(100)))
    fragment = client_in.get(reverse("runs:log", args=[run.pk]))
    assert fragment.status_code == 200  # polled again: the run has not ended
    html = fragment.content.decode()
    assert "line 99" in html and "line 60" in html and "line 59\n" not in html  # its last 40 lines
    assert 'hx-get="' + reverse("runs:log", args=[run.pk]) in html
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    assert client_in.get(reverse("runs:log", args=[run.pk])).status_code == 286  # ended: polling stops


def test_a_run_is_renamed_tagged_noted_and_archived_from_its_page(client_in, client, config, django_user_model):
    from webapp.projects.models import AuditEvent

    run = services.run_create(config=config, name="first try")
    url = reverse("runs:annotate", args=[run.pk])
    client_in.post(url, {"name": "baseline lr 1e-4", "tags": "baseline, lr-sweep baseline", "notes": "the reference"})
    run.refresh_from_db()
    assert (run.name, run.tags, run.notes) == ("baseline lr 1e-4", ["baseline", "lr-sweep"], "the reference")
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert '<span class="tag">lr-sweep</span>' in page and "the reference" in page
    assert AuditEvent.objects.get(action="run.annotate").detail["tags"] == ["baseline", "lr-sweep"]
    # a bad tag changes nothing and says why
    response = client_in.post(url, {"name": "x", "tags": "bad<tag>", "notes": ""}, follow=True)
    run.refresh_from_db()
    assert run.name == "baseline lr 1e-4" and "a tag is 1 to 40 letters" in response.content.decode()
    # archiving: only an ended run; then it leaves the runs list and comes back when unarchived
    archive = reverse("runs:archive", args=[run.pk])
    assert "only a run that has ended can be archived" in client_in.post(archive, {"archived": "1"}, follow=True).content.decode()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    client_in.post(archive, {"archived": "1"})
    run.refresh_from_db()
    assert run.archived_at is not None
    assert 'id="archived-note"' in client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    client_in.post(archive, {"archived": "0"})
    run.refresh_from_db()
    assert run.archived_at is None
    # another project's member cannot touch it
    outsider = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    client.force_login(outsider)
    assert client.post(url, {"name": "mine now", "tags": "", "notes": ""}).status_code == 404
    run.refresh_from_db()
    assert run.name == "baseline lr 1e-4"


def test_bulk_actions_on_the_selected_runs(client_in, client, config, django_user_model):
    a, b = services.run_create(config=config, name="a"), services.run_create(config=config, name="b")
    bulk = reverse("runs:bulk")
    back = reverse("runs:list") + "?q=a&sort=name"
    response = client_in.post(bulk, {"run": [a.pk, b.pk], "action": "tag", "tags": "ablation v2", "next": back})
    assert response.status_code == 302 and response["Location"] == back  # back to the same search
    assert [Run.objects.get(pk=p).tags for p in (a.pk, b.pk)] == [["ablation", "v2"]] * 2
    # archiving needs every selected run to have ended: nothing changes, the page says why
    page = client_in.post(bulk, {"run": [a.pk, b.pk], "action": "archive"}, follow=True).content.decode()
    assert "only a run that has ended can be archived" in page and not Run.objects.filter(archived_at__isnull=False)
    client_in.post(bulk, {"run": [a.pk, b.pk], "action": "kill"})
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.KILLED}  # queued runs: killed at once
    client_in.post(bulk, {"run": [a.pk], "action": "archive"})
    assert Run.objects.get(pk=a.pk).archived_at is not None
    assert 'data-run="%d"' % a.pk not in client_in.get(reverse("runs:list")).content.decode()  # hidden
    # "compare selected" sends the ticked runs to the compare page
    html = client_in.get(reverse("runs:compare"), {"run": [a.pk, b.pk]}).content.decode()
    assert f'<tr data-run="{a.pk}">' in html and f'<tr data-run="{b.pk}">' in html
    # an outsider's selection touches nothing of ours; an outside 'next' is not followed
    outsider = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    client.force_login(outsider)
    response = client.post(bulk, {"run": [b.pk], "action": "tag", "tags": "mine", "next": "https://evil.example/"})
    assert response["Location"] == reverse("runs:list") and Run.objects.get(pk=b.pk).tags == ["ablation", "v2"]
