"""Users' data files as training reads them: JSONL, Parquet and CSV rows, a field mapping onto the names verifiers
read, a held-out split that is the same for every seed, a row's own system prompt, and the config's checks."""
from __future__ import annotations

import json

import pytest

from training.config import TrainConfig
from training.data import DatasetError, check_file_dataset, load_file_dataset, make_prompt_source
from training.fields import FieldErrors


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


ROWS = [{"q": f"question {i}", "a": str(i), "t": f"assert f({i}) == {i}", "sys": f"system {i}"} for i in range(50)]


def test_a_mapping_copies_columns_under_the_names_verifiers_read(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    rows = load_file_dataset(path, "q", "a", {"tests": "t", "system_prompt": "sys"})
    assert rows[3]["prompt"] == "question 3" and rows[3]["answer"] == "3"
    assert rows[3]["tests"] == "assert f(3) == 3" and rows[3]["system_prompt"] == "system 3"
    with pytest.raises(DatasetError, match=r"d.jsonl:1: missing field 'nope' \(the row has q, a, t, sys\)"):
        load_file_dataset(path, "q", "a", {"tests": "nope"})
    no_answer = load_file_dataset(path, "q", "", {"tests": "t"})
    assert no_answer[0]["answer"] == ""


def test_csv_rows_are_streamed_with_quoted_newlines_and_bad_rows_name_their_line(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text('prompt,answer\n"two\nlines",1\nplain,2\n')
    rows = load_file_dataset(str(path))
    assert [r["prompt"] for r in rows] == ["two\nlines", "plain"]
    assert check_file_dataset(str(path), max_rows=1) == 2  # rows, not lines
    path.write_text("prompt,answer\na,1\nb,2,3\n")
    with pytest.raises(DatasetError, match=r"d.csv:3: more values than the header's 2 columns"):
        load_file_dataset(str(path))


def test_the_held_out_split_is_disjoint_from_training_and_the_same_for_every_seed(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    sources = [make_prompt_source("dataset:d", path, "q", "a", seed=seed, held_out_fraction=0.2, split_seed=5)
               for seed in (0, 1)]
    held = [tuple(ex["prompt"] for ex in s.eval_set(100)) for s in sources]
    assert held[0] == held[1] and len(held[0]) == 10
    train = {ex["prompt"] for ex in sources[0].examples}
    assert len(train) == 40 and not train & set(held[0])
    other = make_prompt_source("dataset:d", path, "q", "a", held_out_fraction=0.2, split_seed=6)
    assert {ex["prompt"] for ex in other.eval_set(100)} != set(held[0])
    plain = make_prompt_source("file", path, "q", "a")
    assert plain.held_out is None and len(plain.examples) == 50


def test_a_rows_own_system_prompt_replaces_the_runs(tiny_model_dir):
    from transformers import AutoTokenizer

    from training.prompts import PromptTemplate

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = ("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                               "{% if add_generation_prompt %}[assistant]{% endif %}")
    template = PromptTemplate(chat="on", system_prompt="run's")
    assert template.render(tokenizer, "1+1=", "row's") == "[system]row's[user]1+1=[assistant]"
    own = template.encode_example(tokenizer, {"prompt": "1+1=", "system_prompt": "row's"})
    default = template.encode_example(tokenizer, {"prompt": "1+1="})
    assert own == tokenizer.encode("[system]row's[user]1+1=[assistant]", add_special_tokens=False)
    assert default == tokenizer.encode("[system]run's[user]1+1=[assistant]", add_special_tokens=False) != own


def test_the_config_checks_dataset_tasks_mappings_and_splits(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    cfg = TrainConfig.from_dict({"task": "dataset:mine", "data_path": path, "prompt_field": "q", "answer_field": "a",
                                 "data_fields": {"tests": "t"}, "held_out_fraction": 0.1})
    assert cfg.task == "dataset:mine"
    cases = [({"task": "dataset:mine"}, "data_path", "fill it in from the project's dataset library"),
             ({"task": "dataset:", "data_path": path}, "task", "dataset:<name>"),
             ({"task": "file", "data_path": path, "prompt_field": "q", "answer_field": "a",
               "data_fields": {"code": "t"}}, "data_fields", "unknown field 'code'"),
             ({"task": "file", "data_path": path, "prompt_field": "q", "answer_field": "a",
               "data_fields": {"tests": "missing"}}, "data_path", "missing field 'missing'"),
             ({"task": "file", "data_path": path, "held_out_fraction": 0.9}, "held_out_fraction", "0.5"),
             ({"task": "file", "data_path": str(tmp_path / "d.txt")}, "data_path", "no such file")]
    for data, field, message in cases:
        with pytest.raises(FieldErrors) as err:
            TrainConfig.from_dict(data)
        assert field in err.value.errors and message in err.value.errors[field], (data, err.value.errors)


def test_max_new_tokens_must_leave_room_in_the_models_context(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 2048}))
    TrainConfig.from_dict({"model_path": str(model), "max_new_tokens": 1024})
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict({"model_path": str(model), "max_new_tokens": 4096})
    assert err.value.errors["max_new_tokens"] == ("must leave room for the prompt in the model's context of 2048 "
                                                  "tokens; got 4096")


@pytest.mark.parametrize("model", ["tiny", "smollm2"])
def test_the_light_tokenizer_renders_prompts_as_transformers_does(model, tiny_model_dir, smollm2_dir):
    """The web process renders a run's prompt without transformers; it must give the same text and ids."""
    from transformers import AutoTokenizer

    from training.light_tokenizer import LightTokenizer
    from training.prompts import PromptTemplate

    folder = tiny_model_dir if model == "tiny" else smollm2_dir
    hf, light = AutoTokenizer.from_pretrained(folder), LightTokenizer(folder)
    assert (light.bos_token_id, light.eos_token_id) == (hf.bos_token_id, hf.eos_token_id)
    assert bool(light.chat_template) == bool(hf.chat_template)
    for template in (PromptTemplate(), PromptTemplate(chat="off", instruction="Answer."),
                     PromptTemplate(system_prompt="Be brief.", instruction="Reply with the number only.")):
        for question in ("12+7=", "What is 3 + 4?\nThink first.", "ünïcode ✓ 1/2"):
            assert template.render(light, question) == template.render(hf, question)
            assert template.encode(light, question) == template.encode(hf, question)


def test_a_prompt_past_the_models_context_fails_the_run_saying_so(tiny_model_dir, tmp_path):
    """HumanEval's prompts (hundreds of tokens) on the built-in tiny model (a 128-token context): the run fails
    with what to change, instead of 'succeeding' with reward 0."""
    from training.loop import train
    from training.sink import NullSink

    cfg = TrainConfig.from_dict({"task": "humaneval", "total_steps": 2, "prompts_per_step": 2, "group_size": 2,
                                 "max_new_tokens": 16})
    assert "one ```python code block" in cfg.prompt_template().instruction  # the task's own instruction
    with pytest.raises(RuntimeError, match=r"plus max_new_tokens=16 exceeds the model's context of 128 tokens"):
        train(cfg, str(tmp_path / "out"), NullSink())
    with pytest.raises(FieldErrors) as err:  # what can be known before: max_new_tokens alone
        TrainConfig.from_dict({"max_new_tokens": 200})
    assert "the built-in tiny model's context of 128 tokens" in err.value.errors["max_new_tokens"]
