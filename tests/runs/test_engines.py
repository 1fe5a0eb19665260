"""Engines on the web side: the engine's resolved config stored through the sink (bounded, only while
the worker's claim holds) and shown on the run page beside Seedbed's with the engine's badge; the form's engine,
nproc_per_node and command fields, whose errors come from the schema (``training.engines.engine_errors``)."""
from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from tests.runs.test_views import field_errors, form_post
from webapp.api.selectors import run_detail
from webapp.runs import forms, services
from webapp.runs.models import Run, RunStatus
from workers.sink import DatabaseSink

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

GRPO_CONFIG = {"engine": "trl", "trl_version": "1.16.0", "num_generations": 4, "beta": 0.04, "loss_type": "grpo",
               "report_to": [], "accelerator_config": {"split_batches": False}, "max_steps": 6}


def claimed(run: Run, worker: str = "host:1") -> tuple:
    """The run as a worker's run_start leaves it; returns that worker's claim."""
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, worker=worker, attempts=1)
    return (worker, 1)


def test_the_sink_stores_the_engines_config_only_while_its_claim_holds(config):
    run = services.run_create(config={**config, "engine": "trl"})
    claim = claimed(run)
    DatabaseSink(run.pk, claim=claim, echo=None).on_engine_config(GRPO_CONFIG)
    run.refresh_from_db()
    assert run.engine_config == GRPO_CONFIG
    # another worker took the run over: the old process's sink writes nothing
    claimed(run, worker="other:1")
    DatabaseSink(run.pk, claim=claim, echo=None).on_engine_config({**GRPO_CONFIG, "num_generations": 99})
    run.refresh_from_db()
    assert run.engine_config["num_generations"] == 4


def test_a_config_too_large_is_stored_trimmed_with_a_log_line(config, caplog):
    run = services.run_create(config={**config, "engine": "trl"})
    huge = {**GRPO_CONFIG, "chat_template": "x" * 150_000, "seed": float("nan"),
            **{f"extra_{i:04d}": "y" * 100 for i in range(1000)}}  # ~250 kB of JSON
    with caplog.at_level("WARNING", logger="seedbed.runs"):
        stored = services.run_engine_config_set(run_id=run.pk, config=huge)
    run.refresh_from_db()
    assert run.engine_config == stored and len(json.dumps(stored)) <= services.MAX_ENGINE_CONFIG_CHARS
    assert stored["num_generations"] == 4 and stored["seed"] == "nan"  # NaN as text: PostgreSQL's jsonb has none
    assert stored["chat_template"].startswith("(150,002 characters of JSON: not stored)")
    assert "1 long value(s) replaced (chat_template)" in stored["_trimmed"]
    assert re.search(r"\d+ key\(s\) left out", stored["_trimmed"]) and "extra_0000" in stored
    assert any("too large to store whole" in r.getMessage() and str(run.pk) in r.getMessage() for r in caplog.records)
    small = services.run_engine_config_set(run_id=run.pk, config=GRPO_CONFIG)  # a resumed engine's replaces it
    assert run_detail(Run.objects.get(pk=run.pk))["engine_config"] == GRPO_CONFIG  # the API's run, too
    assert small == GRPO_CONFIG and Run.objects.get(pk=run.pk).engine_config == GRPO_CONFIG
    with pytest.raises(ValueError):
        services.run_engine_config_set(run_id=run.pk, config=["not", "a", "mapping"])


def test_the_run_page_shows_the_engine_and_its_resolved_config_once_stored(client_in, config):
    run = services.run_create(config={**config, "engine": "trl", "nproc_per_node": 2})
    fragment_url = reverse("runs:engine_config", args=[run.pk])
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert re.search(r'id="engine-badge"[^>]*>engine: trl · 2 processes<', page)
    # how the engine launches and how its metrics arrive, from the registry
    assert re.search(r'id="engine-badge" title="The trainer that runs it: torchrun [^"]*; metrics: events file', page)
    assert "<h2>Seedbed's config</h2>" in page and "TRL&#x27;s resolved GRPOConfig" in page
    assert "Appears once the engine has started." in page and f'hx-get="{fragment_url}"' in page  # polled till then
    assert client_in.get(fragment_url).status_code == 200

    services.run_engine_config_set(run_id=run.pk, config=GRPO_CONFIG)
    answer = client_in.get(fragment_url)
    assert answer.status_code == 286  # stored: htmx swaps it in and stops polling
    for html in (answer.content.decode(), client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()):
        section = html[html.index('id="engine-config-section"'):]
        assert "hx-get" not in section[:section.index(">")]
        assert '<details id="engine-config">' in section  # collapsed by default
        assert "6 settings, TRL 1.16.0" in section
        assert '<div data-key="num_generations"><dt>num_generations</dt><dd>4</dd></div>' in section
        assert '<dd>{&quot;split_batches&quot;: false}</dd>' in section and "Appears once" not in section


def test_a_seedbed_run_shows_one_config_and_an_ended_run_stops_waiting(client_in, config):
    run = services.run_create(config=config)  # the seedbed engine, by default
    page = client_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert re.search(r'id="engine-badge"[^>]*>engine: seedbed<', page)
    assert "engine-config-section" not in page and "<h2>Config</h2>" in page
    assert client_in.get(reverse("runs:engine_config", args=[run.pk])).status_code == 286

    trl = services.run_create(config={**config, "engine": "trl"})
    services.run_kill(run_id=trl.pk, killed_by="user:test")  # killed while queued: its engine never started
    answer = client_in.get(reverse("runs:engine_config", args=[trl.pk]))
    assert answer.status_code == 286 and "did not report it before the run ended" in answer.content.decode()


def options_of(html: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S).group(1)
    return re.findall(r'<option value="([^"]*)"', select)


def test_the_engine_select_offers_the_engines_this_server_runs(client_in, monkeypatch):
    from training.engines import available_engines

    html = client_in.get(reverse("runs:new")).content.decode()
    assert options_of(html, "engine") == available_engines() and "trl" in available_engines()
    assert "this server runs seedbed, trl" in html
    # a server without TRL offers no trl
    monkeypatch.setattr(forms, "available_engines", lambda: ["seedbed"])
    html = client_in.get(reverse("runs:new")).content.decode()
    assert options_of(html, "engine") == ["seedbed"]
    assert options_of(html, "command") == [""] and "no command is registered on this server" in html
    # the engine knobs come first, with the main ones; the script shows nproc/command only where they apply
    assert html.index('name="engine"') < html.index('name="model_path"') < html.index("Every other knob")
    assert html.index('name="task"') < html.index('name="data_path"') < html.index("Every other knob")
    # each knob some engine lacks names those engines (the registry's Engine.lacks)
    assert 'data-engine-lacks="seedbed trl verl"' in html  # command
    assert html.count('data-engine-lacks="trl verl command"') == 3  # nnodes, strategy, collective_timeout_s
    assert "seedbed/engine_fields" in html
    assert "seedbed/engine_fields" in client_in.get(reverse("sweeps:new")).content.decode()


@pytest.mark.parametrize("changes, field, message", [
    ({"engine": "trl", "dynamic_sampling": "on"}, "dynamic_sampling",
     "the trl engine (TRL&#x27;s GRPOTrainer) has no dynamic sampling; use engine seedbed"),
    ({"engine": "trl", "adv_estimator": "rloo"}, "adv_estimator",
     "the trl engine (TRL&#x27;s GRPOTrainer) has no rloo"),
    ({"engine": "trl", "nproc_per_node": "3"}, "nproc_per_node", "3 does not divide it"),
    ({"nproc_per_node": "2"}, "strategy", "2 ranks (nproc_per_node × nnodes) need a strategy"),
    ({"nproc_per_node": "3", "strategy": "ddp"}, "prompts_per_step", "cannot be split evenly over 3 ranks"),
    ({"engine": "command"}, "command", "name one of the commands the operator registered"),
    ({"engine": "pytorch-lightning"}, "engine", "must be one of seedbed, trl, verl, command"),
])
def test_an_engine_error_shows_at_its_field_and_launches_nothing(client_in, model_dir, changes, field, message,
                                                                django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, **changes))
    assert response.status_code == 400
    errors = field_errors(response)
    assert message in errors.get(field, ""), errors
    assert Run.objects.count() == 0 and callbacks == []
    # the page shows what was submitted: the engine stays selected, offered even where this server lacks it
    html = response.content.decode()
    assert re.search(rf'<option value="{changes.get("engine", "seedbed")}"[^>]*selected', html)


def test_a_trl_run_and_a_registered_command_launch_from_the_form(client_in, model_dir, tmp_path, monkeypatch):
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, engine="trl", nproc_per_node="2",
                                                             name="trl run"))
    run = Run.objects.get(name="trl run")
    assert response.status_code == 302 and (run.config["engine"], run.config["nproc_per_node"]) == ("trl", 2)

    commands = tmp_path / "commands.yaml"
    commands.write_text("my_trainer:\n  argv: [/bin/true, '{config}']\n  help: Our in-house PPO\n")
    monkeypatch.setenv("SEEDBED_COMMANDS", str(commands))
    html = client_in.get(reverse("runs:new")).content.decode()
    assert "command" in options_of(html, "engine") and options_of(html, "command") == ["", "my_trainer"]
    assert "my_trainer: Our in-house PPO" in html
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, engine="command",
                                                             command="my_trainer", name="cmd run"))
    assert response.status_code == 302
    assert Run.objects.get(name="cmd run").config["command"] == "my_trainer"
    errors = field_errors(client_in.post(reverse("runs:new"), form_post(model_path=model_dir, command="my_trainer")))
    assert errors == {"command": "only for engine command"}
    page = client_in.get(reverse("runs:detail", args=[Run.objects.get(name="cmd run").pk])).content.decode()
    assert "engine: command my_trainer · 1 process" in page and "my_trainer&#x27;s resolved config" in page


def test_a_broken_command_list_leaves_the_form_working(client_in, tmp_path, monkeypatch):
    commands = tmp_path / "commands.yaml"
    commands.write_text("my_trainer: {help: no argv}\n")
    monkeypatch.setenv("SEEDBED_COMMANDS", str(commands))
    response = client_in.get(reverse("runs:new"))
    html = response.content.decode()
    assert response.status_code == 200 and "command" not in options_of(html, "engine")
    assert "the operator&#x27;s command list cannot be read" in html and "needs argv" in html


def test_an_engine_registered_by_one_declaration_is_offered_hidden_knobs_and_all_and_launches(
        client_in, model_dir, monkeypatch):
    """The form reads the engine registry (training.engines): a throw-away engine registered here, and nothing else
    changed, is a choice with its label, hides the knobs it lacks, and a run of it launches."""
    import training.engines as registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # what this test adds is gone after it
    registry.register_engine(registry.Engine(name="toy", label="toy: a throw-away engine", run=lambda *a: ("succeeded", 0),
                                             lacks={"dual_clip": "the toy engine has no dual clip"}))
    html = client_in.get(reverse("runs:new")).content.decode()
    assert options_of(html, "engine")[-1] == "toy" and ">toy: a throw-away engine</option>" in html
    assert re.search(r'name="dual_clip"[^>]*data-engine-lacks="(?:\w+ )*toy"', html) or \
        re.search(r'data-engine-lacks="(?:\w+ )*toy"[^>]*name="dual_clip"', html)
    errors = field_errors(client_in.post(reverse("runs:new"), form_post(model_path=model_dir, engine="toy",
                                                                        dual_clip="3")))
    assert errors == {"dual_clip": "the toy engine has no dual clip"}
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, engine="toy", name="toy run"))
    run = Run.objects.get(name="toy run")
    assert response.status_code == 302 and run.config["engine"] == "toy" and run.engine_entry.label.startswith("toy")
