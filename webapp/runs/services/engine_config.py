"""An engine's own resolved config as it reported it once started, stored bounded
(docs/architecture.md#engines-and-distribution)."""
from __future__ import annotations

import json
import logging
import math

from django.db import transaction

from webapp.runs.models import Run

log = logging.getLogger("seedbed.runs")


MAX_ENGINE_CONFIG_CHARS = 200_000  # as JSON; TRL's GRPOConfig is ~5 kB: shown on the run page, never read back
MAX_ENGINE_VALUE_CHARS = 4_000     # one value beyond this (as JSON) is replaced by a note once the whole is too large


def _plain(value):
    """A JSON value any database stores: non-finite numbers (PostgreSQL's jsonb has none) and anything that is
    not JSON become text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def bounded_engine_config(config: dict) -> tuple[dict, str]:
    """``config`` as stored, and what was trimmed ("" when nothing): as it is when its JSON fits
    MAX_ENGINE_CONFIG_CHARS; else, key by key in sorted order, each value longer than MAX_ENGINE_VALUE_CHARS
    replaced by a note, and the keys past the budget left out; the note is stored too, under "_trimmed".

    >>> bounded_engine_config({"beta": 0.0, "seed": float("nan")})
    ({'beta': 0.0, 'seed': 'nan'}, '')
    """
    plain = _plain(config)
    size = len(json.dumps(plain))
    if size <= MAX_ENGINE_CONFIG_CHARS:
        return plain, ""
    out, used, shortened, left_out = {}, 2, [], 0
    budget = MAX_ENGINE_CONFIG_CHARS - 1_000  # room for the note
    for key in sorted(plain):
        value = plain[key]
        text = json.dumps(value)
        if len(text) > MAX_ENGINE_VALUE_CHARS:
            value = f"({len(text):,} characters of JSON: not stored)"
            shortened.append(key)
        item = len(json.dumps(key)) + len(json.dumps(value)) + 2
        if used + item > budget:
            left_out += 1
            continue
        out[key], used = value, used + item
    names = ", ".join(shortened[:10]) + (", …" if len(shortened) > 10 else "")
    note = (f"{size:,} characters of JSON, more than {MAX_ENGINE_CONFIG_CHARS:,}: {len(shortened)} long value(s) "
            f"replaced ({names}), {left_out} key(s) left out")[:900]
    out["_trimmed"] = note
    return out, note


@transaction.atomic
def run_engine_config_set(*, run_id: int, config: dict) -> dict:
    """Store the engine's own resolved config, as it reported it when it started (TRL: its GRPOConfig, with
    "engine" and "trl_version"); a resumed run's engine reports it again and replaces it. Bounded
    (``bounded_engine_config``): a larger one is stored trimmed, with a log line. Returns what was stored."""
    if not isinstance(config, dict):
        raise ValueError(f"an engine's config is a mapping; got {type(config).__name__}")
    stored, note = bounded_engine_config(config)
    if note:
        log.warning("run %s: the engine's config is too large to store whole (%s)", run_id, note)
    Run.objects.filter(pk=run_id).update(engine_config=stored)
    return stored
