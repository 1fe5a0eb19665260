"""How a task's question becomes the model's prompt: plain text for a base or built-in model; for a chat model,
its chat template (through the tokenizer: system prompt, the question as the user's turn with the
answer-format instruction, then the assistant's turn opened), so the model sees what it was tuned on.

The same template renders prompts for training, for the periodic held-out eval and for evaluation jobs, and the
run page shows the first prompt training draws, rendered by the same function (``first_training_example``,
``PromptTemplate.render_example``; docs/architecture.md "The training core").
"""
from __future__ import annotations

from dataclasses import dataclass

CHAT_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class PromptTemplate:
    chat: str = "auto"        # auto: the tokenizer's chat template when it has one; on: required; off: plain text
    system_prompt: str = ""   # chat only: the system turn ("" keeps the template's own default, if any)
    instruction: str = ""     # appended to the question, e.g. "Put your final answer in <answer></answer>."
    stop: tuple[str, ...] = ()  # stop strings: a reply ends once its text contains one (e.g. "</answer>")

    @classmethod
    def from_dict(cls, data: dict | None) -> "PromptTemplate":
        data = data or {}
        return cls(chat=data.get("chat", "auto"), system_prompt=data.get("system_prompt", ""),
                   instruction=data.get("instruction", ""), stop=tuple(data.get("stop", ())))

    def to_dict(self) -> dict:
        return {"chat": self.chat, "system_prompt": self.system_prompt, "instruction": self.instruction,
                "stop": list(self.stop)}

    def uses_chat(self, tokenizer) -> bool:
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if self.chat == "on" and not has_template:
            raise ValueError("chat_template: 'on' but the model's tokenizer has no chat template")
        return self.chat != "off" and has_template

    def user_text(self, question: str) -> str:
        return f"{question}\n\n{self.instruction}" if self.instruction else question

    def render(self, tokenizer, question: str, system_prompt: str | None = None) -> str:
        """The prompt as text: what the model is given, special tokens included. ``system_prompt``: a data
        row's own (a dataset's mapped system_prompt field), in place of the run's."""
        if not self.uses_chat(tokenizer):
            return self.user_text(question)
        system = system_prompt or self.system_prompt
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": self.user_text(question)}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode(self, tokenizer, question: str, system_prompt: str | None = None) -> list[int]:
        """Prompt token ids. Plain text: the tokenizer's BOS (when it has one and does not add it itself),
        then the text. Chat: the rendered template as it is (it carries its own special tokens)."""
        if self.uses_chat(tokenizer):
            return tokenizer.encode(self.render(tokenizer, question, system_prompt), add_special_tokens=False)
        ids = tokenizer.encode(self.render(tokenizer, question), add_special_tokens=True)
        bos = tokenizer.bos_token_id
        if bos is not None and (not ids or ids[0] != bos):
            ids = [bos] + ids
        return ids


    def render_example(self, tokenizer, example: dict) -> str:
        """An example's prompt as text (``render``), with its own system prompt when its dataset maps one: the
        text ``encode_example`` gives the model, and the run page shows."""
        return self.render(tokenizer, example["prompt"], own_system_prompt(example))

    def encode_example(self, tokenizer, example: dict) -> list[int]:
        """An example's prompt ids, with its own system prompt when its dataset maps one."""
        return self.encode(tokenizer, example["prompt"], own_system_prompt(example))


def own_system_prompt(example: dict) -> str | None:
    """A data row's own system prompt (a dataset's mapped system_prompt field), when it has one."""
    own = example.get("system_prompt")
    return own if isinstance(own, str) else None


PLAIN = PromptTemplate(chat="off")


def first_question(task: str, data_path: str = "", prompt_field: str = "prompt", answer_field: str = "answer",
                   data_fields: dict | None = None) -> dict:
    """One example of the task (the first), cheaply: a file's first row, a generator's first held-out item."""
    from training.data import _as_example, _file_rows, is_file_task, make_prompt_source

    if is_file_task(task):
        where, row = next(iter(_file_rows(data_path)))
        return _as_example(where, row, prompt_field, answer_field, data_fields)
    return make_prompt_source(task, task_size=1).eval_set(1)[0]


def first_training_example(config) -> dict:
    """The first example a run's training draws: its first step's first prompt, from its prompt source as training
    builds it (``data.prompt_source``: task_params, task_size, seed, data file, mapping and split) with the loop's
    data generator (``data.data_generator_seed``), known without torch (``PromptSource.first_sample``). A data file
    is streamed, not loaded: rows counted, the training rows split off as ``make_prompt_source`` does, one row read."""
    from training.data import data_generator_seed, is_file_task, prompt_source

    seed = data_generator_seed(config.seed)
    if not is_file_task(config.task):
        return prompt_source(config).first_sample(seed)
    from itertools import islice

    from training.data import DatasetError, _as_example, _file_rows, first_draw, split_held_out

    n = sum(1 for _ in _file_rows(config.data_path))
    if not n:
        raise DatasetError(f"{config.data_path}: the dataset is empty")
    rows = (split_held_out(n, config.held_out_fraction, config.split_seed)[0] if config.held_out_fraction > 0
            else range(n))
    where, row = next(islice(_file_rows(config.data_path), rows[first_draw(len(rows), seed)], None))
    return _as_example(where, row, config.prompt_field, config.answer_field, config.data_fields)


def preview(config, tokenizer) -> dict:
    """What the model is given first in a run's training (``first_training_example``), rendered as training renders
    it (``PromptTemplate.render_example``): {"question", "answer", "text", "tokens", "chat", "first_step"};
    first_step: Seedbed's loop draws it first (TRL and verl order their data themselves: for them it is one of
    the run's training prompts)."""
    template = config.prompt_template()
    example = first_training_example(config)
    return {"question": example["prompt"], "answer": example["answer"],
            "text": template.render_example(tokenizer, example),
            "tokens": len(template.encode_example(tokenizer, example)), "chat": template.uses_chat(tokenizer),
            "first_step": config.engine == "seedbed"}
