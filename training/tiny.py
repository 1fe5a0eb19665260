"""The built-in tiny model, made on this machine (never downloaded).

``bootstrap_tiny(out)`` builds a character-level tokenizer (the tokenizers library, wrapped as a
PreTrainedTokenizerFast) and a ~650 k-parameter Llama-style model, then warms it up with a short supervised
phase on the arithmetic task until its pass@1 at temperature 1 lies in the band RL can learn from
(10–50 %: some successes to reinforce, plenty of room to improve).

``ensure_tiny_model(out)`` is what everything else calls: it copies the build shipped with the project
(``training/tiny_model/``, :func:`shipped_tiny_model`) when it stands for this checkout's recipe, else it builds the
model once, whichever process asks first (the set-up command, or the first run or eval that needs it on a fresh install), while the others wait
on the same lock file; the folder appears complete or not at all, and ``tiny_build_state(out)`` tells a web
page how far the build is.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import string
import time

from training.data import HELD_OUT_OFFSET, encode_prompt
from training.tasks import task_named
from training.models import atomic_folder, built_once

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
ALPHABET = string.digits + "+-*/=()<>:,. " + string.ascii_lowercase
BOOTSTRAP_MAX_STEPS = 4000  # the build's SFT stops here whatever its pass@1
# The model's shape (build_model's defaults): what a shipped build must have to stand for a build made here
ARCHITECTURE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
                "num_key_value_heads": 4, "max_position_embeddings": 128, "tie_word_embeddings": True}
# The build shipped with the project (made by ``python -m training bootstrap-tiny --force --out <this folder>``):
# a fresh install copies it in a second instead of training one (minutes on a busy machine).
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_model")


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(ALPHABET))}
    # BPE with no merges over a character vocabulary = a character-level tokenizer with <unk> fallback.
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", unk_token="<unk>", padding_side="left")


def build_model(tokenizer, seed: int = 0):
    import torch  # (lazily: the web process reads this module for the build state only)
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), **ARCHITECTURE,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config)


def shipped_tiny_model(build: dict, folder: str | None = None) -> str | None:
    """``folder`` when it holds a build that stands for the one ``build`` asks (the default task and seed, the
    tokenizer's characters and the model's shape as this checkout defines them: SPECIALS, ALPHABET,
    ARCHITECTURE), else None (a build is needed). Its weights are used as they are whatever the torch,
    transformers or core count here (a build here would give other weights, not a better model);
    tests/training/test_tiny_shipped.py measures its pass@1 with the libraries installed."""
    folder = folder or SHIPPED_DIR
    if os.environ.get("SEEDBED_TINY_SHIPPED") == "off":  # (to build here anyway: a comparison, the cache's tests)
        return None
    if set(build) - {"task", "seed"} or build.get("task", "arithmetic") != "arithmetic" or build.get("seed", 0):
        return None
    if not tiny_model_ready(folder):
        return None
    try:
        with open(os.path.join(folder, "config.json")) as fh:
            config = json.load(fh)
        with open(os.path.join(folder, "tokenizer.json")) as fh:
            vocab = json.load(fh)["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    expected_vocab = {tok: i for i, tok in enumerate(SPECIALS + list(ALPHABET))}
    if vocab != expected_vocab or config.get("vocab_size") != len(expected_vocab):
        return None
    if any(config.get(key) != value for key, value in ARCHITECTURE.items()):
        return None
    return folder


def _sft_batch(tokenizer, indices: list[int], task: str):
    """Teacher-forcing batch: loss only on answer tokens and the closing <eos>."""
    import torch
    seqs, labels = [], []
    example = task_named(task).example
    for i in indices:
        ex = example(i)
        p = encode_prompt(tokenizer, ex["prompt"])
        a = tokenizer.encode(ex["answer"], add_special_tokens=False) + [tokenizer.eos_token_id]
        seqs.append(p + a)
        labels.append([-100] * len(p) + a)
    width = max(map(len, seqs))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    lab = torch.tensor([lb + [-100] * (width - len(lb)) for lb in labels])
    att = (torch.arange(width)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]).long()
    return ids, lab, att


def bootstrap_tiny(out_dir: str, *, task: str = "arithmetic", seed: int = 0, band=(0.15, 0.45),
                   max_steps: int = BOOTSTRAP_MAX_STEPS, lr: float = 1e-3, log=print, progress=None) -> dict:
    """Build, warm up and save the tiny model; returns what happened (steps, pass@1, seconds).

    ``progress(step, pass1)`` is called at each held-out check. The files are written into a temporary
    sibling folder that is renamed to ``out_dir`` at the end, so a reader never sees half a model.
    """
    import torch
    from training.evaluate import evaluate_examples

    t0 = time.time()
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    held_out = [task_named(task).example(HELD_OUT_OFFSET + i) for i in range(200)]
    pass1, step = 0.0, 0
    for step in range(1, max_steps + 1):
        idx = torch.randint(0, HELD_OUT_OFFSET, (128,), generator=gen).tolist()
        ids, lab, att = _sft_batch(tokenizer, idx, task)
        loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 25 == 0:
            model.eval()
            res = evaluate_examples(model, tokenizer, held_out, n=4, ks=[1], temperature=1.0,
                                    max_new_tokens=8, rewards=[{"name": "exact"}], seed=seed)
            model.train()
            pass1 = res["pass@k"]["1"]
            log(f"bootstrap step {step}: sft loss {loss.item():.3f}, pass@1 {pass1:.3f}")
            if progress is not None:
                progress(step, pass1)
            if pass1 >= band[0]:
                break
    if not band[0] <= pass1 <= band[1]:
        raise RuntimeError(f"tiny model warm-up ended at pass@1 {pass1:.3f}, outside {band}")
    info = {"task": task, "sft_steps": step, "pass@1": pass1, "seconds": round(time.time() - t0, 1),
            "parameters": sum(p.numel() for p in model.parameters())}
    with atomic_folder(out_dir, prefix=_STAGING_PREFIX) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        with open(os.path.join(staging, READY_FILE), "w") as fh:
            json.dump(info, fh, indent=2)
    return info


READY_FILE = "seedbed_bootstrap.json"  # written last: its presence means the folder is complete
_STAGING_PREFIX = ".tiny-build-"


def tiny_model_ready(out_dir: str) -> bool:
    return os.path.isfile(os.path.join(out_dir, "config.json")) and os.path.isfile(os.path.join(out_dir, READY_FILE))


def _lock_path(out_dir: str) -> str:
    return os.path.abspath(out_dir).rstrip("/") + ".lock"


def _progress_path(out_dir: str) -> str:
    return os.path.abspath(out_dir).rstrip("/") + ".progress.json"


# --- a cache of builds outside the project folder, keyed by the recipe ------------------------------------------

# The training-core modules a build runs (bootstrap_tiny and what it imports: the task, the held-out evaluation
# that decides when the warm-up stops, generation, the verifiers); tests/training/test_tiny_cache.py checks this
# list holds every training module a fresh build loads.
TINY_RECIPE_MODULES = (
    "training", "training.algorithms", "training.benchmarks", "training.completion_forward", "training.data",
    "training.decode_steps", "training.evaluate", "training.extensions", "training.fields", "training.models",
    "training.names", "training.passk", "training.prefill", "training.prompts", "training.rollout",
    "training.routing", "training.tiny", "training.verifiers", "training.verifiers.answers",
    "training.verifiers.base", "training.verifiers.code", "training.verifiers.hybrid", "training.verifiers.ifeval",
    "training.verifiers.judge", "training.verifiers.math_answer", "training.verifiers.math_equivalence",
    "training.verifiers.math_extract", "training.verifiers.math_fastpath", "training.verifiers.reasoning_gym",
    "training.verifiers.registry", "training.verifiers.sandbox", "training.verifiers.sandbox_server",
    "training.verifiers.sandbox_server.harness", "training.verifiers.sandbox_server.seccomp",
    "training.verifiers.sandbox_server.server", "training.verifiers.sandbox_server.wire",
    "training.verifiers.simple", "training.verifiers.workers", "training.data_csv", "training.data_files",
    "training.data_limits", "training.verifiers.ifeval_text", "training.verifiers.math_candidates",
    "training.verifiers.sandbox_cgroup", "training.verifiers.sandbox_server.cgroup",
    "training.verifiers.sandbox_server.lockdown", "training.verifiers.sandbox_server.zygote", "training.tasks",
    "training.tasks.arithmetic", "training.tasks.countdown", "training.verifiers.countdown")
TINY_RECIPE_PACKAGES = ("torch", "transformers", "tokenizers")


def tiny_recipe_digest(build: dict, *, modules=TINY_RECIPE_MODULES) -> str:
    """What decides the built weights, hashed: the source of ``modules``, the versions of the libraries that
    compute them, the Python, the machine's architecture and core count, and the build's arguments (task, seed, ...)."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256()
    for name in sorted(modules):
        origin = importlib.util.find_spec(name).origin
        digest.update(f"{name}\0".encode())
        with open(origin, "rb") as fh:
            digest.update(fh.read())
    for package in TINY_RECIPE_PACKAGES:
        try:
            digest.update(f"{package}=={version(package)}\0".encode())
        except PackageNotFoundError:
            digest.update(f"{package} missing\0".encode())
    # the build uses every core, and float sums split over another number of threads give other weights
    digest.update(f"{platform.python_version()} {platform.machine()} {os.cpu_count()} cores\0".encode())
    digest.update(json.dumps(build, sort_keys=True).encode())
    return digest.hexdigest()[:24]


def tiny_cache_root() -> str | None:
    """Where built tiny models are kept across clones of the project on this machine: $SEEDBED_TINY_CACHE
    ("off" for none), else $XDG_CACHE_HOME/seedbed/tiny-models (~/.cache/seedbed/tiny-models)."""
    env = os.environ.get("SEEDBED_TINY_CACHE")
    if env == "off":
        return None
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "seedbed", "tiny-models")


def _copy_model_folder(source: str, out_dir: str, prefix: str) -> None:
    """``source``'s files into ``out_dir``, replaced whole (atomic_folder): a reader never sees half a copy. The
    contents only: each file gets this process's mode (its umask), not the source's."""
    with atomic_folder(out_dir, prefix=prefix) as staging:
        shutil.copytree(source, staging, dirs_exist_ok=True, copy_function=shutil.copyfile)


def _keep_in_cache(out_dir: str, cached: str, log) -> None:
    """Copy a finished build into the cache; a cache that cannot be written costs the next clone a build only."""
    try:
        _copy_model_folder(out_dir, cached, prefix=".tiny-cache-")
    except OSError as exc:
        log(f"could not keep the tiny model in the cache {cached}: {exc}")


def ensure_tiny_model(out_dir: str, *, log=print, cache_root: str | None = None, **build) -> dict | None:
    """Make sure ``out_dir`` holds the built-in tiny model; build it if no other process is doing so, else
    wait for that one (``build``: bootstrap_tiny's task/seed/...). Returns the build's info when this call built it, None when it was already there.

    With ``cache_root`` (the set-up's ``bootstrap-tiny`` passes ``tiny_cache_root()``), a build of the same recipe
    (``tiny_recipe_digest``) kept there is copied instead of built, and a new build is kept there for the next
    clone; a changed recipe has another key, so it is built afresh."""
    import torch

    def make() -> dict:
        shipped = shipped_tiny_model(build)
        if shipped:
            log(f"copying the built-in tiny model shipped with the project ({shipped}) to {out_dir}")
            _copy_model_folder(shipped, out_dir, prefix=_STAGING_PREFIX)
            with open(os.path.join(out_dir, READY_FILE)) as fh:
                return {**json.load(fh), "shipped": shipped}
        # (hashed here: reading the recipe imports the verifiers, which a model already there does not need)
        cached = os.path.join(cache_root, tiny_recipe_digest(build)) if cache_root else None
        if cached and tiny_model_ready(cached):
            log(f"the built-in tiny model of this recipe is in the cache: copying {cached} to {out_dir}")
            _copy_model_folder(cached, out_dir, prefix=_STAGING_PREFIX)
            with open(os.path.join(out_dir, READY_FILE)) as fh:
                return {**json.load(fh), "cached": cached}
        info = build_here()
        if cached:
            _keep_in_cache(out_dir, cached, log)
        return info

    def build_here() -> dict:
        log(f"building the built-in tiny model in {out_dir} (once; about a minute on two idle cores)")
        started = time.time()

        best, recent = [0.0], []

        def report(step: int, pass1: float) -> None:
            # best: the highest check so far (a check on 200 held-out problems is noisy: the next may dip);
            # recent: the last 3 checks (the pages' ETA extrapolates their mean); max_steps: where the build
            # stops whatever its pass@1 (the ETA is bounded by it)
            best[0] = max(best[0], pass1)
            recent[:] = [*recent, [step, pass1]][-3:] if step else []
            state = {"step": step, "pass1": pass1, "best": best[0], "recent": list(recent), "target": 0.15,
                     "started_at": started, "max_steps": build.get("max_steps", BOOTSTRAP_MAX_STEPS),
                     "pid": os.getpid()}
            tmp = _progress_path(out_dir) + f".{os.getpid()}"
            with open(tmp, "w") as fh:
                json.dump(state, fh)
            os.replace(tmp, _progress_path(out_dir))

        report(0, 0.0)
        threads = torch.get_num_threads()
        # every run that needs the model is waiting for this one: use every core (a worker slot trains with 1)
        torch.set_num_threads(os.cpu_count() or 1)
        try:
            return bootstrap_tiny(out_dir, log=log, progress=report, **build)
        finally:
            torch.set_num_threads(threads)
            try:
                os.remove(_progress_path(out_dir))
            except FileNotFoundError:
                pass

    return built_once(out_dir, ready=tiny_model_ready, build=make, what="the built-in tiny model",
                      prefix=_STAGING_PREFIX, log=log)


def tiny_build_state(out_dir: str) -> dict:
    """What a page says about the built-in model: {"state": "ready" | "building" | "missing", ...progress}.

    "building" means some process holds the build lock (checked with a non-blocking lock attempt, so a build
    that died is never reported as running)."""
    if tiny_model_ready(out_dir):
        return {"state": "ready"}
    lock_file = _lock_path(out_dir)
    if not os.path.exists(lock_file):
        return {"state": "missing"}
    try:
        with open(lock_file, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            with open(_progress_path(out_dir)) as fh:
                progress = json.load(fh)
        except (OSError, ValueError):
            progress = {}
        return {"state": "building", **progress}
    except OSError:
        pass
    return {"state": "missing"}
