"""Caps on what one config may ask of a worker, from the workers' capacity reports (webapp.runs.capacity): ranks
per node, nodes and the code sandbox are field errors naming the limit, through the API, the form, a resume on
other ranks and a sweep's grid; at the limit a launch is accepted; with no worker reporting, this host's capacity
stands in and nothing is refused only for that. (The reports of a real worker: tests/workers/test_capacity.py.)"""
from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.api.conftest import Api, _user_with_token
from tests.runs.test_views import field_errors, form_post
from training.fields import FieldErrors
from webapp.runs import services
from webapp.runs.capacity import capacity_report
from webapp.runs.models import Queue, QueueKind, Run, RunStatus, WorkerCapacity
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("no_worker_reports")]

GB = 1024


def report(name: str, *, queues=("cpu",), cores=3, memory_mb=24 * GB, gpus=0, slots=1):
    capacity_report(worker=f"{name}@host", queues=list(queues), slots=slots, cores=cores, memory_mb=memory_mb,
                    gpus=gpus)


@pytest.fixture
def api(client, django_user_model):
    _, token = _user_with_token(django_user_model, "carol")
    return Api(client, token)


def ranks(n: int, **more) -> dict:
    return {"nproc_per_node": n, "strategy": "ddp", "prompts_per_step": 12, **more}


def code_reward(**params) -> dict:
    return {"rewards": [{"name": "code", "weight": 1.0, "params": params}]}


def test_the_api_refuses_more_ranks_than_the_largest_worker_has_cores_and_accepts_the_limit(api, config):
    report("small", cores=2)
    report("large", cores=3)  # 3 cores: more than this test host may have, so the report is what is read
    report("elsewhere", queues=("gpu",), cores=64)  # another queue's worker does not count
    response = api.post("/runs", {"config": {**config, **ranks(4)}})
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == {
        "nproc_per_node": "at most 3 on queue cpu (its largest worker has 3 cores); got 4"}
    assert not Run.objects.exists()
    response = api.post("/runs", {"config": {**config, **ranks(3)}})
    assert response.status_code == 201, response.content
    assert Run.objects.get().config["nproc_per_node"] == 3


def test_several_nodes_go_to_a_slurm_queue_whatever_the_celery_workers_report(api, config):
    report("only")
    report("second")
    two_nodes = {**config, "nnodes": 2, "strategy": "ddp"}
    response = api.post("/runs", {"config": two_nodes})
    assert response.status_code == 400 and response.json()["errors"]["nnodes"].startswith(
        "a run over 2 machines goes to a Slurm queue (queue cpu is a Celery queue")
    assert not Run.objects.exists()


def test_the_code_sandbox_is_capped_by_cores_and_memory(api, config):
    report("box", cores=3, memory_mb=24 * GB)
    response = api.post("/runs", {"config": {**config, **code_reward(processes=64, memory_mb=16_384)}})
    assert response.json()["errors"] == {
        "rewards": "item 0 (code): processes at most 3 on queue cpu (its largest worker has 3 cores); got 64"}
    response = api.post("/runs", {"config": {**config, **code_reward(processes=2, memory_mb=16_384)}})
    assert response.json()["errors"] == {
        "rewards": "the code sandbox may take 1 rank × 2 processes × 2 × 16,384 MB (memory_mb, for a program and for "
                   "its tests) = 65,536 MB; at most 24,576 MB on queue cpu (its largest worker has 24,576 MB of "
                   "memory): lower processes or memory_mb"}
    # without processes, each rank starts one server per core of its worker
    response = api.post("/runs", {"config": {**config, **code_reward(memory_mb=10_000)}})
    assert "3 processes × 2 × 10,000 MB (memory_mb, for a program and for its tests) = 60,000 MB" in \
        response.json()["errors"]["rewards"]
    assert not Run.objects.exists()
    # a program and its tests, each up to memory_mb: 1 process × 2 × 16,384 MB is past the worker's memory
    assert "rewards" in api.post("/runs", {"config": {**config, **code_reward(processes=1, memory_mb=16_384)}}
                                 ).json()["errors"]
    assert not Run.objects.exists()
    assert api.post("/runs", {"config": {**config, **code_reward(processes=1, memory_mb=12_288)}}).status_code == 201
    # at the limit: 3 processes × 2 × 4,096 MB = 24,576 MB
    assert api.post("/runs", {"config": {**config, **code_reward(processes=3, memory_mb=4_096)}}).status_code == 201


def test_the_form_shows_the_limit_at_the_field_and_launches_nothing(client_in, model_dir,
                                                                  django_capture_on_commit_callbacks):
    report("small", cores=2)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, nproc_per_node="4",
                                                                 strategy="ddp", prompts_per_step="12"))
    assert response.status_code == 400
    assert field_errors(response)["nproc_per_node"] == "at most 2 on queue cpu (its largest worker has 2 cores); got 4"
    assert Run.objects.count() == 0 and callbacks == []
    response = client_in.post(reverse("runs:new"), form_post(model_path=model_dir, nproc_per_node="2",
                                                             strategy="ddp", prompts_per_step="12", name="at limit"))
    assert response.status_code == 302 and Run.objects.get(name="at limit").config["nproc_per_node"] == 2


def test_with_no_worker_reporting_this_host_stands_in_and_nothing_is_refused_for_that(api, config):
    report("gone", cores=64, memory_mb=512 * GB)
    WorkerCapacity.objects.update(updated_at=timezone.now() - timedelta(hours=1))  # killed long ago: ignored
    here = len(os.sched_getaffinity(0))
    response = api.post("/runs", {"config": {**config, **ranks(here + 1, prompts_per_step=4 * (here + 1))}})
    assert response.json()["errors"] == {
        "nproc_per_node": f"at most {here} on queue cpu (no worker of queue cpu has reported: this host has {here} "
                          f"core{'s' if here != 1 else ''}); got {here + 1}"}
    # several nodes are a Slurm queue's, whatever the Celery workers report
    response = api.post("/runs", {"config": {**config, "nnodes": 2, "strategy": "ddp"}})
    assert response.json()["errors"] == {
        "nnodes": "a run over 2 machines goes to a Slurm queue (queue cpu is a Celery queue: its workers train runs "
                  "on one node); no Slurm queue is registered (staff register one: manage.py queue_register NAME "
                  "--kind slurm)"}
    Queue.objects.create(name="big", kind=QueueKind.SLURM, nodes=4)
    response = api.post("/runs", {"config": {**config, "nnodes": 2, "strategy": "ddp"}})
    assert response.json()["errors"]["nnodes"].endswith("; the Slurm queues: big")
    response = api.post("/runs", {"queue": "big", "config": {**config, "nnodes": 5, "strategy": "ddp",
                                                             "prompts_per_step": 20}})
    assert response.json()["errors"] == {"nnodes": "at most 4 on queue big (queue big is registered with 4 nodes); "
                                                   "got 5"}
    assert api.post("/runs", {"queue": "big", "config": {**config, "nnodes": 4, "strategy": "ddp"}}
                    ).status_code == 201


def test_with_no_worker_reporting_the_operators_settings_alone_decide(api, config, settings):
    """This host may be a small web server in front of large workers: the operator's caps, where set, are the
    caps until a worker reports."""
    here = len(os.sched_getaffinity(0))
    settings.SEEDBED_MAX_RANKS_PER_NODE, settings.SEEDBED_MAX_NODES = here + 1, 12
    response = api.post("/runs", {"config": {**config, **ranks(here + 1, prompts_per_step=4 * (here + 1))}})
    assert response.status_code == 201, response.content
    errors = api.post("/runs", {"config": {**config, **ranks(here + 2, prompts_per_step=4 * (here + 2))}}).json()["errors"]
    assert errors == {"nproc_per_node": f"at most {here + 1} on queue cpu (the operator's SEEDBED_MAX_RANKS_PER_NODE); "
                                        f"got {here + 2}"}
    report("small", cores=1)  # once a worker reports, what it has bounds the setting
    errors = api.post("/runs", {"config": {**config, **ranks(2)}}).json()["errors"]
    assert errors == {"nproc_per_node": "at most 1 on queue cpu (its largest worker has 1 core); got 2"}


def test_the_operators_settings_lower_the_caps(api, config, settings):
    report("big", cores=64, memory_mb=512 * GB, slots=8)
    report("big2", cores=64, memory_mb=512 * GB, slots=8)
    settings.SEEDBED_MAX_RANKS_PER_NODE, settings.SEEDBED_MAX_NODES = 2, 1
    settings.SEEDBED_MAX_SANDBOX_PROCS, settings.SEEDBED_MAX_SANDBOX_MB = 4, 8 * GB
    errors = api.post("/runs", {"config": {**config, **ranks(3)}}).json()["errors"]
    assert errors == {"nproc_per_node": "at most 2 on queue cpu (the operator's SEEDBED_MAX_RANKS_PER_NODE); got 3"}
    Queue.objects.create(name="big", kind=QueueKind.SLURM, nodes=16)
    errors = api.post("/runs", {"queue": "big", "config": {**config, "nnodes": 2, "strategy": "ddp"}}).json()["errors"]
    assert errors == {"nnodes": "at most 1 on queue big (the operator's SEEDBED_MAX_NODES); got 2"}
    errors = api.post("/runs", {"config": {**config, **code_reward(processes=5)}}).json()["errors"]
    assert errors == {"rewards": "item 0 (code): processes at most 4 on queue cpu (the operator's "
                                 "SEEDBED_MAX_SANDBOX_PROCS); got 5"}
    errors = api.post("/runs", {"config": {**config, **code_reward(processes=4, memory_mb=4096)}}).json()["errors"]
    assert errors["rewards"].endswith("= 32,768 MB; at most 8,192 MB on queue cpu (the operator's "
                                      "SEEDBED_MAX_SANDBOX_MB): lower processes or memory_mb")
    assert api.post("/runs", {"config": {**config, **ranks(2), **code_reward(processes=2, memory_mb=1024)}}
                    ).status_code == 201  # 2 ranks × 2 processes × 2 × 1,024 MB = 8,192 MB: at the limit


def test_a_resume_on_more_ranks_and_a_sweeps_grid_are_capped_too(config):
    report("small", cores=2)
    run = services.run_create(config=config)
    services.run_kill(run_id=run.pk, killed_by="user:test")
    with pytest.raises(services.TransitionError, match=r"nproc_per_node: at most 2 on queue cpu \(its largest "
                                                       r"worker has 2 cores\); got 4"):
        services.run_resume(run_id=run.pk, nproc_per_node=4)
    run.refresh_from_db()
    assert run.status == RunStatus.KILLED and run.config.get("nproc_per_node", 1) == 1
    assert services.run_resume(run_id=run.pk, nproc_per_node=2).config["nproc_per_node"] == 2
    with pytest.raises(FieldErrors) as exc:
        sweep_services.sweep_create(config={**config, **ranks(2)}, seeds=[0], concurrency=1,
                                    grid={"nproc_per_node": [2, 4]})
    assert exc.value.errors == {"grid": "nproc_per_node=4: at most 2 on queue cpu (its largest worker has 2 cores); "
                                        "got 4"}


def test_a_config_whose_training_memory_fits_no_worker_is_a_field_error(api, config, tmp_path):
    from webapp.runs.forms import RunForm

    # a folder with SmolLM2-135M's dimensions (the web layer reads its config.json, never its weights)
    folder = tmp_path / "smollm2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": True}))
    report("small", cores=3, memory_mb=4 * GB)
    big = {**config, "model_path": str(folder), "prompts_per_step": 4, "group_size": 8, "max_new_tokens": 64,
           "kl_coef": 0.0, "micro_batch_size": 32}
    errors = api.post("/runs", {"config": big}).json()["errors"]
    assert list(errors) == ["micro_batch_size"]
    assert errors["micro_batch_size"].startswith("training takes about ")
    assert errors["micro_batch_size"].endswith("its largest worker has 4,096 MB of memory: lower micro_batch_size "
                                               "or set gradient_checkpointing")
    # its weights, gradients and AdamW moments alone (2.2 GB) do not fit 2 GB
    report("small", cores=3, memory_mb=2 * GB)
    assert list(api.post("/runs", {"config": big}).json()["errors"]) == ["model_path"]
    assert not Run.objects.exists()
    report("small", cores=3, memory_mb=4 * GB)
    assert api.post("/runs", {"config": {**big, "micro_batch_size": 0}}).status_code == 201  # auto: fits
    # the form shows the estimate before launch
    form = RunForm(initial_config={"model_path": str(folder), "kl_coef": 0.0})
    assert form.memory_estimate().startswith("3.") and "weights 0.54" in form.memory_estimate()


def test_the_processes_a_sandboxed_program_may_fork_count_against_the_cores(api, config):
    """ranks × processes × max_processes sandboxed processes may spin at once (each for the whole timeout_s): at
    most 64 a core. b1d04b3 let 1 rank × 3 servers × 1,024 processes launch on 3 cores."""
    report("box", cores=3, memory_mb=24 * GB)
    response = api.post("/runs", {"config": {**config, **code_reward(processes=3, max_processes=1024)}})
    assert response.json()["errors"] == {
        "rewards": "item 0: verifier 'code': max_processes must lie in [1, 64]; got 1024"}
    response = api.post("/runs", {"config": {**config, **ranks(3), **code_reward(processes=3, max_processes=64,
                                                                                  memory_mb=1024)}})
    assert response.json()["errors"] == {
        "rewards": "item 0 (code): the sandbox's programs may run 3 ranks × 3 processes × max_processes 64 = 576 "
                   "processes at once; at most 64 a core, 192 on queue cpu (its largest worker has 3 cores): lower "
                   "max_processes or processes"}
    assert not Run.objects.exists()
    assert api.post("/runs", {"config": {**config, **ranks(3), **code_reward(processes=3, max_processes=21,
                                                                             memory_mb=1024)}}).status_code == 201
