"""Seedbed's loop against TRL's GRPOTrainer on a real pretrained model: SmolLM2-135M-Instruct, on CPU.

    python bench/real_model.py [--steps 40] [--rounds 1] [--threads 2] [--problems 128] [--samples 4]

The task is reasoning-gym's ``basic_arithmetic`` at an easy setting (sums and differences of two one-digit
numbers; the answer is the last number of the reply), asked through the model's chat template with "Reply with
the number only.". Why this one: the 135 M model gets about a third of it right at temperature 0.7, so GRPO has
a learning signal from the first step (at the package's default difficulty, or asked for <answer> tags, the model
scores 0 and nothing can be learned in CPU minutes); the answers are short, so a step costs seconds; and the
task's own ``score_answer`` judges it, the same function for both engines.

Both engines: 8 prompts x 4 completions per step, at most 24 completion tokens, temperature 0.7, lr 5e-6
(constant), one optimizer step per batch (on-policy), GRPO's sequence-mean loss with eps 0.2, advantages
normalised by the group's std, no KL (beta 0), fp32. TRL gets its best CPU configuration (use_cpu,
gradient_checkpointing off, all 32 completions in one micro-batch). Each engine trains in its own process,
alternating, so a load spike on the machine hits both.

Printed per engine: end-to-end completion tokens/s (completion tokens generated / wall time of the training
call), seconds per optimizer step, peak RSS of the process, Seedbed's per-step metrics in
var/bench/real_model_seedbed_metrics.jsonl, held-out pass@1 before and after (``--problems``
fixed held-out problems x ``--samples`` samples at temperature 0.7, the same evaluator for every model) with the
95 % confidence interval of the gain (paired by problem); then the Seedbed / TRL ratios. Needs the ``bench``
extra (trl) and SmolLM2 imported (``./seedbed setup`` does it).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TASK = "reasoning_gym:basic_arithmetic"
TASK_PARAMS = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "allow_parentheses": False, "allow_negation": False,
               "operators": ["+", "-"]}
INSTRUCTION = "Reply with the number only."
REWARDS = [{"name": "reasoning_gym", "weight": 1.0, "params": {"extract": "last_number"}}]
PROMPTS, GROUP, MAX_TOKENS, LR, TEMPERATURE = 8, 4, 24, 5e-6, 0.7


def held_out(problems: int) -> list[dict]:
    from training.data import make_prompt_source

    return make_prompt_source(TASK, task_size=1, task_params=TASK_PARAMS).eval_set(problems)


def pass1_per_problem(model_dir: str, problems: int, samples: int) -> list[float]:
    """Each held-out problem's share of correct samples (its pass@1 estimate)."""
    from training.evaluate import evaluate_examples
    from training.loop import load_model
    from training.prompts import PromptTemplate

    model, tok = load_model(model_dir, "cpu")
    model.eval()
    res = evaluate_examples(model, tok, held_out(problems), n=samples, ks=[1], temperature=TEMPERATURE,
                            max_new_tokens=MAX_TOKENS, rewards=REWARDS, seed=12345,
                            template=PromptTemplate(chat="on", instruction=INSTRUCTION))
    return [p["c"] / p["n"] for p in res["problems"]]


def run_seedbed(model_dir: str, steps: int, seed: int, out: str) -> dict:
    from training.config import TrainConfig
    from training.loop import train
    from training.sink import NullSink

    cfg = TrainConfig.from_dict({
        "preset": "grpo", "model_path": model_dir, "task": TASK, "task_params": TASK_PARAMS, "task_size": 4096,
        "rewards": REWARDS, "chat_template": "on", "answer_instruction": INSTRUCTION, "temperature": TEMPERATURE,
        "total_steps": steps, "prompts_per_step": PROMPTS, "group_size": GROUP, "max_new_tokens": MAX_TOKENS,
        "lr": LR, "kl_coef": 0.0, "seed": seed, "samples_per_step": 0, "device": "cpu"})
    tokens, rewards = [], []

    os.makedirs(os.path.join(ROOT, "var", "bench"), exist_ok=True)
    curve = open(os.path.join(ROOT, "var", "bench", "real_model_seedbed_metrics.jsonl"), "w")

    class CountingSink(NullSink):
        def on_metrics(self, step, m):
            tokens.append(m["length/mean"] * PROMPTS * GROUP)
            rewards.append(m["reward/mean"])
            # the run's curve (reward, length, entropy per step) for the record
            curve.write(json.dumps({"step": step, **m}) + "\n")
            curve.flush()

    t0 = time.perf_counter()
    train(cfg, out, CountingSink())
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "tokens": sum(tokens), "steps": steps, "reward_first_last": [rewards[0], rewards[-1]],
            "model_dir": os.path.join(out, "checkpoints", f"step_{steps:06d}")}


# The memory workload (``--memory``): reasoning-gym chain_sum, two terms of one or two digits, 4 prompts x 8
# completions, at most 64 new tokens, temperature 1, lr 1e-6, no KL, token-mean loss: Seedbed alone, for its
# peak RSS and per-step loss, entropy and log-probs (--record writes them, to compare two versions of the loop).
MEMORY_TASK = "reasoning_gym:chain_sum"
MEMORY_PARAMS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2}


def memory_config(model_dir: str, steps: int, seed: int, shape: tuple[int, int, int], knobs: dict,
                  tiny: bool = False):
    """The memory workload's config; ``tiny``: the built-in tiny model on its arithmetic task instead (no chat
    template, its own verifier), the same shape and knobs."""
    from training.config import TrainConfig

    prompts, group, max_new = shape
    task = ({"task": "arithmetic"} if tiny else
            {"model_path": model_dir, "task": MEMORY_TASK, "task_params": MEMORY_PARAMS, "task_size": 4096,
             "rewards": REWARDS, "chat_template": "on", "answer_instruction": INSTRUCTION})
    return TrainConfig.from_dict({
        **task, "temperature": 1.0,
        "total_steps": steps, "prompts_per_step": prompts, "group_size": group, "max_new_tokens": max_new,
        "lr": 1e-6, "kl_coef": 0.0, "loss_agg": "token-mean", "seed": seed, "samples_per_step": 0,
        "device": "cpu", **knobs})


def unchunked_logprobs(model, batch, *, temperature: float):
    """The loop's log-probs and entropy [B, T] the way it computed them before its output layer was chunked: the
    model's own [B, T, V] logits, one log-softmax over them (no gradients; one row at a time, so checking costs
    the memory of one row's logits)."""
    import torch

    from training.rollout import _full_logits, token_logprobs

    P, T = batch.prompt_ids.shape[1], batch.completion_ids.shape[1]
    logps, entropies = [], []
    with torch.no_grad():
        for i in range(batch.completion_ids.shape[0]):
            row = batch.index(torch.tensor([i]))
            mask = torch.cat([row.prompt_mask, row.completion_mask.long()], dim=1)
            logits = _full_logits(model, row, mask, P, T)
            logp, entropy = token_logprobs(logits, None, row.completion_ids, temperature=temperature,
                                           with_entropy=True, chunk_logits=logits.numel())
            logps.append(logp)
            entropies.append(entropy)
    return torch.cat(logps), torch.cat(entropies)


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def run_memory(model_dir: str, steps: int, seed: int, shape: tuple[int, int, int], knobs: dict,
               check: bool = False, tiny: bool = False) -> dict:
    """Seedbed's loop on the memory workload: per step its loss, entropy, the masked log-probs the loss saw, the
    sequence shape and the peak RSS so far; the whole run's peak RSS and s/step. ``check``: each micro-batch's
    log-probs, entropy and loss also computed the un-chunked way (``unchunked_logprobs``) on the same sequences
    and weights, and per step the largest differences: relative for the loss (to the larger of the losses and the
    mean |advantage|, the size of its terms) and the entropy (the micro-batch's masked mean), absolute and relative
    (L2 over the step's tokens) for the log-probs."""
    import torch

    import training.loop as loop
    import training.step_update as step_update
    from training.distributed import Parallel
    from training.sink import NullSink

    cfg = memory_config(model_dir, steps, seed, shape, knobs, tiny)
    seen: list[torch.Tensor] = []
    widest = [0]  # the widest prompt a training forward saw (the memory model's prompt_tokens)
    policy_loss, forward = step_update.policy_loss, Parallel.forward
    pending: list = []  # check: the micro-batch's (un-chunked log-probs, their entropy, the loop's entropy)
    diffs = {"loss": 0.0, "entropy": 0.0, "logp_abs": 0.0, "sq_diff": 0.0, "sq_ref": 0.0}

    def checking_forward(self, batch):
        widest[0] = max(widest[0], batch.prompt_ids.shape[1])
        logp, entropy = forward(self, batch)
        if check:
            pending.append((*unchunked_logprobs(self.full_model, batch, temperature=cfg.temperature), entropy))
        return logp, entropy

    def recording_policy_loss(logp, old_logp, advantages, mask, **kw):  # the log-probs the loss was given
        seen.append(logp.detach()[mask > 0].double().clone())
        loss, stats = policy_loss(logp, old_logp, advantages, mask, **kw)
        if check:
            ref_logp, ref_entropy, entropy = pending.pop()
            ref_loss = policy_loss(ref_logp, old_logp, advantages, mask, **kw)[0]
            on = mask > 0
            a, b = logp.detach()[on].double(), ref_logp[on].double()
            # the loss is a mean of ratio x advantage terms that cancel within a group (often ~1e-8 of terms of
            # size |A|): its difference is relative to the terms' size, the mean |advantage| over the tokens
            scale = float((advantages.abs()[:, None] * on).sum() / on.sum().clamp(min=1))
            diffs["loss"] = max(diffs["loss"], abs(loss.item() - ref_loss.item())
                                / max(abs(loss.item()), abs(ref_loss.item()), scale, 1e-12))
            diffs["entropy"] = max(diffs["entropy"], relative(float(entropy[on].mean()), float(ref_entropy[on].mean())))
            diffs["logp_abs"] = max(diffs["logp_abs"], float((a - b).abs().max()) if len(a) else 0.0)
            diffs["sq_diff"] += float(((a - b) ** 2).sum())
            diffs["sq_ref"] += float((b ** 2).sum())
        return loss, stats

    per_step = []

    class RecordingSink(NullSink):
        def on_metrics(self, step, m):
            logp = torch.cat(seen) if seen else torch.zeros(0)
            seen.clear()
            per_step.append({"step": step, "loss": m.get("loss/policy"), "entropy": m.get("entropy"),
                             "logp_sum": float(logp.sum()), "logp": logp.tolist(), "length": m["length/mean"],
                             "seconds": m["step_time_s"],
                             "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
            if check:  # this step's largest differences from the un-chunked path, then start again
                per_step[-1]["unchunked"] = {"loss": diffs["loss"], "entropy": diffs["entropy"],
                                             "logp_abs": diffs["logp_abs"],
                                             "logp_rel_l2": (diffs["sq_diff"] / max(diffs["sq_ref"], 1e-30)) ** 0.5}
                diffs.update(loss=0.0, entropy=0.0, logp_abs=0.0, sq_diff=0.0, sq_ref=0.0)
            print("STEP " + json.dumps(per_step[-1]), file=sys.stderr, flush=True)  # a killed run's steps so far

    step_update.policy_loss, Parallel.forward = recording_policy_loss, checking_forward
    try:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            loop.train(cfg, out, RecordingSink())
            wall = time.perf_counter() - t0
    finally:  # (a test calls this in its own process)
        step_update.policy_loss, Parallel.forward = policy_loss, forward
    from training.memory import estimate_for_config

    estimate = estimate_for_config(cfg, cfg.resolved_model_path(), prompt_tokens=widest[0])
    return {"steps": per_step, "wall_s": wall, "s_per_step": wall / steps, "knobs": knobs, "shape": shape,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "prompt_tokens": widest[0],
            "user_s": resource.getrusage(resource.RUSAGE_SELF).ru_utime,
            "sys_s": resource.getrusage(resource.RUSAGE_SELF).ru_stime,
            "estimate_mb": estimate.total / 2**20, "estimate": estimate.text()}


def trl_trainer(model_dir: str, out: str, *, steps: int, seed: int, task_size: int = 4096, prompts: int = PROMPTS,
                group: int = GROUP, max_new: int = MAX_TOKENS, use_cpu: bool = True, bf16: bool = False):
    """TRL's GRPOTrainer on this workload, as Seedbed's run is configured: the same prompts (the task's question
    with INSTRUCTION, through the chat template), the same verifier, GRPO's loss, no KL, constant lr, one
    optimizer step per batch. Returns (trainer, tokenizer). bench/gpu_check.py runs it on a GPU too."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from training.data import ReasoningGymExamples
    from training.verifiers import build_reward

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    rows = ReasoningGymExamples(TASK.split(":", 1)[1], task_size, seed, TASK_PARAMS)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{ex['prompt']}\n\n{INSTRUCTION}"}],
                               "entry": json.dumps({k: ex[k] for k in ("question", "answer", "metadata")})}
                              for ex in (rows[i] for i in range(len(rows)))])
    reward = build_reward(REWARDS)  # the same verifier as Seedbed's run

    def score(completions, entry, **kw):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return list(reward(texts, [json.loads(e) for e in entry]).totals)

    args = GRPOConfig(output_dir=out, use_cpu=use_cpu, gradient_checkpointing=False, bf16=bf16, fp16=False,
                      per_device_train_batch_size=prompts * group, gradient_accumulation_steps=1,
                      num_generations=group, max_completion_length=max_new, learning_rate=LR,
                      lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, beta=0.0,
                      num_iterations=1, loss_type="grpo", epsilon=0.2, temperature=TEMPERATURE, top_p=1.0,
                      max_steps=steps, logging_steps=1, report_to=[], save_strategy="no", seed=seed,
                      dataloader_num_workers=0, disable_tqdm=True)
    return GRPOTrainer(model=model, reward_funcs=score, args=args, train_dataset=data, processing_class=tok), tok


def run_trl(model_dir: str, steps: int, seed: int, out: str) -> dict:
    trainer, tok = trl_trainer(model_dir, out, steps=steps, seed=seed)
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    trainer.save_model(out)
    tok.save_pretrained(out)
    return {"wall_s": wall, "tokens": sum(h["completions/mean_length"] for h in logs) * PROMPTS * GROUP,
            "steps": steps, "reward_first_last": [logs[0].get("reward"), logs[-1].get("reward")], "model_dir": out}


def child(engine: str, steps: int, seed: int, threads: int, problems: int, samples: int,
          shape: tuple[int, int, int] = (4, 8, 64), knobs: dict | None = None, check: bool = False,
          tiny: bool = False) -> None:
    import torch

    from training.loop import load_model
    from training.models import ensure_smollm2

    torch.set_num_threads(threads)
    if engine == "memory":  # nothing else loaded first: the peak RSS is the training run's own
        model_dir = "" if tiny else ensure_smollm2()
        print("RESULT " + json.dumps(run_memory(model_dir, steps, seed, shape, knobs or {}, check, tiny)))
        return
    model_dir = ensure_smollm2()
    load_model(model_dir, "cpu")  # warm transformers' lazy imports outside the timed region, for both alike
    if engine == "base":
        print("RESULT " + json.dumps({"per_problem": pass1_per_problem(model_dir, problems, samples)}))
        return
    with tempfile.TemporaryDirectory() as out:
        res = (run_trl if engine == "trl" else run_seedbed)(model_dir, steps, seed, out)
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        res["per_problem"] = pass1_per_problem(res.pop("model_dir"), problems, samples)
    print("RESULT " + json.dumps(res))


def gain_with_ci(before: list[float], after: list[float]) -> tuple[float, float, float]:
    """Mean paired difference of per-problem pass@1 and its 95 % normal-approximation interval."""
    d = [a - b for a, b in zip(after, before)]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / max(len(d) - 1, 1))
    half = 1.96 * sd / math.sqrt(len(d))
    return mean, mean - half, mean + half


def memory_main(args, shape: tuple[int, int, int], knobs: dict) -> None:
    """One Seedbed run on the memory workload in a child process (its ru_maxrss is the run's alone): the
    per-step figures, the peak, and with --compare the largest relative difference from a recorded run."""
    argv = [sys.executable, __file__, "--child", "memory", "--steps", str(args.steps), "--seed", str(args.seed),
            "--threads", str(args.threads), "--shape", args.shape] + [a for kv in args.set for a in ("--set", kv)]
    argv += (["--check-unchunked"] if args.check_unchunked else []) + (["--tiny"] if args.tiny else [])
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)  # its stderr: each step as it ends
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not line:
        sys.exit("memory run failed (its error above)")
    res = json.loads(line[0][7:])
    for s in res["steps"]:
        print(f"step {s['step']:3d}  loss {s['loss']:+.8f}  entropy {s['entropy']:.8f}  logp sum "
              f"{s['logp_sum']:+.6f}  length {s['length']:5.1f}  {s['seconds']:6.2f} s  RSS {s['rss_mb']:6.0f} MiB"
              + ("  un-chunked: loss {loss:.1e} entropy {entropy:.1e} logp abs {logp_abs:.1e} rel L2 "
                 "{logp_rel_l2:.1e}".format(**s["unchunked"]) if "unchunked" in s else ""))
    print(f"{'tiny model' if args.tiny else 'SmolLM2'} shape {args.shape} knobs {json.dumps(knobs)}: peak RSS "
          f"{res['peak_rss_mb']:.0f} MiB, {res['s_per_step']:.2f} s/step over {args.steps} steps ({args.threads} "
          f"threads, load {os.getloadavg()[0]:.1f}); the process's CPU {res.get('user_s', 0):.1f} s user, "
          f"{res.get('sys_s', 0):.1f} s system" + (f" (SEEDBED_MMAP_THRESHOLD={os.environ['SEEDBED_MMAP_THRESHOLD']})"
                                                  if os.environ.get("SEEDBED_MMAP_THRESHOLD") else ""))
    print(f"memory model (prompts of {res['prompt_tokens']} tokens): {res['estimate_mb']:.0f} MiB, "
          f"{100 * (res['estimate_mb'] / res['peak_rss_mb'] - 1):+.1f} % of the measured peak: {res['estimate']}")
    if args.record:
        with open(args.record, "w") as fh:
            json.dump(res, fh)
    if args.compare:
        with open(args.compare) as fh:
            ref = json.load(fh)
        print(f"largest relative difference from {args.compare}: "
              + ", ".join(f"{k} {v:.2e}" for k, v in compare_steps(ref["steps"], res["steps"]).items()))


def compare_steps(ref: list[dict], new: list[dict]) -> dict:
    """The largest relative difference per quantity over the steps; the log-probs token by token, each step's
    sorted (micro-batches take a minibatch's rows grouped by prompt: the same tokens in another order; sorting
    moves no value further from its match than the largest difference of a matching)."""
    rel = relative
    worst = {"loss": 0.0, "entropy": 0.0, "logp": 0.0}
    for r, n in zip(ref, new):
        worst["loss"] = max(worst["loss"], rel(r["loss"], n["loss"]))
        worst["entropy"] = max(worst["entropy"], rel(r["entropy"], n["entropy"]))
        if len(r["logp"]) != len(n["logp"]):
            worst["logp"] = float("inf")  # different samples: the runs diverged
        else:
            worst["logp"] = max([worst["logp"], *(rel(a, b) for a, b in zip(sorted(r["logp"]), sorted(n["logp"])))])
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--problems", type=int, default=128)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", default="")
    ap.add_argument("--memory", action="store_true", help="Seedbed alone on the memory workload: peak RSS, s/step")
    ap.add_argument("--shape", default="4x8x64", help="--memory: prompts x completions x max new tokens")
    ap.add_argument("--set", action="append", default=[], metavar="KNOB=JSON", help="--memory: a config knob")
    ap.add_argument("--record", default="", help="--memory: write the per-step values (JSON) here")
    ap.add_argument("--compare", default="", help="--memory: per-step values to compare with (a --record file)")
    ap.add_argument("--tiny", action="store_true", help="--memory: the built-in tiny model on arithmetic")
    ap.add_argument("--check-unchunked", action="store_true",
                    help="--memory: each step's loss, entropy and log-probs against the un-chunked path's")
    args = ap.parse_args()
    shape = tuple(int(x) for x in args.shape.split("x"))
    knobs = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    if args.child:
        child(args.child, args.steps, args.seed, args.threads, args.problems, args.samples, shape, knobs,
              args.check_unchunked, args.tiny)
        return
    if args.memory:
        memory_main(args, shape, knobs)
        return

    def spawn(engine: str, seed: int) -> dict:
        proc = subprocess.run([sys.executable, __file__, "--child", engine, "--steps", str(args.steps),
                               "--seed", str(seed), "--threads", str(args.threads), "--problems",
                               str(args.problems), "--samples", str(args.samples)],
                              capture_output=True, text=True, cwd=ROOT)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not line:
            sys.exit(f"{engine} failed:\n{proc.stderr[-3000:]}")
        return json.loads(line[0][7:])

    t_start = time.perf_counter()
    base = spawn("base", 0)["per_problem"]
    print(f"base model: held-out pass@1 {sum(base) / len(base):.3f} ({args.problems} problems x {args.samples})",
          flush=True)
    results: dict[str, list[dict]] = {"trl": [], "seedbed": []}
    for r in range(args.rounds):
        for engine in ("trl", "seedbed"):
            res = spawn(engine, args.seed + r)
            results[engine].append(res)
            after = res["per_problem"]
            print(f"round {r + 1} {engine:<8} {res['tokens'] / res['wall_s']:7.1f} tok/s  "
                  f"{res['wall_s'] / res['steps']:6.2f} s/step  RSS {res['peak_rss_mb']:6.0f} MB  "
                  f"reward {res['reward_first_last'][0]:.2f} -> {res['reward_first_last'][1]:.2f}  "
                  f"pass@1 {sum(after) / len(after):.3f}", flush=True)
    print(f"\n{'engine':<8} {'tokens/s':>9} {'s/step':>7} {'RSS MB':>7} {'pass@1 before':>14} {'after':>6} "
          f"{'gain [95% CI]':>22}")
    summary = {}
    for engine, rs in results.items():
        after = [sum(r["per_problem"][i] for r in rs) / len(rs) for i in range(len(base))]
        gain, lo, hi = gain_with_ci(base, after)
        summary[engine] = {"tokens_per_s": sum(r["tokens"] for r in rs) / sum(r["wall_s"] for r in rs),
                           "s_per_step": sum(r["wall_s"] for r in rs) / sum(r["steps"] for r in rs),
                           "rss": max(r["peak_rss_mb"] for r in rs), "after": sum(after) / len(after),
                           "gain": (gain, lo, hi)}
        s = summary[engine]
        print(f"{engine:<8} {s['tokens_per_s']:9.1f} {s['s_per_step']:7.2f} {s['rss']:7.0f} "
              f"{sum(base) / len(base):14.3f} {s['after']:6.3f} {gain:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    sb, trl = summary["seedbed"], summary["trl"]
    print(f"\nratio seedbed/trl: tokens/s x{sb['tokens_per_s'] / trl['tokens_per_s']:.2f}, "
          f"s/step x{sb['s_per_step'] / trl['s_per_step']:.2f}, RSS x{sb['rss'] / trl['rss']:.2f}; "
          f"wall {time.perf_counter() - t_start:.0f} s in all")


if __name__ == "__main__":
    main()
