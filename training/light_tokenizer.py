"""A model folder's tokenizer without transformers (and so without torch): for the web process, which renders a
run's prompt for its page but never runs a model.

It reads what a Hugging Face tokenizer folder holds: ``tokenizer.json`` (the ``tokenizers`` library encodes it,
with the same post-processor, so the ids are the same as transformers' fast tokenizer) and
``tokenizer_config.json`` / ``chat_template.jinja`` (the chat template, rendered the way transformers renders
it: a sandboxed Jinja environment with ``trim_blocks`` and ``lstrip_blocks``, ``raise_exception`` and the
special tokens as variables). It offers the part of the tokenizer interface ``training.prompts`` uses.
"""
from __future__ import annotations

import json
import os
from datetime import datetime


def _token_text(value) -> str | None:
    if isinstance(value, dict):  # an AddedToken as older tokenizers save it
        return value.get("content")
    return value if isinstance(value, str) else None


class LightTokenizer:
    def __init__(self, folder: str):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        try:
            with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as fh:
                config = json.load(fh)
        except (OSError, ValueError):
            config = {}
        template = config.get("chat_template")
        template_file = os.path.join(folder, "chat_template.jinja")
        if not isinstance(template, str) and os.path.isfile(template_file):
            with open(template_file, encoding="utf-8") as fh:
                template = fh.read()
        self.chat_template = template if isinstance(template, str) else None
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self.unk_token = _token_text(config.get("unk_token"))
        self.bos_token_id = self._tok.token_to_id(self.bos_token) if self.bos_token else None
        self.eos_token_id = self._tok.token_to_id(self.eos_token) if self.eos_token else None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict], tokenize: bool = False, add_generation_prompt: bool = False):
        if not self.chat_template:
            raise ValueError("the tokenizer has no chat template")
        text = _environment().from_string(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, bos_token=self.bos_token or "",
            eos_token=self.eos_token or "", unk_token=self.unk_token or "")
        return self.encode(text, add_special_tokens=False) if tokenize else text


def _raise(message: str):
    raise ValueError(message)


def _environment():
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
