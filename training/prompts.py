"""How a task's question becomes the model's prompt: plain text for a base or built-in model; for a chat model,
its chat template (through the tokenizer: system prompt, the question as the user's turn with the
answer-format instruction, then the assistant's turn opened), so the model sees what it was tuned on.

The same template renders prompts for training, for the periodic held-out eval and for evaluation jobs, and the
run page shows the first prompt training draws, rendered by the same function (``PromptTemplate.render_example``;
the draw itself is ``training.first_prompt``, which reads the data: this module imports no other of training's;
docs/architecture.md "The training core").
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
