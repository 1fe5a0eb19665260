"""A sweep's ``pack`` (docs/architecture.md#packed-seeds): how many of its seeds share a training process, asked for
or chosen from the queue's workers, refused with a message naming the field where its runs cannot be packed."""
from __future__ import annotations

import json

import pytest

from tests.conftest import tiny_config
from training.config import TrainConfig
from training.fields import FieldErrors
from webapp.runs.capacity import capacity_report
from webapp.sweeps import services
from webapp.sweeps.packing import resolve_pack

pytestmark = [pytest.mark.django_db]


def cfg(**kw):
    return TrainConfig.from_dict(tiny_config(**kw))


def test_asked_for_it_is_kept_and_checked(no_worker_reports):
    capacity_report(worker="w1", queues=["cpu"], slots=2, cores=2, memory_mb=24_000, gpus=0)
    assert resolve_pack(1, cfg=cfg(), queue="cpu", concurrency=4) == 1
    assert resolve_pack(3, cfg=cfg(), queue="cpu", concurrency=4) == 3
    with pytest.raises(FieldErrors) as caught:
        resolve_pack(17, cfg=cfg(), queue="cpu", concurrency=4)
    assert caught.value.errors["pack"] == "must lie in [0, 16] (0: chosen for the queue's workers); got 17"
    with pytest.raises(FieldErrors) as caught:
        resolve_pack(2, cfg=cfg(nproc_per_node=2, strategy="ddp"), queue="cpu", concurrency=4)
    assert caught.value.errors["pack"].startswith("these seeds cannot share a process: a run over several ranks")


def test_a_pack_past_the_memory_of_a_slot_is_refused(no_worker_reports):
    capacity_report(worker="w1", queues=["cpu"], slots=2, cores=2, memory_mb=1_000, gpus=0)  # 500 MiB a slot
    with pytest.raises(FieldErrors) as caught:
        resolve_pack(8, cfg=cfg(), queue="cpu", concurrency=8)
    assert "seeds of this config fit one slot's share of the memory (500 MiB of 1000 over 2 slots)" in \
        caught.value.errors["pack"]


def test_chosen_it_fills_the_queues_slots(no_worker_reports):
    capacity_report(worker="w1", queues=["cpu"], slots=2, cores=2, memory_mb=24_000, gpus=0)
    assert resolve_pack(0, cfg=cfg(), queue="cpu", concurrency=2) == 1  # a slot each: as before
    assert resolve_pack(0, cfg=cfg(), queue="cpu", concurrency=8) == 4  # two slots, four seeds each
    assert resolve_pack(0, cfg=cfg(engine="trl"), queue="cpu", concurrency=8) == 1  # not packable: alone


def test_a_model_outside_the_llama_family_is_not_packed(no_worker_reports, tmp_path, settings):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    settings.SEEDBED_DATA_ROOTS = [*settings.SEEDBED_DATA_ROOTS, str(tmp_path)]
    capacity_report(worker="w1", queues=["cpu"], slots=2, cores=2, memory_mb=24_000, gpus=0)
    other = TrainConfig.from_dict(tiny_config(model_path=str(folder)), check_paths=False)
    assert resolve_pack(0, cfg=other, queue="cpu", concurrency=8) == 1
    with pytest.raises(FieldErrors) as caught:
        resolve_pack(2, cfg=other, queue="cpu", concurrency=8)
    assert "a gpt2 model is trained one seed per process" in caught.value.errors["pack"]


def test_the_sweep_records_it_and_its_page_says_it(no_worker_reports, client_in, user):
    capacity_report(worker="w1", queues=["cpu"], slots=2, cores=2, memory_mb=24_000, gpus=0)
    sweep = services.sweep_create(config=tiny_config(), seeds=[0, 1, 2, 3], concurrency=4, pack=0, policy={},
                                  user=user)
    assert sweep.pack == 2
    page = client_in.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="sweep-pack"' in page and "up to 2 (packed)" in page
    form = client_in.get("/sweeps/new/").content.decode()
    assert 'name="pack"' in form and "seeds a process" in form
