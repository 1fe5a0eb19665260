"""The training CLI as a user runs it: a subprocess per command."""
import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO


def cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "training", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_run_writes_its_files_and_eval_reports_pass_at_k(tmp_path, tiny_model_dir):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("preset: dapo\ntotal_steps: 3\nprompts_per_step: 4\ngroup_size: 4\nmax_new_tokens: 6\n")
    out = tmp_path / "out"
    proc = cli("run", str(cfg), "--out", str(out))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"status": "succeeded", "step": 3, "out": str(out)}
    saved = json.loads((out / "config.json").read_text())
    assert saved["preset"] == "dapo" and saved["eps_high"] == 0.28
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert (out / "samples.jsonl").read_text().strip()
    ckpt = out / "checkpoints" / "step_000003"
    assert (ckpt / "config.json").is_file() and (ckpt / "trainer_state.pt").is_file()

    data = tmp_path / "held.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"{i}+{i}=", "answer": str(2 * i)}) for i in range(6)))
    proc = cli("eval", "--model", str(ckpt), "--data", str(data), "--n", "4", "--k", "1,2,4", "--compact",
               "--rewards", '[{"name": "exact"}]')
    res = json.loads(proc.stdout)
    assert [p["n"] for p in res["problems"]] == [4] * 6
    assert all(0 <= p["c"] <= 4 for p in res["problems"])
    assert 0 <= res["pass@k"]["1"] <= res["pass@k"]["2"] <= res["pass@k"]["4"] <= 1


def test_bad_inputs_name_the_field(tmp_path, tiny_model_dir):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("preset: dapo\ngroup_size: 1\nlr: -1\n")
    proc = cli("run", str(cfg), "--out", str(tmp_path / "o"), check=False)
    assert proc.returncode == 2
    assert "group_size" in proc.stderr and "lr" in proc.stderr
    assert not (tmp_path / "o").exists()
    proc = cli("eval", "--model", tiny_model_dir, "--data", "arithmetic", "--n", "2", "--k", "1,4", check=False)
    assert proc.returncode == 2 and "k" in proc.stderr
    proc = cli("eval", "--model", str(tmp_path), "--data", "arithmetic", check=False)
    assert proc.returncode == 2 and "--model" in proc.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc = cli("eval", "--model", tiny_model_dir, "--data", str(empty), check=False)
    assert proc.returncode == 2 and "empty" in proc.stderr


def bad_files(tmp_path):
    (tmp_path / "bad.yaml").write_text("preset: dapo\n  group_size: [1\n")
    (tmp_path / "bin.yaml").write_bytes(b"preset: \xff\xfe\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "ok.yaml").write_text("preset: dapo\ntotal_steps: 2\n")
    (tmp_path / "nan.yaml").write_text("lr: .nan\n")
    (tmp_path / "huge.yaml").write_text("seed: 100000000000000000000\n")
    (tmp_path / "code.yaml").write_text('rewards: [{"name": "subprocess:Popen", "params": {"args": "id"}}]\n')
    (tmp_path / "bin.jsonl").write_bytes(b"\x00\xff\xfe")


CLI_BAD_INPUTS = [
    (["run", "{tmp}/missing.yaml", "--out", "{tmp}/o"], "error: config: cannot read"),
    (["run", "{tmp}/bad.yaml", "--out", "{tmp}/o"], "error: config: {tmp}/bad.yaml is not valid YAML"),
    (["run", "{tmp}/bin.yaml", "--out", "{tmp}/o"], "error: config: {tmp}/bin.yaml is not UTF-8 text"),
    (["run", "{tmp}/list.yaml", "--out", "{tmp}/o"], "error: config: expected a mapping of knobs"),
    (["run", "{tmp}/nan.yaml", "--out", "{tmp}/o"], "error: lr: expected a finite number"),
    (["run", "{tmp}/huge.yaml", "--out", "{tmp}/o"], "error: seed: must be in [0, 4294967295]"),
    (["run", "{tmp}/code.yaml", "--out", "{tmp}/o"], "error: rewards: item 0: verifier 'subprocess:Popen'"),
    (["run", "{tmp}/ok.yaml", "--out", "{tmp}/o", "--set", "lr"], "error: --set: expected KEY=VALUE"),
    (["run", "{tmp}/ok.yaml", "--out", "{tmp}/o", "--set", "group_size=1"], "error: group_size: must be in [2, 1024]"),
    (["run", "{tmp}/ok.yaml", "--out", "{tmp}/o", "--set", "nope=1"], "error: nope: unknown key"),
    (["eval", "--model", "{model}", "--data", "arithmetic", "--k", "1,x"], "error: --k: expected whole numbers"),
    (["eval", "--model", "{model}", "--data", "arithmetic", "--n", "2", "--k", "0"], "error: --k: every k must lie"),
    (["eval", "--model", "{model}", "--data", "arithmetic", "--rewards", "[{"], "error: --rewards: not valid JSON"),
    (["eval", "--model", "{model}", "--data", "arithmetic", "--rewards", '[{"name": "maths"}]'],
     "error: --rewards: item 0: unknown verifier 'maths'"),
    (["eval", "--model", "{model}", "--data", "{tmp}/bin.jsonl"], "error: --data: {tmp}/bin.jsonl:1: not UTF-8 text"),
]


@pytest.mark.parametrize("argv, message", CLI_BAD_INPUTS)
def test_every_bad_input_is_one_error_line_and_exit_code_2(argv, message, tmp_path, tiny_model_dir, capsys):
    """The CLI's main() as `python -m training` runs it: no traceback, one `error: FIELD: message` line."""
    from training.__main__ import main

    bad_files(tmp_path)
    fill = {"tmp": str(tmp_path), "model": tiny_model_dir}
    def filled(text: str) -> str:
        return text.replace("{tmp}", fill["tmp"]).replace("{model}", fill["model"])

    assert main([filled(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert filled(message) in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # nothing started
