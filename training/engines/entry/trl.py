"""One rank of a TRL run: ``torchrun ... -m training.engines.entry.trl <run folder>`` (training.engines.trl).

Every rank builds the same ``GRPOTrainer`` from the run's ``seedbed_config.json``: the model and tokenizer of
the run, the task's prompts rendered by Seedbed's prompt template, one TRL reward function per Seedbed
verifier (weights as in the reward spec, so TRL's weighted sum is Seedbed's reward) plus the DAPO overlong
term when configured, and ``SeedbedCallback``. Rank 0 writes the events (training.engines.events).
"""
from __future__ import annotations

import json
import os
import sys
import time


from training.engines.events import EventWriter
from training.engines.entry.rank import rank_setup
from training.engines.trl import map_metrics, trl_args, updates_per_step

MAX_BUILTIN_ROWS = 50_000  # generated tasks: rows of the TRL dataset (TRL's sampler cycles over them)


def dataset_rows(cfg, tokenizer) -> tuple[list[dict], "PromptSource"]:
    """The task's training prompts as TRL rows: the rendered prompt text, and the example (what the verifiers
    read) as JSON, passed back to the reward functions by TRL."""
    from training.data import prompt_source
    from training.tasks import tasks

    source = prompt_source(cfg)
    if source.examples is None:  # a generated task: the same problems the loop's sampler draws from
        n = min(MAX_BUILTIN_ROWS, cfg.total_steps * cfg.prompts_per_step)
        example = tasks()[cfg.task].example
        examples = [example(i) for i in range(n)]
    else:
        examples = [source.examples[i] for i in range(len(source.examples))]
    template = cfg.prompt_template()
    rows = [{"prompt": prompt_text(template, tokenizer, ex), "example": json.dumps(ex, default=str)}
            for ex in examples]
    return rows, source


def prompt_text(template, tokenizer, example: dict) -> str:
    """The prompt as the text TRL tokenizes (``tokenizer(text)``) into the ids Seedbed's loop gives the model
    (``PromptTemplate.encode_example``): a plain prompt gets the BOS the loop puts in front of it when the
    tokenizer does not add one itself; a chat prompt loses a leading BOS the tokenizer would add again."""
    own = example.get("system_prompt")
    text = template.render(tokenizer, example["prompt"], own if isinstance(own, str) else None)
    want = template.encode_example(tokenizer, example)
    bos = tokenizer.bos_token or ""
    for candidate in (text, bos + text, text.removeprefix(bos) if bos else text):
        if tokenizer(candidate)["input_ids"] == want:
            return candidate
    return text  # a tokenizer that round-trips neither way: its own reading of the rendered prompt


class RewardTerms:
    """Seedbed's reward spec as TRL reward functions: one per verifier (TRL logs rewards/<name>/mean), then
    the overlong term. The last function called for a batch also logs accuracy and verifier errors, enforces
    max_verifier_error_rate and (rank 0) writes the step's samples."""

    def __init__(self, cfg, writer: EventWriter | None, ups: int):
        from training.data import default_rewards
        from training.verifiers import build_reward

        self.cfg, self.writer, self.ups = cfg, writer, ups
        self.spec = build_reward(cfg.rewards or default_rewards(cfg.task))
        self.scores: dict[str, list] = {}
        self.details: dict[str, list] = {}
        self.funcs, self.weights = [], []
        for term in self.spec.terms:
            self.funcs.append(self._term_fn(term))
            self.weights.append(term.weight)
        if cfg.overlong_buffer_len:
            self.funcs.append(self._overlong_fn())
            self.weights.append(1.0)

    def _term_fn(self, term):
        from training.verifiers import VerifierResult
        from training.verifiers.hybrid import score_batch

        def fn(prompts, completions, example, **kwargs):
            examples = [json.loads(e) for e in example]
            results = score_batch(term.verifier, completions, examples)
            self.scores[term.key] = [r.score if isinstance(r, VerifierResult) else None for r in results]
            self.details[term.key] = [r.details if isinstance(r, VerifierResult) else {"error": str(r)}
                                      for r in results]
            if term is self.spec.terms[-1]:
                self._after_batch(examples, completions, kwargs)
            return self.scores[term.key]

        fn.__name__ = term.key
        return fn

    def _overlong_fn(self):
        from training.algorithms import overlong_penalty

        def fn(prompts, completions, completion_ids, **kwargs):
            import torch

            lengths = torch.tensor([len(ids) for ids in completion_ids])
            return overlong_penalty(lengths, self.cfg.max_new_tokens, self.cfg.overlong_buffer_len,
                                    self.cfg.overlong_penalty_factor).tolist()

        fn.__name__ = "overlong"
        return fn

    def _after_batch(self, examples, completions, kwargs) -> None:
        n = len(completions)
        columns = list(self.scores.values())
        failed = [any(col[i] is None for col in columns) for i in range(n)]
        correct = [all(col[i] is not None and col[i] >= 1.0 for col in columns) for i in range(n)]
        log_metric = kwargs.get("log_metric")
        if log_metric:
            log_metric("accuracy", sum(correct) / max(1, n))
            log_metric("verifier/errors", float(sum(failed)))
        if n and sum(failed) / n > self.cfg.max_verifier_error_rate:
            raise RuntimeError(f"{sum(failed)} of {n} completions could not be judged, more than "
                               f"max_verifier_error_rate ({self.cfg.max_verifier_error_rate})")
        state = kwargs.get("trainer_state")
        if self.writer is not None and state is not None and self.cfg.samples_per_step:
            # as the loop logs them: the first completion of each group (this rank's groups), with its question,
            # reference answer and each verifier's details
            step = state.global_step // self.ups + 1  # generated at the start of this Seedbed step
            weights = [t.weight for t in self.spec.terms]
            rows = []
            for i in range(0, n, self.cfg.group_size)[:self.cfg.samples_per_step]:
                total = sum(w * col[i] for w, col in zip(weights, columns) if col[i] is not None)
                rows.append({"prompt": examples[i]["prompt"], "completion": completions[i], "reward": total,
                             "answer": examples[i].get("answer"),
                             "details": {k: d[i] for k, d in self.details.items()}})
            self.writer.write({"step": step, "samples": rows})


def make_callback(cfg, writer: EventWriter | None, ups: int, tokenizer, source):
    from transformers import TrainerCallback

    stop_file = os.environ.get("SEEDBED_STOP_FILE", "")

    class SeedbedCallback(TrainerCallback):
        """Streams TRL's logs as Seedbed metrics (rank 0), saves at the end, and stops every rank together,
        after saving, once the stop file exists (checked at Seedbed step boundaries, agreed by all ranks)."""

        def __init__(self):
            self.last_log = time.perf_counter()
            self.pending_eval: dict[str, float] = {}

        def on_step_end(self, args, state, control, model=None, **kwargs):
            import torch

            if state.global_step % ups:
                return control
            step = state.global_step // ups
            if cfg.eval_every and step % cfg.eval_every == 0 and state.is_world_process_zero:
                self.pending_eval = periodic_eval(cfg, model, tokenizer, source, step)
            stop = torch.tensor([1.0 if stop_file and os.path.exists(stop_file) else 0.0], device=args.device)
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.all_reduce(stop, op=torch.distributed.ReduceOp.MAX)
            if stop.item() > 0:
                control.should_save = True
                control.should_training_stop = True
            if state.global_step >= state.max_steps:
                control.should_save = True
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            if writer is None or not logs or "reward" not in logs:
                return
            now = time.perf_counter()
            seconds, self.last_log = now - self.last_log, now
            metrics = map_metrics(logs)
            metrics["step_time_s"] = seconds
            if "length/mean" in metrics and seconds > 0:
                metrics["tokens_per_s"] = metrics["length/mean"] * cfg.prompts_per_step * cfg.group_size / seconds
            metrics.update(self.pending_eval)
            self.pending_eval = {}
            writer.metrics(max(1, state.global_step // ups), metrics)

        def on_save(self, args, state, control, **kwargs):
            if writer is not None:
                writer.write({"step": state.global_step // ups,
                              "checkpoint": os.path.join(args.output_dir, f"checkpoint-{state.global_step}")})

    return SeedbedCallback()


def periodic_eval(cfg, model, tokenizer, source, step: int) -> dict:
    """pass@k on the held-out problems, as the Seedbed loop's periodic eval (same function, same seed)."""
    import torch

    from training.loop import periodic_eval as loop_eval

    with torch.no_grad():
        return loop_eval(cfg, model, tokenizer, source, step)


def main(argv: list[str]) -> int:
    out_dir = argv[1]
    cfg = rank_setup(out_dir)
    from trl import GRPOConfig, GRPOTrainer

    from training.loop import load_model

    rank = int(os.environ.get("RANK", "0"))
    writer = EventWriter(os.environ["SEEDBED_EVENTS"]) if rank == 0 else None
    ups = updates_per_step(cfg)
    model, tokenizer = load_model(cfg.resolved_model_path(), "cpu")  # (as the loop loads it; TRL places it)
    from datasets import Dataset

    rows, source = dataset_rows(cfg, tokenizer)
    rewards = RewardTerms(cfg, writer, ups)
    args = GRPOConfig(**trl_args(cfg, out_dir), reward_weights=rewards.weights)
    trainer = GRPOTrainer(model=model, reward_funcs=rewards.funcs, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer, callbacks=[make_callback(cfg, writer, ups, tokenizer, source)])
    if writer is not None:
        writer.write({"engine_config": {"engine": "trl", "trl_version": _version("trl"), **json.loads(args.to_json_string())}})
    resume = os.environ.get("SEEDBED_TRL_RESUME") or None
    trainer.train(resume_from_checkpoint=resume)
    if writer is not None:
        writer.close()
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
