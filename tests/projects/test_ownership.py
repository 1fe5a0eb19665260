"""Ownership through the pages: a user sees and acts on their projects' work only (404 for another project's
objects, 403 for a viewer's action), every action is recorded with its user, and every user gets a personal
project. (The same checks through the token API: tests/api/test_api.py.)"""
from __future__ import annotations

import pytest
from tests.conftest import logged_in
from django.urls import reverse

from webapp.evals.models import EvalJob
from webapp.projects.models import AuditEvent, Membership, Project, Role
from webapp.projects.services import member_set, project_create
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def config(model_dir):
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4}




@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="x")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="x")


@pytest.fixture
def alices_work(alice, config):
    """A run (with a checkpoint), a sweep and an eval job in alice's project "vision"."""
    vision = project_create(user=alice, name="vision")
    run = run_services.run_create(config=config, user=alice, project=vision, name="alices run")
    ckpt = run_services.run_checkpoint_add(run_id=run.pk, step=2, path=config["model_path"])
    sweep = sweep_services.sweep_create(config=config, seeds=[1, 2], concurrency=1, user=alice, project=vision)
    from webapp.evals import services as eval_services

    job = eval_services.eval_create(run=run, user=alice, models=["base"], task="arithmetic", problems=4, n=2)
    return {"project": vision, "run": run, "checkpoint": ckpt, "sweep": sweep, "job": job}


def test_every_user_gets_a_personal_project_as_its_admin(alice, django_user_model):
    project = Project.objects.get(personal_for=alice)
    assert project.name == "alice"
    assert Membership.objects.get(project=project, user=alice).role == Role.ADMIN
    Project.objects.create(name="carol")  # the name is taken before carol exists
    carol = django_user_model.objects.create_user(username="carol", password="x")
    assert Project.objects.get(personal_for=carol).name == "carol-2"


def test_another_projects_pages_are_404_for_a_non_member(bob, alices_work):
    run, sweep, job = alices_work["run"], alices_work["sweep"], alices_work["job"]
    client = logged_in(bob)
    urls = [reverse("runs:detail", args=[run.pk]), reverse("runs:live", args=[run.pk]),
            reverse("runs:state", args=[run.pk]), reverse("runs:samples", args=[run.pk]),
            reverse("sweeps:detail", args=[sweep.pk]), reverse("sweeps:live", args=[sweep.pk]),
            reverse("sweeps:panel", args=[sweep.pk]), f"{reverse('sweeps:samples', args=[sweep.pk])}?step=1",
            reverse("evals:detail", args=[job.pk]), reverse("evals:progress", args=[job.pk]),
            reverse("evals:state", args=[job.pk]), reverse("evals:export", args=[job.pk, "json"]),
            reverse("evals:export", args=[job.pk, "csv"]), f"{reverse('evals:new')}?run={run.pk}",
            f"{reverse('evals:new')}?sweep={sweep.pk}", reverse("projects:detail", args=["vision"])]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"alices run" not in response.content
    for url in (reverse("runs:kill", args=[run.pk]), reverse("runs:resume", args=[run.pk]),
                reverse("sweeps:kill", args=[sweep.pk]), reverse("evals:cancel", args=[job.pk]),
                reverse("evals:resume", args=[job.pk])):
        assert client.post(url, {"run": [r.pk for r in sweep.runs.all()]}).status_code == 404, url
    # the lists leave them out
    for url in (reverse("runs:list"), reverse("sweeps:list"), reverse("evals:list")):
        page = client.get(url).content.decode()
        assert "alices run" not in page and sweep.name not in page, url
    # nothing changed
    assert Run.objects.filter(kill_requested_at__isnull=False).count() == 0
    assert EvalJob.objects.get().cancel_requested_at is None
    assert not AuditEvent.objects.filter(actor_name="bob").exists()


def test_a_checkpoint_of_another_project_is_not_a_starting_point(bob, alices_work, config):
    client = logged_in(bob)
    ckpt = alices_work["checkpoint"]
    page = client.get(f"{reverse('runs:new')}?from_checkpoint={ckpt.pk}").content.decode()
    assert "no longer exists" in page and alices_work["run"].display_name not in page
    with pytest.raises(Exception, match="not found"):
        run_services.run_create(config=config, user=bob, parent_run=alices_work["run"], parent_step=2)
    with pytest.raises(Exception, match="not found"):
        run_services.run_create(config=config, user=bob, project=alices_work["project"])
    assert not Run.objects.filter(created_by=bob).exists()


def test_a_viewer_reads_but_cannot_act_and_a_member_can(alice, bob, alices_work):
    run = alices_work["run"]
    member_set(user=alice, project=alices_work["project"], username="bob", role=Role.VIEWER)
    client = logged_in(bob)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "alices run" in page and 'id="kill"' not in page and 'id="evaluate"' not in page
    sweep_page = client.get(reverse("sweeps:detail", args=[alices_work["sweep"].pk])).content.decode()
    assert 'id="kill-selected"' not in sweep_page and 'name="run"' not in sweep_page
    assert client.post(reverse("runs:kill", args=[run.pk])).status_code == 403
    assert client.post(reverse("evals:cancel", args=[alices_work["job"].pk])).status_code == 403
    assert client.get(f"{reverse('evals:new')}?run={run.pk}").status_code == 200  # reading the form is fine ...
    before = EvalJob.objects.count()
    client.post(f"{reverse('evals:new')}?run={run.pk}", {"models": ["base"], "task": "arithmetic", "problems": 4,
                                                          "n": 2})
    assert EvalJob.objects.count() == before  # ... launching is not
    assert Run.objects.get(pk=run.pk).kill_requested_at is None

    member_set(user=alice, project=alices_work["project"], username="bob", role=Role.MEMBER)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'id="kill"' in page
    assert client.post(reverse("runs:kill", args=[run.pk]), {"reason": "poor seed"}).status_code == 302
    assert Run.objects.get(pk=run.pk).status == RunStatus.KILLED
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'data-action="run.kill"' in page and "bob" in page and "poor seed" in page
    event = AuditEvent.objects.get(action="run.kill")
    assert (event.actor, event.target_id, event.project) == (bob, run.pk, alices_work["project"])


def test_the_run_form_offers_only_projects_where_the_user_may_launch(alice, bob, alices_work, config):
    member_set(user=alice, project=alices_work["project"], username="bob", role=Role.VIEWER)
    client = logged_in(bob)
    page = client.get(reverse("runs:new")).content.decode()
    assert '<option value="bob" selected>' in page and 'value="vision"' not in page
    data = {"rendered_preset": "grpo", "name": "", "project": "vision", "preset": "grpo",
            "model_path": config["model_path"]}
    response = client.post(reverse("runs:new"), data)
    assert response.status_code == 400 and 'data-field="project"' in response.content.decode()
    assert not Run.objects.filter(created_by=bob).exists()


def test_staff_see_every_project(alices_work, django_user_model):
    staff = django_user_model.objects.create_user(username="root", password="x", is_staff=True)
    client = logged_in(staff)
    assert client.get(reverse("runs:detail", args=[alices_work["run"].pk])).status_code == 200
    assert "alices run" in client.get(reverse("runs:list")).content.decode()


def test_launches_and_kills_are_in_the_audit_trail_of_the_sweep_page(alice, alices_work):
    sweep = alices_work["sweep"]
    victim = sweep.runs.order_by("pk").first()
    sweep_services.sweep_kill_runs(sweep_id=sweep.pk, run_ids=[victim.pk], user=alice, reason="manual")
    page = logged_in(alice).get(reverse("sweeps:detail", args=[sweep.pk])).content.decode()
    assert 'data-action="sweep.launch"' in page and 'data-action="run.kill"' in page
    actions = list(AuditEvent.objects.filter(project=alices_work["project"]).values_list("action", "actor_name"))
    assert ("sweep.launch", "alice") in actions and ("run.kill", "alice") in actions
    assert ("run.launch", "alice") in actions and ("eval.launch", "alice") in actions
    assert ("project.create", "alice") in actions
