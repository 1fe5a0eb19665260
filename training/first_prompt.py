"""The first prompt a run's training gives the model, known without training (docs/architecture.md "The training
core"): which example it draws first (``first_training_example``: the loop's own prompt source and data
generator, without torch) and how it is rendered (``preview``: ``training.prompts.PromptTemplate``, as training
renders it). The run page shows it; ``first_question`` is a task's first example for the reward dry run.

It sits above ``training.data`` and ``training.prompts``: the data renders plain prompts with the template, and
this reads examples through the data, so neither of those imports the other back.
"""
from __future__ import annotations

import functools

from training.data import (DatasetError, data_generator_seed, first_draw, is_file_task, row_example,
                           make_prompt_source, prompt_source, split_held_out)
from training.data_files import count_rows, row_at


def first_question(task: str, data_path: str = "", prompt_field: str = "prompt", answer_field: str = "answer",
                   data_fields: dict | None = None) -> dict:
    """One example of the task (the first), cheaply: a file's first row, a generator's first held-out item."""
    if is_file_task(task):
        where, row = row_at(data_path, 0)
        return row_example(where, row, prompt_field, answer_field, data_fields)
    return make_prompt_source(task, task_size=1).eval_set(1)[0]


def first_training_example(config) -> dict:
    """The first example a run's training draws: its first step's first prompt, from its prompt source as training
    builds it (``data.prompt_source``: task_params, task_size, seed, data file, mapping and split) with the loop's
    data generator (``data.data_generator_seed``), known without torch (``PromptSource.first_sample``). A data file
    is not loaded: its rows counted without decoding them (``data_files.count_rows``), the training rows split off
    as ``make_prompt_source`` does, that one row decoded (``data_files.row_at``): a view of the run page decodes
    one row of the file, whatever its size."""
    seed = data_generator_seed(config.seed)
    if not is_file_task(config.task):
        return prompt_source(config).first_sample(seed)
    n = count_rows(config.data_path)
    if not n:
        raise DatasetError(f"{config.data_path}: the dataset is empty")
    where, row = row_at(config.data_path, _first_row(n, config.held_out_fraction, config.split_seed, seed))
    return row_example(where, row, config.prompt_field, config.answer_field, config.data_fields)


@functools.lru_cache(maxsize=256)
def _first_row(n: int, held_out_fraction: float, split_seed: int, generator_seed: int) -> int:
    """The file row (from 0) of the first training draw among ``n`` rows: the draw's index into the training
    rows (those ``split_held_out`` leaves), cached (the split shuffles n indices once, not on every view)."""
    rows = split_held_out(n, held_out_fraction, split_seed)[0] if held_out_fraction > 0 else range(n)
    return rows[first_draw(len(rows), generator_seed)]


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
