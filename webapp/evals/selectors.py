"""Read queries for evaluation jobs and run lineage (views, exports and template tags call these)."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from training.passk import coverage, crossing_k, doubling_ks, pass_at_k_curve
from webapp.runs import selectors as run_selectors
from webapp.runs.models import Run
from webapp.sweeps.models import Sweep

from webapp.projects.selectors import visible
from .models import EvalJob, EvalModel, EvalResult


def eval_jobs_of(*, run: Run | None = None, sweep: Sweep | None = None) -> QuerySet[EvalJob]:
    if run is not None:
        return EvalJob.objects.filter(run=run)
    return EvalJob.objects.filter(sweep=sweep)


def eval_job_list(*, user) -> QuerySet[EvalJob]:
    """The evaluation jobs ``user`` may read."""
    return visible(EvalJob.objects.select_related("run", "sweep", "project"), user)


def model_counts(*, job: EvalJob) -> dict[int, dict[int, tuple[int, int]]]:
    """{model id: {problem index: (n, c)}} for every result stored so far."""
    out: dict[int, dict[int, tuple[int, int]]] = {m.pk: {} for m in job.models.all()}
    for model_id, index, n, c in (EvalResult.objects.filter(model__job=job)
                                  .values_list("model_id", "index", "n", "c")):
        out[model_id][index] = (n, c)
    return out


@dataclass
class ModelCurve:
    model: EvalModel
    problems: int                        # problems with a stored result
    curve: dict[int, float] = field(default_factory=dict)  # k -> pass@k over those problems
    solved: int = 0                      # problems with c > 0


def job_curves(*, job: EvalJob, counts: dict | None = None) -> list[ModelCurve]:
    """pass@k for k = 1, 2, 4, … n (plus the job's own ks) per model, over the problems stored so far."""
    counts = model_counts(job=job) if counts is None else counts
    ks = sorted(set(doubling_ks(job.n)) | set(job.ks))
    curves = []
    for m in job.models.all():
        per_problem = list(counts[m.pk].values())
        curve = pass_at_k_curve(per_problem, ks) if per_problem else {}
        curves.append(ModelCurve(m, len(per_problem), curve, sum(1 for _, c in per_problem if c > 0)))
    return curves


def default_pair(*, job: EvalJob) -> tuple[EvalModel | None, EvalModel | None]:
    """The pair the coverage table compares by default: the base model vs the last other model."""
    models = list(job.models.all())
    if len(models) < 2:
        return (models[0] if models else None), None
    base = next((m for m in models if m.is_base), models[0])
    other = next(m for m in reversed(models) if m.pk != base.pk)
    return base, other


def job_coverage(*, job: EvalJob, a: EvalModel, b: EvalModel, counts: dict | None = None) -> dict:
    """Problems solved (c > 0) by A only, B only, both, neither, over the problems both have results for;
    with the problem indices of each cell."""
    counts = model_counts(job=job) if counts is None else counts
    shared = sorted(set(counts[a.pk]) & set(counts[b.pk]))
    solved_a = [counts[a.pk][i][1] > 0 for i in shared]
    solved_b = [counts[b.pk][i][1] > 0 for i in shared]
    cells: dict[str, list[int]] = {"a_only": [], "b_only": [], "both": [], "neither": []}
    for i, sa, sb in zip(shared, solved_a, solved_b):
        cells["both" if sa and sb else "a_only" if sa else "b_only" if sb else "neither"].append(i)
    return {"a": a, "b": b, "counts": coverage(solved_a, solved_b), "problems": cells, "total": len(shared)}


def job_problem_rows(*, job: EvalJob, counts: dict | None = None) -> list[dict]:
    """One row per problem: index, prompt, answer and each model's (n, c) (None while not evaluated)."""
    counts = model_counts(job=job) if counts is None else counts
    models = list(job.models.all())
    texts = {}
    for index, prompt, answer in (EvalResult.objects.filter(model__job=job).order_by("index", "model__position")
                                  .values_list("index", "prompt", "answer")):
        texts.setdefault(index, (prompt, answer))
    return [{"index": i, "prompt": texts[i][0], "answer": texts[i][1],
             "cells": [counts[m.pk].get(i) for m in models]} for i in sorted(texts)]


def problem_detail(*, job: EvalJob, index: int) -> dict:
    """A problem's prompt and answer, and per model its (n, c) and the completions kept with their verdicts."""
    results = {r.model_id: r for r in EvalResult.objects.filter(model__job=job, index=index)}
    if not results:
        raise EvalResult.DoesNotExist(f"eval {job.pk} has no result for problem {index}")
    any_result = next(iter(results.values()))
    return {"index": index, "prompt": any_result.prompt, "answer": any_result.answer,
            "models": [{"model": m, "result": results.get(m.pk)} for m in job.models.all()]}


def curves_crossing(*, curves: list[ModelCurve]) -> dict | None:
    """Where the base model's curve and the last other model's swap order (None when they do not), and which
    way: ``overtakes`` True when that model is above the base from ``k`` on (below it before), False when the
    base overtakes it (the RLVR pattern: better at small k, overtaken at large k), with both pass@k values at k."""
    base = next((c for c in curves if c.model.is_base and c.curve), None)
    others = [c for c in curves if c is not base and c.curve]
    if base is None or not others:
        return None
    k = crossing_k(others[-1].curve, base.curve)
    if k is None:
        return None
    model, at_base = others[-1].curve[k], base.curve[k]
    return {"k": k, "model": others[-1].model.label, "overtakes": model > at_base, "model_at": model,
            "base_at": at_base}


def export_payload(*, job: EvalJob) -> dict:
    """Everything needed to recompute any pass@k elsewhere: the job's settings, each model's curve and its
    per-problem (n, c)."""
    counts = model_counts(job=job)
    curves = job_curves(job=job, counts=counts)
    return {
        "job": {"id": job.pk, "name": job.display_name, "status": job.status, "task": job.task,
                "data_path": job.data_path, "problems": job.problems, "n": job.n, "ks": job.ks,
                "temperature": job.temperature, "top_p": job.top_p, "max_new_tokens": job.max_new_tokens,
                "rewards": job.rewards, "seed": job.seed,
                "run_id": job.run_id, "sweep_id": job.sweep_id},
        "estimator": "unbiased pass@k = 1 - C(n-c, k) / C(n, k), averaged over problems (Chen et al. 2021)",
        "models": [{"id": c.model.pk, "label": c.model.label, "path": c.model.path, "is_base": c.model.is_base,
                    "run_id": c.model.run_id, "step": c.model.step, "problems_evaluated": c.problems,
                    "solved": c.solved, "seconds": round(c.model.seconds, 3),
                    "pass_at_k": {str(k): v for k, v in c.curve.items()},
                    "per_problem": [{"index": i, "n": n, "c": cnt}
                                    for i, (n, cnt) in sorted(counts[c.model.pk].items())]}
                   for c in curves],
    }


# --- run page: eval charts and lineage ----------------------------------------------------------------------

def run_eval_metric_keys(*, run: Run) -> list[str]:
    """The run's held-out eval metrics (eval/pass@k): those its config will log and those already stored."""
    config = run.config or {}
    keys = set()
    if int(config.get("eval_every") or 0) > 0:
        keys |= {f"eval/pass@{k}" for k in config.get("eval_k") or []}
    # the keys the run logged, from the metric tier's coarsest level (a LIKE over a long run's points is a scan)
    keys |= {key for key in run_selectors.run_metric_keys(run_id=run.pk) if key.startswith("eval/")}

    def k_of(key: str) -> tuple[int, str]:
        tail = key.rsplit("@", 1)[-1]
        return (int(tail) if tail.isdigit() else 10**9, key)

    return sorted(keys, key=k_of)


@dataclass
class LineageLink:
    run: Run
    step: int | None  # the step of this run's checkpoint the next run started from (None for the run itself)


def run_ancestry(*, run: Run, max_depth: int = 50) -> list[LineageLink]:
    """The chain of runs this run descends from, oldest first, ending with the run itself.

    Each link carries the step of the checkpoint its child started from. ``max_depth`` guards a cycle made
    by hand in the admin."""
    chain = [LineageLink(run, None)]
    seen = {run.pk}
    current = run
    while current.parent_run_id is not None and len(chain) < max_depth:
        parent = Run.objects.get(pk=current.parent_run_id)
        if parent.pk in seen:
            break
        chain.insert(0, LineageLink(parent, current.parent_step))
        seen.add(parent.pk)
        current = parent
    return chain


def run_children(*, run: Run) -> QuerySet[Run]:
    """Runs started from one of this run's checkpoints."""
    return Run.objects.filter(parent_run=run).order_by("parent_step", "pk")
