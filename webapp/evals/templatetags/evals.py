"""Template tags the runs pages use to show evaluation pieces without their views knowing about them:

    {% load evals %}
    {% run_eval_chart run %}   a chart of the run's held-out eval/pass@k metrics (picked up by run_page.js)
    {% run_lineage run %}      the chain of runs and checkpoints this run descends from, and its children
    {% eval_jobs run=run %}    the evaluation jobs started from a run (or sweep=sweep)
"""
from django import template

from .. import selectors

register = template.Library()


@register.inclusion_tag("evals/_eval_chart.html")
def run_eval_chart(run):
    return {"keys": selectors.run_eval_metric_keys(run=run)}


@register.inclusion_tag("evals/_lineage.html")
def run_lineage(run):
    return {"run": run, "chain": selectors.run_ancestry(run=run), "children": list(selectors.run_children(run=run))}


@register.inclusion_tag("evals/_eval_jobs.html")
def eval_jobs(run=None, sweep=None):
    jobs = selectors.eval_jobs_of(run=run, sweep=sweep).select_related("run", "sweep")[:50]
    return {"jobs": jobs, "run": run, "sweep": sweep}
