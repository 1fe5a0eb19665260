"""The launch forms' estimates before launch (webapp.runs.launch_estimate): the memory and time of a config as its
fields stand (the fragment the form fetches as they change), and a config far beyond every worker (more memory
than the largest has, or more than a week at the measured throughput) launched only once "launch anyway" is
ticked, while a config within range launches in one post as before."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.runs.test_views import field_errors, form_post
from webapp.runs.capacity import capacity_report
from webapp.runs.models import MetricPoint, Run
from webapp.sweeps.models import Sweep

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("no_worker_reports")]

GB = 1024
# 4,096 prompts × 1,024 completions of up to 131,072 tokens: every knob in its range
ABSURD = {"prompts_per_step": "4096", "group_size": "1024", "max_new_tokens": "131072"}


def smollm2_folder(tmp_path) -> str:
    """A folder with SmolLM2-135M's dimensions (the web layer reads its config.json, never its weights)."""
    folder = tmp_path / "smollm2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": True}))
    return str(folder)


def gpu_worker(memory_mb: int = 64 * GB) -> None:
    capacity_report(worker="gpu1@host", queues=["gpu"], slots=1, cores=8, memory_mb=memory_mb, gpus=1)


def test_a_config_far_beyond_every_worker_is_refused_until_confirmed(client_in, tmp_path):
    gpu_worker()
    data = form_post(model_path=smollm2_folder(tmp_path), device="cuda", **ABSURD)
    response = client_in.post(reverse("runs:new"), data)
    assert response.status_code == 400
    errors = field_errors(response)
    assert list(errors) == ["launch_anyway"]
    assert errors["launch_anyway"].startswith("this run needs ~")
    assert "more than any worker has (68.7 GB: its largest worker has 65,536 MB of memory); launch anyway?" in \
        errors["launch_anyway"]
    assert 'name="launch_anyway"' in response.content.decode()
    assert not Run.objects.exists()
    response = client_in.post(reverse("runs:new"), {**data, "launch_anyway": "on"})
    assert response.status_code == 302, field_errors(response)
    run = Run.objects.get()
    assert run.queue == "gpu" and run.config["group_size"] == 1024 and run.config["max_new_tokens"] == 131072


def test_a_config_within_range_launches_in_one_post_without_the_question(client_in, tmp_path):
    gpu_worker()
    page = client_in.get(reverse("runs:new")).content.decode()
    assert 'id="launch-estimate"' in page and 'name="launch_anyway"' not in page  # the estimates, no question
    response = client_in.post(reverse("runs:new"), form_post(model_path=smollm2_folder(tmp_path), device="cuda"))
    assert response.status_code == 302, field_errors(response)
    assert Run.objects.count() == 1


def test_the_time_estimate_is_the_measured_throughput_of_the_models_last_run_and_bounds_a_week(client_in, tmp_path,
                                                                                                user):
    from webapp.runs import services

    folder = smollm2_folder(tmp_path)
    gpu_worker()
    before = client_in.get(reverse("runs:estimate"), form_post(model_path=folder, device="cuda")).content.decode()
    assert "no time estimate: no run of this model on this queue that you may read has reported its throughput" \
        in before
    done = services.run_create(config={"preset": "grpo", "model_path": folder, "device": "cuda"}, user=user)
    Run.objects.filter(pk=done.pk).update(last_step=3)
    MetricPoint.objects.bulk_create([MetricPoint(run=done, step=s, key="tokens_per_s", value=v)
                                     for s, v in ((1, 900.0), (2, 1000.0), (3, 1100.0))])
    # 40 steps × (8 prompts × 8 completions × 8 tokens) = 20,480 tokens at 1,000 tokens/s: 20 s
    html = client_in.get(reverse("runs:estimate"), form_post(model_path=folder, device="cuda")).content.decode()
    assert (f"Estimated time of each run: under a minute (40 steps × 512 rollout tokens at 1,000 tokens/s, "
            f"the median throughput of run {done.pk}&#x27;s last 3 steps on this model).") in html
    assert 'id="launch-estimate"' not in html  # the answer fills the box the form holds (which stays)
    form = client_in.get(reverse("runs:new")).content.decode()
    assert 'hx-sync="this:replace"' in form and "change from:#run-form" in form and 'hx-swap="innerHTML"' in form
    data = form_post(model_path=folder, device="cuda", total_steps="30000")  # 15.4 M tokens: 4 h, within a week
    assert client_in.post(reverse("runs:new"), data).status_code == 302
    # a million steps of 1,024 tokens at that pace: 12 days, more than a week, asked before launch
    data = form_post(model_path=folder, device="cuda", total_steps="1000000", max_new_tokens="16")
    response = client_in.post(reverse("runs:new"), data)
    assert field_errors(response)["launch_anyway"] == (
        f"this run may take up to about 11.9 days, more than a week (1,000,000 steps × 1,024 rollout tokens at "
        f"1,000 tokens/s, the median throughput of run {done.pk}&#x27;s last 3 steps on this model); launch anyway?")
    assert Run.objects.count() == 2


def test_the_estimate_fragment_follows_the_fields(client_in, tmp_path, model_dir):
    small = client_in.get(reverse("runs:estimate"), form_post(model_path=model_dir)).content.decode()
    assert 'id="memory-estimate"' not in small  # a folder without the model's shape: no memory estimate
    folder = smollm2_folder(tmp_path)
    shown = client_in.get(reverse("runs:estimate"), form_post(model_path=folder, kl_coef="0")).content.decode()
    assert "Estimated peak memory of each training process: 3." in shown and "weights 0.54" in shown
    bigger = client_in.get(reverse("runs:estimate"), form_post(model_path=folder, kl_coef="0",
                                                               micro_batch_size="64", group_size="16"))
    assert "micro-batch 64" in bigger.content.decode()


def test_the_sweep_form_asks_the_same_question(client_in, tmp_path):
    gpu_worker()
    data = {**form_post(model_path=smollm2_folder(tmp_path), device="cuda", **ABSURD), "seeds": "2",
            "concurrency": "1", "policy_name": "manual", "policy_mode": "max", "free_slot_use": "nothing"}
    response = client_in.post(reverse("sweeps:new"), data)
    assert response.status_code == 400 and "launch_anyway" in field_errors(response)
    assert not Sweep.objects.exists()
    response = client_in.post(reverse("sweeps:new"), {**data, "launch_anyway": "on"})
    assert response.status_code == 302, field_errors(response)
    assert Sweep.objects.count() == 1
