"""Prompts and reference answers: the built-in tasks (``training.tasks``), benchmarks, reasoning-gym and users'
JSONL/Parquet/CSV files.

A task yields examples ``{"prompt": str, "answer": str, ...}``; the verifier sees the whole example. Built-in
tasks are generated deterministically from an index, so a seed fixes the data order and the held-out set
(indices drawn from a disjoint range) never overlaps the training prompts.
"""
from __future__ import annotations

import json
import re
import random
from collections.abc import Sequence
from dataclasses import dataclass

from training.benchmarks import BENCHMARKS
from training.data_files import count_rows, file_rows
from training.data_limits import MAX_DATASET_BYTES, DatasetError  # noqa: F401 (the web app reads them here)
from training.data_limits import nesting_error
from training.names import path_component_error
from training.tasks import task_named, tasks

HELD_OUT_OFFSET = 10_000_000  # held-out built-in problems come from indices past this
_file_rows = file_rows  # the readers' old name (training.data_files)


OTHER_REWARDS = {"file": [{"name": "math", "weight": 1.0}], "humaneval": [{"name": "code", "weight": 1.0}],
                 "ifbench": [{"name": "ifeval", "weight": 1.0}]}
"""The default reward specs of the sources that are not generated tasks (a task's is its ``Task.rewards``)."""

# --- reasoning-gym's procedural tasks: "reasoning_gym:<name>" (the package's generators, seeded) ---------------

REASONING_GYM = "reasoning_gym:"
# One held-out set per task, whatever the run's seed: seeds of a sweep are evaluated on the same problems.
HELD_OUT_SEED = 2_147_483_629
HELD_OUT_SIZE = 10_000


def reasoning_gym_names() -> list[str]:
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


DATASET = "dataset:"  # a dataset of the web app's library: "dataset:<name>" (or "dataset:<project>/<name>")
_DATASET_NAME = re.compile(r"^(?:[\w@+][\w.@+-]{0,149}/)?\w[\w.-]{0,99}\Z")
# Fields of a row that a mapping may name, under the names the verifiers read (code: tests, entry_point,
# setup_code; ifeval: constraints) and the prompt template reads (system_prompt).
MAPPED_FIELDS = ("tests", "entry_point", "setup_code", "constraints", "system_prompt")


def is_file_task(task: str) -> bool:
    """Rows read from a file: ``file`` (a path) or ``dataset:<name>`` (a library entry, resolved to its file)."""
    return task == "file" or (isinstance(task, str) and task.startswith(DATASET))


def task_error(task: str) -> str:
    """"" when ``task`` names a task Seedbed can draw prompts from, else the field message."""
    if task in tasks() or task in BENCHMARKS or task == "file":
        return ""
    if isinstance(task, str) and task.startswith(DATASET):
        ref = task[len(DATASET):]
        if _DATASET_NAME.match(ref) and not any(path_component_error(part) for part in ref.split("/")):
            return ""
        return f"dataset:<name>: a name of letters, digits, '.', '_' or '-' (first a letter or digit); got {task!r}"
    if isinstance(task, str) and task.startswith(REASONING_GYM):
        name = task[len(REASONING_GYM):]
        if name in reasoning_gym_names():
            return ""
        return f"reasoning-gym has no task {name!r} (e.g. basic_arithmetic, gsm_symbolic, chain_sum, leg_counting)"
    return (f"must be {', '.join([*tasks(), *BENCHMARKS])}, file, dataset:<name> or reasoning_gym:<task> "
            f"(e.g. reasoning_gym:basic_arithmetic); got {task!r}")


def task_params_error(task: str, params) -> str:
    """"" when ``params`` suit the task: a reasoning-gym task's own config fields (its difficulty: e.g.
    basic_arithmetic's max_terms, max_digits), with scalar or list values its config accepts; nothing else
    takes parameters."""
    if not params:
        return ""
    if not isinstance(params, dict):
        return f"must be a mapping of the task's settings; got {type(params).__name__}"
    if not task.startswith(REASONING_GYM) or task_error(task):
        return "only a reasoning_gym:<task> takes parameters"
    import dataclasses

    from reasoning_gym.factory import DATASETS

    config_cls = DATASETS[task[len(REASONING_GYM):]][1]
    accepted = sorted(f.name for f in dataclasses.fields(config_cls) if f.name not in ("seed", "size"))
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        return f"unknown setting(s) {unknown} of {task}; accepted: {', '.join(accepted)}"
    for key, value in params.items():
        if not isinstance(value, (bool, int, float, str, list)) or (isinstance(value, float) and value != value):
            return f"{key}: expected a number, a string, true/false or a list; got {value!r}"
    try:
        config_cls(**params, seed=0, size=1).validate()
    except Exception as exc:  # the package's own checks (AssertionError, ValueError, TypeError)
        return f"{task}: {exc or type(exc).__name__}"
    return ""


# What a task's prompts ask for when the run's answer_instruction is empty: the form its verifier reads.
DEFAULT_INSTRUCTIONS = {
    "humaneval": "Complete the function. Reply with the whole function, its imports included, in one ```python "
                 "code block.",
}


def default_instruction(task: str) -> str:
    return DEFAULT_INSTRUCTIONS.get(task, "")


def default_rewards(task: str) -> list[dict]:
    """The reward spec a task is scored with when the config names none."""
    if task.startswith(REASONING_GYM):
        return [{"name": "reasoning_gym", "weight": 1.0}]
    generated = tasks().get(task)
    if generated is not None:
        return [dict(item) for item in generated.rewards]
    return OTHER_REWARDS["file" if is_file_task(task) else task]


class ReasoningGymExamples(Sequence):
    """``size`` problems of one reasoning-gym task from ``seed``, made when read (the package's datasets are
    lazy). Each example keeps the package's entry (question, answer, metadata) for its own ``score_answer``."""

    def __init__(self, name: str, size: int, seed: int, params: dict | None = None):
        import reasoning_gym

        self.name = name
        self.dataset = reasoning_gym.create_dataset(name, size=size, seed=seed, **(params or {}))

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict:
        entry = self.dataset[index]
        return {**entry, "prompt": entry["question"], "answer": str(entry["answer"])}


DATA_SUFFIXES = (".jsonl", ".parquet", ".csv")


def row_example(where: str, row, prompt_field: str, answer_field: str, fields: dict | None = None) -> dict:
    """A row as an example: its prompt and answer, and ``fields`` ({name a verifier reads: the row's column},
    e.g. {"tests": "test"}) copied under the names the verifiers and the prompt template read.

    The one check of a dataset row, wherever a row is read: the upload's and the launch's check of the first
    rows (``check_file_dataset``, the upload's columns and preview), the worker's read of every row
    (``load_file_dataset``), the run page's prompt (``first_prompt``). So a bad row the first rows' check did not
    reach fails a run with the message an upload gives for it (``<file>:<line>: ...``). The rules: the row is an
    object; it nests at most MAX_NESTING lists and objects deep (``data_limits.nesting_error``); it has every
    mapped column; its prompt is a non-empty string. A DatasetError names ``where`` and the field.

    >>> row_example("d.jsonl:3", {"q": "1+1?", "a": 2}, "q", "a")["answer"]
    '2'
    >>> row_example("d.jsonl:1001", [1, 2], "q", "a")
    Traceback (most recent call last):
    ...
    training.data.DatasetError: d.jsonl:1001: expected an object, got list
    """
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
    if nesting_error(where, row):
        raise DatasetError(nesting_error(where, row))
    mapping = {"prompt": prompt_field, **({"answer": answer_field} if answer_field else {}), **(fields or {})}
    for column in mapping.values():
        if column not in row:
            raise DatasetError(f"{where}: missing field {column!r} (the row has {', '.join(map(str, row))[:300]})")
    if not isinstance(row[prompt_field], str) or not row[prompt_field].strip():
        raise DatasetError(f"{where}: field {prompt_field!r} must be a non-empty string")
    ex = dict(row)
    for name, column in mapping.items():
        ex[name] = row[column]
    # no answer column (e.g. code judged by its tests, instructions by their constraints): an empty reference
    answer = row[answer_field] if answer_field else ""
    ex["answer"] = answer if isinstance(answer, str) else json.dumps(answer)
    return ex


def data_fields_error(fields) -> str:
    """"" when ``fields`` maps names the verifiers read (MAPPED_FIELDS) to column names, else the message."""
    if not isinstance(fields, dict):
        return f"must be a mapping of {', '.join(MAPPED_FIELDS)} to column names; got {type(fields).__name__}"
    for name, column in fields.items():
        if name not in MAPPED_FIELDS:
            return f"unknown field {name!r}; a mapping names {', '.join(MAPPED_FIELDS)}"
        if not isinstance(column, str) or not 0 < len(column) <= 200:
            return f"{name}: a column name of 1-200 characters; got {column!r}"
    return ""


def load_file_dataset(path: str, prompt_field: str = "prompt", answer_field: str = "answer",
                      fields: dict | None = None) -> list[dict]:
    """Read a JSONL, Parquet or CSV file into examples; a bad row raises DatasetError naming its line."""
    examples = [row_example(where, row, prompt_field, answer_field, fields)
                for where, row in _file_rows(path)]
    if not examples:
        raise DatasetError(f"{path}: the dataset is empty")
    return examples


CHECKED_ROWS = 1000  # rows a request reads to check a dataset (the worker reads all of it)


def check_file_dataset(path: str, prompt_field: str = "prompt", answer_field: str = "answer",
                       max_rows: int = CHECKED_ROWS, fields: dict | None = None) -> int:
    """Check a dataset where a request enters, in bounded memory and time: the size limit, then the first
    ``max_rows`` rows parsed and checked as training reads them; the remaining rows are only counted, not decoded
    (``data_files.count_rows``). Returns the number of rows. Raises DatasetError naming the line."""
    count = 0
    rows = _file_rows(path)
    for where, row in rows:
        row_example(where, row, prompt_field, answer_field, fields)
        count += 1
        if count >= max_rows:
            break
    if count == 0:
        raise DatasetError(f"{path}: the dataset is empty")
    rows.close()
    return count if count < max_rows else count_rows(path)


def held_out_size(n: int, fraction: float) -> int:
    """How many of ``n`` rows ``split_held_out`` keeps out: round(n·fraction), at least one and at most n-1
    when n >= 2 and fraction > 0."""
    return min(max(round(n * fraction), 1), n - 1) if n >= 2 and fraction > 0 else 0


def split_held_out(n: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices 0..n-1 split into (training, held-out) by a permutation seeded with ``seed``; both sorted.

    round(n·fraction) indices are held out, at least one and at most n-1 when n >= 2 and fraction > 0. Pass
    a fixed seed (not the run's) so every seed of a sweep is evaluated on the same problems.

    >>> split_held_out(10, 0.2, seed=0)
    ([0, 1, 2, 3, 4, 5, 6, 9], [7, 8])
    """
    if n < 0 or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"split_held_out: need n >= 0 and 0 <= fraction <= 1; got n={n}, fraction={fraction}")
    size = held_out_size(n, fraction)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return sorted(order[size:]), sorted(order[:size])


BENCHMARK_HELD_OUT_FRACTION = 0.2  # of a benchmark's problems, held out with HELD_OUT_SEED


def data_generator_seed(seed: int) -> int:
    """The seed of the training loop's data generator, which draws each step's prompts (training.loop seeds its
    data, sampling and shuffle generators with seed·1000 + 0, 1, 2)."""
    return seed * 1000


def mt19937_first(seed: int) -> int:
    """The first 32-bit output of MT19937 seeded with init_genrand(seed mod 2**32): what torch's CPU generator
    (``torch.Generator().manual_seed(seed)``, ATen's mt19937 ``init_with_uint32``) gives first, without torch.

    Matsumoto & Nishimura 1998, "Mersenne Twister", ACM TOMACS 8(1): state x[0] = seed, x[j] = 1812433253 ·
    (x[j-1] xor (x[j-1] >> 30)) + j mod 2**32; the first output twists x[0] with x[1] and x[397], then tempers it.

    >>> mt19937_first(5489)  # the reference implementation's default seed: its first output
    3499211612
    """
    state = [seed & 0xFFFFFFFF]
    for j in range(1, 398):  # only x[0], x[1] and x[397] enter the first output
        prev = state[-1]
        state.append((1812433253 * (prev ^ (prev >> 30)) + j) & 0xFFFFFFFF)
    y = (state[0] & 0x80000000) | (state[1] & 0x7FFFFFFF)
    x = state[397] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
    x ^= x >> 11
    x ^= (x << 7) & 0x9D2C5680
    x ^= (x << 15) & 0xEFC60000
    return x ^ (x >> 18)


MAX_FIRST_DRAW = 2**28 - 1  # the largest range first_draw is checked for


def first_draw(n: int, generator_seed: int) -> int:
    """The first index ``torch.randint(0, n, (k,), generator=torch.Generator().manual_seed(generator_seed))``
    gives, for any k, without torch: ATen's CPU randint draws serially and maps the generator's first 32-bit
    output x to x mod n (``uniform_int_from_to_distribution``). Checked against torch for n < 2**28
    (tests/training/test_first_prompt.py); larger ranges are drawn another way, and no task has one (a generated
    task draws from 10**7 indices, a data file holds fewer rows).

    >>> first_draw(10, 0)
    4
    """
    if not 0 < n <= MAX_FIRST_DRAW:
        raise ValueError(f"first_draw: need 0 < n < 2**28; got n={n}")
    return mt19937_first(generator_seed) % n


@dataclass
class PromptSource:
    """Draws training prompts (with a torch Generator, so its state is checkpointed) and held-out ones."""

    task: str
    examples: Sequence[dict] | None = None  # file datasets, reasoning-gym tasks; None for built-in generated tasks
    held_out: Sequence[dict] | None = None

    def sample(self, n: int, generator: "torch.Generator") -> list[dict]:
        import torch  # here, not at the top: the web process reads this module and never needs torch

        if self.examples is None:
            idx = torch.randint(0, HELD_OUT_OFFSET, (n,), generator=generator).tolist()
            example = task_named(self.task).example
            return [example(i) for i in idx]
        idx = torch.randint(0, len(self.examples), (n,), generator=generator).tolist()
        return [self.examples[i] for i in idx]

    def first_sample(self, generator_seed: int) -> dict:
        """The first example ``sample`` draws with a fresh generator seeded ``generator_seed`` (``first_draw``):
        the first prompt of a run's first step, known without torch (the run page shows it)."""
        if self.examples is None:
            return task_named(self.task).example(first_draw(HELD_OUT_OFFSET, generator_seed))
        return self.examples[first_draw(len(self.examples), generator_seed)]

    def eval_set(self, n: int) -> list[dict]:
        if self.examples is None:
            example = task_named(self.task).example
            return [example(HELD_OUT_OFFSET + i) for i in range(n)]
        pool = self.held_out if self.held_out is not None else self.examples
        return [pool[i] for i in range(min(n, len(pool)))]


def prompt_source(cfg) -> PromptSource:
    """A run's prompts as training draws them, from its config (``training.config.TrainConfig``): its task with
    task_params, task_size and seed, its data file with field mapping and held-out split. The one place a run's
    source is built: the loop, the TRL and verl engines, and the run page's prompt (``training.prompts``)."""
    return make_prompt_source(cfg.task, cfg.data_path, cfg.prompt_field, cfg.answer_field, seed=cfg.seed,
                              task_size=cfg.task_size, task_params=cfg.task_params, data_fields=cfg.data_fields,
                              held_out_fraction=cfg.held_out_fraction, split_seed=cfg.split_seed)


def make_prompt_source(task: str, data_path: str = "", prompt_field: str = "prompt",
                       answer_field: str = "answer", *, seed: int = 0, task_size: int = 1000,
                       task_params: dict | None = None, data_fields: dict | None = None,
                       held_out_fraction: float = 0.0, split_seed: int = 0) -> PromptSource:
    if task in tasks():
        return PromptSource(task)
    if task.startswith(REASONING_GYM):
        name = task[len(REASONING_GYM):]
        return PromptSource(task, examples=ReasoningGymExamples(name, task_size, seed, task_params),
                            held_out=ReasoningGymExamples(name, HELD_OUT_SIZE, HELD_OUT_SEED, task_params))
    if task in BENCHMARKS:
        examples = BENCHMARKS[task]()
        train, held = split_held_out(len(examples), BENCHMARK_HELD_OUT_FRACTION, HELD_OUT_SEED)
        return PromptSource(task, examples=[examples[i] for i in train], held_out=[examples[i] for i in held])
    examples = load_file_dataset(data_path, prompt_field, answer_field, data_fields)
    if held_out_fraction > 0:  # rows kept out of training for the periodic eval, the same for every seed
        train_idx, held_idx = split_held_out(len(examples), held_out_fraction, split_seed)
        return PromptSource(task, examples=[examples[i] for i in train_idx],
                            held_out=[examples[i] for i in held_idx])
    return PromptSource(task, examples=examples)


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """Prompt token ids of plain text: the tokenizer's BOS (when it has one and does not add it itself), then
    the text (training.prompts renders chat prompts)."""
    from training.prompts import PLAIN

    return PLAIN.encode(tokenizer, prompt)
