"""The built-in model's build ETA (webapp.builtin_model.build_eta_s) on six recorded builds
(bench/curves/tiny_builds_2026-12-03.json: each held-out check's step, pass@1 and seconds since the start, made by
training.tiny.bootstrap_tiny with seeds 0-5 on a loaded 2-core machine): from a quarter of each build on, the
predicted end (elapsed + ETA) against the build's real end. Before: a straight line through the best check
overshot by up to 7 x at a quarter and swung (13 to 109 min on a new user's screen)."""
from __future__ import annotations

import json
import os
import statistics

from webapp.builtin_model import build_eta_s

BUILDS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "curves",
                      "tiny_builds_2026-12-03.json")


def line_through_best(step, best, elapsed_s, target=0.15, max_steps=4000):
    """The estimate before, as it was: pass@1 taken to grow linearly from 0 to its best check."""
    end = max_steps if best <= 0 else min(max_steps, step * target / best)
    return max(0.0, end - step) * elapsed_s / step


def predicted_ends():
    """(build seed, now, ETA, ETA before, real end) from a quarter of each build on."""
    rows = []
    for build in json.load(open(BUILDS)):
        checks, total, best = build["checks"], build["total_s"], 0.0
        for k, (step, pass1, elapsed) in enumerate(checks):
            best = max(best, pass1)
            if elapsed < 0.25 * total:
                continue
            eta = build_eta_s(step=step, recent=[c[:2] for c in checks[max(0, k - 2):k + 1]], target=0.15, max_steps=4000,
                              elapsed_s=elapsed)
            rows.append((build["seed"], elapsed, eta, line_through_best(step, best, elapsed), total))
    return rows


def test_from_a_quarter_of_the_build_on_the_eta_settles_near_the_real_end():
    rows = predicted_ends()
    assert len(rows) >= 60 and len({seed for seed, *_ in rows}) == 6
    errors = [abs((now + eta) / total - 1) for _, now, eta, _, total in rows]
    before = [abs((now + eta) / total - 1) for _, now, _, eta, total in rows]
    # from a quarter on: within +-30 % at three checks in four (the line: two in five), never off by more than
    # about half (the line: 6 x)
    assert sum(e <= 0.30 for e in errors) / len(errors) >= 0.7 and max(errors) < 0.55
    assert sum(e <= 0.30 for e in before) / len(before) < 0.45 and max(before) > 5
    # and it settles: from three quarters of each build on, within +-30 % at every check
    late = [abs((now + eta) / total - 1) for _, now, eta, _, total in rows if now >= 0.75 * total]
    assert len(late) >= 20 and max(late) <= 0.30
