"""The runs table's search, sort, columns and pages: the query parser on its own (webapp.runs.search), then the
query it drives in the database (selectors.run_table) and the page (/runs/), membership checked through every
filter."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.conftest import logged_in
from webapp.projects.services import project_create
from webapp.runs import search, selectors, services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps import services as sweep_services

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# --- the parser: pure, no database ---


def test_structured_terms_and_free_words_are_read():
    q = search.parse_query('baseline "lr sweep" status:running status:Queued project:"my lab" engine:trl '
                           "lr>1e-5 lr<=2e-4 preset=dapo group_size=8 dynamic_sampling=true kl_coef>=0 "
                           "task=reasoning_gym:basic_arithmetic archived:all")
    assert q.problems == ()
    assert q.words == ("baseline", "lr sweep")
    assert q.statuses == ("running", "queued") and q.projects == ("my lab",) and q.engines == ("trl",)
    assert q.archived == "all"
    assert [(t.key, t.op, t.value) for t in q.config] == [
        ("lr", ">", 1e-5), ("lr", "<=", 2e-4), ("preset", "=", "dapo"), ("group_size", "=", 8),
        ("dynamic_sampling", "=", True), ("kl_coef", ">=", 0), ("task", "=", "reasoning_gym:basic_arithmetic")]
    # numbers are numbers: an int stays an int, a float a float
    assert type(q.config[3].value) is int and type(q.config[0].value) is float
    assert search.parse_query("").archived == "no"  # archived runs are hidden unless asked for


@pytest.mark.parametrize("term, says", [
    ("bogus>1", "bogus is not a config key"),
    ("lr>abc", "abc is not a number"),
    ("lr>nan", "nan is not a number"),
    ("lr>1e999", "1e999 is not a number"),
    ("group_size=eight", "group_size is a number and eight is not"),
    ("preset>3", "preset is not a number; only = compares it"),
    ("task_params=1", "task_params holds a list or a table"),
    ("dynamic_sampling=maybe", "dynamic_sampling is true or false"),
    ("lr>", "no value after >"),
    ("preset=<script>", "the value must be a plain word"),
    ("model_path=a;b", "the value must be a plain word"),
    ("=5", "not a comparison"),
    ("status:sleeping", "status is one of queued, running"),
    ("engine:jax", "engine is one of seedbed, trl"),
    ("owner:ada", "unknown filter owner:"),
    ("status:", "no value after status:"),
    ("seed>12345678901234567890123", "12345678901234567890123 is out of range"),
    ("seed=-9223372036854775809", "is out of range (a whole number from -9223372036854775807"),
])
def test_a_bad_term_is_left_out_and_named(term, says):
    q = search.parse_query(f"baseline {term} lr<1")
    assert len(q.problems) == 1 and f"“{term}”" in q.problems[0] and says in q.problems[0], q.problems
    assert q.words == ("baseline",) and [(t.key, t.op) for t in q.config] == [("lr", "<")]  # the rest still applies
    assert q.statuses == () and q.engines == ()


def test_an_unclosed_quote_and_a_long_search_are_read_as_far_as_they_go():
    q = search.parse_query('"lr sweep status:running')
    assert q.words == ("lr", "sweep") and q.statuses == ("running",) and "quote" in q.problems[0]
    q = search.parse_query("x " * 400)
    assert len(q.words) == search.MAX_TERMS and any("first" in p for p in q.problems)


def test_sort_columns_and_page_are_checked():
    assert search.parse_sort(None) == ("-created", None)
    assert search.parse_sort("-seed") == ("-seed", None) and search.parse_sort("duration") == ("duration", None)
    sort, problem = search.parse_sort("config")
    assert sort == "-created" and "sort “config” is not a column" in problem
    assert search.parse_cols(["lr,group_size", "lr", "preset"]) == (["lr", "group_size", "preset"], [])
    cols, problems = search.parse_cols(["lr,password,"])
    assert cols == ["lr"] and problems == ["column “password” is not a config key; left out"]
    assert [search.parse_page(v) for v in (None, "3", "-2", "x")] == [1, 3, 1, 1]


def test_links_keep_the_other_parameters_and_headers_toggle_the_direction():
    params = search.parse_params({"q": "lr>1e-5 status:running", "sort": "seed", "cols": ["lr", "group_size"],
                                  "page": "2"})
    assert params.problems == ()
    assert params.link(page=3) == "?q=lr%3E1e-5+status%3Arunning&sort=seed&cols=lr%2Cgroup_size&page=3"
    headers = params.headers()
    assert headers["seed"]["url"] == "?q=lr%3E1e-5+status%3Arunning&sort=-seed&cols=lr%2Cgroup_size"  # page 1
    assert headers["seed"]["arrow"] == "▲" and headers["name"]["arrow"] == ""
    assert "sort=name&" in headers["name"]["url"]
    assert search.parse_params({"sort": "-seed"}).headers()["seed"]["url"] == "?sort=seed"
    pager = params.pager(2, 3)
    assert pager["previous"] == "?q=lr%3E1e-5+status%3Arunning&sort=seed&cols=lr%2Cgroup_size"
    assert pager["next"].endswith("&page=3") and pager["first"] == pager["previous"]
    # the status links replace the search's status terms and keep the rest
    links = {s["label"]: s for s in params.status_links()}
    assert links["running"]["current"] and not links["all"]["current"]
    assert links["failed"]["url"] == "?q=lr%3E1e-5+status%3Afailed&sort=seed&cols=lr%2Cgroup_size"
    assert links["all"]["url"] == "?q=lr%3E1e-5&sort=seed&cols=lr%2Cgroup_size"


def test_the_older_status_and_project_parameters_become_terms():
    params = search.parse_params({"status": "running", "project": "my lab"})
    assert params.q == "status:running project:'my lab'"
    assert params.query.statuses == ("running",) and params.query.projects == ("my lab",)


# --- the query in the database and the page ---

LRS = (1e-6, 1e-5, 3e-5, 2e-4, 1e-3)


def ids(qs_or_rows):
    return [r["run"].pk if isinstance(r, dict) else r.pk for r in qs_or_rows]


@pytest.fixture
def lab(db, user, config):
    """ada's runs in the default project: one per lr (group sizes 4, 8, 16, 4, 8), seeds 10..14, and a
    sweep "lr sweep" holding the last two; eve's runs in her own project match every filter too."""
    now = timezone.now()
    runs = []
    for i, lr in enumerate(LRS):
        run = services.run_create(config={**config, "lr": lr, "group_size": (4, 8, 16, 4, 8)[i],
                                          "preset": "dapo" if i % 2 else "grpo", "seed": 10 + i},
                                  name=f"baseline {i}" if i < 3 else f"ablation {i}")
        runs.append(run)
    sweep = sweep_services.sweep_create(config=config, seeds=[0], concurrency=1, name="lr sweep")
    Run.objects.filter(pk__in=[runs[3].pk, runs[4].pk]).update(sweep=sweep)
    sweep.runs.exclude(pk__in=[runs[3].pk, runs[4].pk]).delete()
    # statuses, steps and durations: 0 running 90 s so far, 1 succeeded in 10 s, 2 failed in 5 min, 3 and 4 queued
    Run.objects.filter(pk=runs[0].pk).update(status=RunStatus.RUNNING, started_at=now - timedelta(seconds=90),
                                             last_step=3)
    Run.objects.filter(pk=runs[1].pk).update(status=RunStatus.SUCCEEDED, started_at=now - timedelta(minutes=20),
                                             ended_at=now - timedelta(minutes=20) + timedelta(seconds=10),
                                             last_step=6)
    Run.objects.filter(pk=runs[2].pk).update(status=RunStatus.FAILED, started_at=now - timedelta(hours=1),
                                             ended_at=now - timedelta(minutes=55), last_step=1)
    eve = type(user).objects.create_user(username="eve", password="pw-for-tests-only")
    for i, lr in enumerate(LRS):
        services.run_create(config={**config, "lr": lr, "group_size": 8, "preset": "dapo"}, user=eve,
                            name=f"baseline eve {i}")
    Run.objects.filter(project__name="eve").update(status=RunStatus.RUNNING)
    return {"runs": [Run.objects.get(pk=r.pk) for r in runs], "sweep": sweep, "eve": eve}


def found(user, text, sort="-created"):
    return ids(selectors.run_search_sorted(user=user, query=search.parse_query(text), sort=sort))


def test_config_comparisons_compare_numbers_as_numbers(lab, user):
    r = lab["runs"]
    # as text "0.0002" < "1e-05" < "1e-06": only a numeric comparison gives these
    assert set(found(user, "lr>1e-5")) == {r[2].pk, r[3].pk, r[4].pk}
    assert set(found(user, "lr>=1e-5")) == {r[1].pk, r[2].pk, r[3].pk, r[4].pk}
    assert set(found(user, "lr<=2e-4")) == {r[0].pk, r[1].pk, r[2].pk, r[3].pk}
    assert set(found(user, "lr<1e-5")) == {r[0].pk}
    assert set(found(user, "lr=0.0002")) == {r[3].pk} == set(found(user, "lr=2e-4"))
    # "16" < "8" as text
    assert set(found(user, "group_size>=8")) == {r[1].pk, r[2].pk, r[4].pk}
    assert set(found(user, "group_size=8")) == {r[1].pk, r[4].pk}
    assert set(found(user, "preset=dapo")) == {r[1].pk, r[3].pk}
    assert set(found(user, "preset=dapo lr>1e-4")) == {r[3].pk}  # terms combine with and
    assert found(user, "preset=DAPO") == []  # a config value is matched as it is stored


def test_words_status_project_engine_and_archive_filter(lab, user):
    r = lab["runs"]
    assert set(found(user, "baseline")) == {r[0].pk, r[1].pk, r[2].pk}
    assert set(found(user, "SWEEP")) == {r[3].pk, r[4].pk}  # the sweep's name, any case
    assert set(found(user, '"lr sweep" ablation')) == {r[3].pk, r[4].pk}
    assert found(user, "baseline sweep") == []
    assert set(found(user, "status:running")) == {r[0].pk}
    assert set(found(user, "status:running status:failed")) == {r[0].pk, r[2].pk}  # one of them
    assert set(found(user, "status:queued lr>1e-4")) == {r[3].pk, r[4].pk}
    assert len(found(user, "project:default")) == 5 and len(found(user, "project:DEFAULT")) == 5
    assert len(found(user, "engine:seedbed")) == 5 and found(user, "engine:trl") == []
    # a run made before engines existed has no engine key: it is seedbed's
    config = dict(r[0].config)
    config.pop("engine", None)
    Run.objects.filter(pk=r[0].pk).update(config=config)
    assert r[0].pk in found(user, "engine:seedbed") and r[0].pk not in found(user, "engine:trl")
    # an archived run leaves the table unless asked for
    services.run_archive(run_ids=[r[1].pk], archived=True)
    assert r[1].pk not in found(user, "") and found(user, "archived:yes") == [r[1].pk]
    assert r[1].pk in found(user, "archived:all")


def test_sorting_by_each_column(lab, user):
    r = lab["runs"]
    pks = [run.pk for run in r]
    assert found(user, "") == pks[::-1]  # newest first by default
    assert found(user, "", "created") == pks
    assert found(user, "", "seed") == pks and found(user, "", "-seed") == pks[::-1]
    assert found(user, "", "-steps")[:3] == [pks[1], pks[0], pks[2]]
    assert found(user, "", "name") == [pks[3], pks[4], pks[0], pks[1], pks[2]]
    assert found(user, "", "status") == [pks[2], pks[3], pks[4], pks[0], pks[1]]  # failed, queued, running, ...
    # duration: 10 s, 90 s (running: so far), 5 min; the runs that never started last either way
    assert found(user, "", "duration")[:3] == [pks[1], pks[0], pks[2]]
    assert found(user, "", "-duration")[:3] == [pks[2], pks[0], pks[1]]
    assert set(found(user, "", "-duration")[3:]) == {pks[3], pks[4]}


QUERIES = ["", "baseline", "eve", "lr>1e-5", "group_size=8", "preset=dapo", "status:running", "project:eve",
           "project:default", "engine:seedbed", "archived:all", "archived:yes"]


@pytest.mark.parametrize("text", QUERIES)
def test_no_filter_shows_another_projects_runs(lab, user, text):
    eves = set(Run.objects.filter(project__name="eve").values_list("pk", flat=True))
    assert len(eves) == 5
    for sort in search.SORTS:
        assert not set(found(user, text, sort)) & eves, (text, sort)
    assert not set(found(lab["eve"], text)) & {run.pk for run in lab["runs"]}
    # and the page says the same
    page = logged_in(user).get(reverse("runs:list"), {"q": text}).content.decode()
    assert "baseline eve" not in page


@pytest.mark.parametrize("text", ["seed>12345678901234567890123", "group_size<=-12345678901234567890123"])
def test_a_number_past_64_bits_is_named_not_a_server_error(client_in, text):
    """The databases compare a JSON integer as a signed 64-bit one: SQLite raised OverflowError (a 500)."""
    response = client_in.get(reverse("runs:list"), {"q": text})
    assert response.status_code == 200
    assert "is out of range (a whole number from" in response.content.decode()


def test_eve_finds_her_own_runs_with_the_same_filters(lab):
    eve = lab["eve"]
    assert len(found(eve, "baseline lr>1e-5 status:running project:eve")) == 3
    assert found(eve, "project:default") == []


def bulk_runs(user, config, n: int) -> list[int]:
    """``n`` queued runs in ada's default project, created one second apart (the newest last), seed = index."""
    template = services.run_create(config=config, user=user, name="run 0")
    now = timezone.now()
    Run.objects.filter(pk=template.pk).update(created_at=now - timedelta(seconds=n), seed=0,
                                              config={**template.config, "seed": 0})
    Run.objects.bulk_create([Run(project_id=template.project_id, config={**template.config, "seed": i}, seed=i, name=f"run {i}",
                                 created_by=user) for i in range(1, n)])
    for i, run in enumerate(Run.objects.filter(pk__gt=template.pk).order_by("pk"), start=1):
        Run.objects.filter(pk=run.pk).update(created_at=now - timedelta(seconds=n - i))
    return list(Run.objects.filter(project_id=template.project_id).order_by("created_at").values_list("pk", flat=True))


def count_line(html: str) -> str:
    return re.search(r'id="run-count">([^<]*)<', html).group(1)


def row_ids(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-run="(\d+)"', html)]


def test_pages_of_50_with_counts_and_links_that_keep_the_search(client_in, user, config):
    pks = bulk_runs(user, config, 120)
    url = reverse("runs:list")
    first = client_in.get(url).content.decode()
    assert count_line(first) == "runs 1–50 of 120" and row_ids(first) == pks[::-1][:50]
    second = client_in.get(url, {"page": 2}).content.decode()
    assert count_line(second) == "runs 51–100 of 120" and row_ids(second) == pks[::-1][50:100]
    assert count_line(client_in.get(url, {"page": 3}).content.decode()) == "runs 101–120 of 120"
    assert count_line(client_in.get(url, {"page": 99}).content.decode()) == "runs 101–120 of 120"  # the last
    # a search, a sort and columns: counted, and kept by every link
    html = client_in.get(url, {"q": "seed>=30", "sort": "seed", "cols": "lr,seed"}).content.decode()
    assert count_line(html) == "runs 1–50 of 90"
    assert row_ids(html) == pks[30:80]  # seeds 30..79, ascending
    nxt = re.search(r'href="([^"]*)" id="page-next"', html).group(1).replace("&amp;", "&")
    assert nxt == "?q=seed%3E%3D30&sort=seed&cols=lr%2Cseed&page=2"
    html = client_in.get(url + nxt).content.decode()
    assert count_line(html) == "runs 51–90 of 90" and row_ids(html) == pks[80:]
    seed_header = re.search(r'href="([^"]*)" data-sort="seed"', html).group(1).replace("&amp;", "&")
    assert seed_header == "?q=seed%3E%3D30&sort=-seed&cols=lr%2Cseed"  # reversed, back to page 1


def test_the_page_names_bad_terms_and_shows_config_columns(lab, client_in):
    url = reverse("runs:list")
    response = client_in.get(url, {"q": "baseline lr>abc nokey=3", "sort": "password", "cols": "lr,group_size,pw"})
    assert response.status_code == 200
    html = response.content.decode()
    problems = re.search(r'id="search-problems">(.*?)</ul>', html, re.S).group(1)
    for named in ("“lr&gt;abc”", "“nokey=3”", "sort “password”", "column “pw”"):
        assert named in problems, named
    assert 'value="baseline lr&gt;abc nokey=3"' in html  # the box keeps what was typed
    assert set(row_ids(html)) == {run.pk for run in lab["runs"][:3]}  # the good term still filters
    assert re.search(r'<th class="config-col" data-col="lr"[^>]*><a [^>]*data-sort="lr">lr</a>[^<]*</th>'
                     r'<th class="config-col" data-col="group_size"', html)
    run = lab["runs"][2]
    row = re.search(rf'<tr data-run="{run.pk}">(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r'<td class="config-col">([^<]*)</td>', row) == ["3e-05", "16"]
    assert "seedbed" in row and "1 / 6" in row and "5 min 00 s" in row
    assert 'name="cols" value="lr" checked' in html and 'name="cols" value="preset">' in html
    # the older ?status= link still filters, now as a term in the box
    html = client_in.get(url, {"status": "failed"}).content.decode()
    assert row_ids(html) == [run.pk] and 'value="status:failed"' in html
    assert "search-problems" not in client_in.get(url, {"q": "lr>1e-5"}).content.decode()


def test_the_parsers_examples_hold():
    import doctest

    assert doctest.testmod(search).failed == 0 and doctest.testmod(search).attempted >= 4


# --- tags, and a metric's final value as a column and a sort ---


def test_tag_terms_final_columns_and_final_sorts_are_read():
    q = search.parse_query("baseline tag:v2 tag:lr-sweep tag:v2")
    assert q.words == ("baseline",) and q.tags == ("v2", "lr-sweep") and q.problems == ()
    bad = search.parse_query('tag:"a b" tag:')
    assert [p.split("”")[0] for p in bad.problems] == ["“tag:a b", "“tag:"] and bad.tags == ()
    assert "a tag is 1 to 40 letters" in bad.problems[0]
    assert search.parse_sort("-final:reward/mean") == ("-final:reward/mean", None)
    assert search.parse_sort("final:eval/pass@4") == ("final:eval/pass@4", None)
    sort, problem = search.parse_sort("final:")
    assert sort == "-created" and "final:METRIC" in problem
    cols, problems = search.parse_cols(["lr,final:accuracy", "final:", "final:a b"])
    assert cols == ["lr", "final:accuracy"] and len(problems) == 2 and "does not name a metric" in problems[0]
    # the picker's free box gives a bare metric; a final sort shows its column too, highest first on a click
    params = search.parse_params({"cols": "lr,final:accuracy", "final": "eval/pass@4", "sort": "-final:kl"})
    assert params.cols == ("lr", "final:accuracy", "final:eval/pass@4")
    assert params.config_cols == ("lr",) and params.final_cols == ("accuracy", "eval/pass@4", "kl")
    headers = params.headers()
    assert headers["final:accuracy"]["url"].startswith("?sort=-final%3Aaccuracy&")  # not sorted yet: best first
    assert headers["final:kl"]["url"].startswith("?sort=final%3Akl&") and headers["final:kl"]["arrow"] == "▼"
    assert params.link() == "?sort=-final%3Akl&cols=lr%2Cfinal%3Aaccuracy%2Cfinal%3Aeval%2Fpass%404"


def test_tags_filter_whole_and_free_words_match_parts_of_them(lab, user):
    r = lab["runs"]
    services.run_annotate(run_ids=[r[0].pk, r[1].pk], user=user, tags=["baseline-v2", "keep"])
    services.run_annotate(run_ids=[r[3].pk], user=user, tags=["Keeper"])
    eve_run = Run.objects.filter(project__name="eve").first()
    Run.objects.filter(pk=eve_run.pk).update(tags=["keep"])
    assert set(found(user, "tag:keep")) == {r[0].pk, r[1].pk}  # the whole tag: not "Keeper"
    assert set(found(user, "tag:keep tag:Keeper")) == {r[0].pk, r[1].pk, r[3].pk}  # any of them
    assert set(found(user, "keep")) == {r[0].pk, r[1].pk, r[3].pk}  # a free word: part of a tag, any case
    assert set(found(user, "v2")) == {r[0].pk, r[1].pk}
    assert found(user, "tag:v2") == []
    assert set(found(user, "tag:keep status:running")) == {r[0].pk}
    assert eve_run.pk not in found(user, "tag:keep") and found(lab["eve"], "tag:keep") == [eve_run.pk]


@pytest.fixture
def curves(user, config):
    """Runs with reward/mean curves of several lengths (finals over windows of 1, 3, 4, 10 and 20 steps), one
    with a NaN inside its window, one with no points, and another project's run with the best curve."""
    from tests.sweeps.conftest import log_points

    shapes = {"flat": [0.5] * 10, "rising30": [i / 30 for i in range(1, 31)], "rising31": [i / 40 for i in range(1, 32)],
              "late": [0.0] * 90 + [0.9, 0.1, 0.8, 0.2, 0.7], "long": [((i * 7) % 13) / 13 for i in range(200)],
              "nan": [0.3] * 18 + [float("nan"), 0.6]}
    runs = {}
    for name, values in shapes.items():
        run = services.run_create(config=config, user=user, name=name)
        log_points(run, "reward/mean", values)
        log_points(run, "entropy", [1.0 - v for v in values])
        runs[name] = Run.objects.get(pk=run.pk)
    runs["empty"] = services.run_create(config=config, user=user, name="empty")
    eve = type(user).objects.create_user(username="eve", password="pw-for-tests-only")
    other = services.run_create(config=config, user=eve, name="eve best")
    log_points(other, "reward/mean", [5.0] * 10)
    return runs


def reference_finals(runs: dict, metric: str) -> dict[int, float | None]:
    """The sweep summary's finals (from the chart tier, in Python): the reference the database's must equal."""
    from webapp.sweeps.selectors import run_finals

    return run_finals(runs={r.pk: (r.uid, r.attempts, r.last_step, False) for r in runs.values()}, metric=metric)


def test_a_final_sort_and_its_column_equal_the_sweep_summarys_finals(curves, user):
    want = reference_finals(curves, "reward/mean")
    assert want[curves["empty"].pk] is None and want[curves["nan"].pk] == pytest.approx(0.6)  # the NaN step is a gap
    assert want[curves["rising30"].pk] == pytest.approx((28 + 29 + 30) / 90)  # 3 steps, not 4
    ranked = sorted((pk for pk in want if want[pk] is not None), key=lambda pk: -want[pk])
    assert found(user, "", "-final:reward/mean") == ranked + [curves["empty"].pk]  # none last
    assert found(user, "", "final:reward/mean") == ranked[::-1] + [curves["empty"].pk]  # none last either way
    params = search.parse_params({"sort": "-final:reward/mean", "cols": "final:entropy"})
    rows = selectors.run_table(user=user, params=params)["rows"]
    assert [row["run"].pk for row in rows] == ranked + [curves["empty"].pk]
    entropy = reference_finals(curves, "entropy")
    for row in rows:  # the chosen column, then the sorted metric's
        pk = row["run"].pk
        assert row["finals"] == [pytest.approx(entropy[pk]) if entropy[pk] is not None else None,
                                 pytest.approx(want[pk]) if want[pk] is not None else None]
    # a metric nobody logged sorts by id and shows dashes
    assert found(user, "", "-final:nope") == sorted(want, reverse=True)


def test_the_page_sorts_by_a_final_and_shows_its_column(curves, client_in):
    html = client_in.get(reverse("runs:list"), {"sort": "-final:reward/mean", "q": "rising"}).content.decode()
    assert row_ids(html) == [curves["rising30"].pk, curves["rising31"].pk]
    assert re.search(r'<th class="final-col" data-col="final:reward/mean" aria-sort="descending"><a href="\?q=rising&amp;'
                     r'sort=final%3Areward%2Fmean" data-sort="final:reward/mean">final reward/mean</a> ▼</th>', html)
    assert re.findall(r'<td class="final-col num">([^<]*)</td>', html) == ["0.9667", "0.7375"]  # (28+29+30)/90 and (28+..+31)/160
    assert 'name="cols" value="final:reward/mean" checked' in html and 'name="cols" value="final:accuracy">' in html
    # the picker's free box: to the state's own address, the metric among the columns
    response = client_in.get(reverse("runs:list"), {"cols": "final:reward/mean", "final": "entropy", "q": "empty"})
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:list") + "?q=empty&cols=final%3Areward%2Fmean%2Cfinal%3Aentropy"
    html = client_in.get(response["Location"]).content.decode()
    assert html.count('<td class="final-col num"><span class="hint">–</span></td>') == 2  # no points: a dash


def test_a_final_sort_over_hundreds_of_runs_is_one_query(user, config, django_assert_max_num_queries):
    """600 runs of 100 steps (60,000 points): sorted by their final reward/mean in the database, in a fixed number
    of queries whatever the number of runs (a sort in Python would read every run's points). How long it takes
    at scale is a benchmark's question, not this test's."""
    from webapp.runs.models import MetricPoint

    n_runs = 600
    template = services.run_create(config=config, user=user, name="bulk")
    Run.objects.bulk_create([Run(project_id=template.project_id, config=template.config, seed=i, name=f"bulk {i}",
                                 created_by=user, last_step=100) for i in range(n_runs)])
    pks = list(Run.objects.filter(name__startswith="bulk ").values_list("pk", flat=True))
    MetricPoint.objects.bulk_create([MetricPoint(run_id=pk, step=s, key="reward/mean", value=((pk * 31 + s) % 97) / 97)
                                     for pk in pks for s in range(1, 101)], batch_size=20_000)
    params = search.parse_params({"sort": "-final:reward/mean", "cols": "final:reward/mean"})
    with django_assert_max_num_queries(4):
        table = selectors.run_table(user=user, params=params)
        rows = table["rows"]
        count = table["page"].paginator.count
    assert count == n_runs + 1 and len(rows) == search.PER_PAGE
    finals = [row["finals"][0] for row in rows]
    assert finals == sorted(finals, reverse=True)
    best = max(pks, key=lambda pk: (sum(((pk * 31 + s) % 97) / 97 for s in range(91, 101)) / 10, pk))
    assert rows[0]["run"].pk == best


def test_config_project_sweep_and_engine_columns_sort(lab, user):
    """Before: only name, status, seed, steps, created and duration sorted (``sort=-lr`` fell back to newest
    first). After: a config key sorts by its value, numbers as numbers (1e-06 < 1e-05 < 3e-05 ...; group_size 4 <
    16), and project, sweep and engine sort; runs without a value last either way."""
    from webapp.projects.models import Membership, Project

    pks = [run.pk for run in lab["runs"]]
    assert found(user, "", "lr") == pks and found(user, "", "-lr") == pks[::-1]
    assert found(user, "", "group_size") == [pks[0], pks[3], pks[1], pks[4], pks[2]]  # 4, 4, 8, 8, 16
    assert found(user, "", "sweep") == [pks[3], pks[4], pks[0], pks[1], pks[2]]  # "lr sweep", then none
    assert found(user, "", "-sweep") == [pks[4], pks[3], pks[2], pks[1], pks[0]]
    lab_project = Project.objects.create(name="Aardvark lab")
    Membership.objects.create(project=lab_project, user=user, role="member")
    Run.objects.filter(pk=pks[2]).update(project=lab_project)
    assert found(user, "", "project")[0] == pks[2] and found(user, "", "-project")[-1] == pks[2]
    trl = Run.objects.get(pk=pks[1])
    Run.objects.filter(pk=trl.pk).update(config={**trl.config, "engine": "trl"})
    assert found(user, "", "engine")[-1] == pks[1] and found(user, "", "-engine")[0] == pks[1]


def test_the_page_sorts_by_a_config_column_and_names_an_unknown_sort(lab, client_in):
    url = reverse("runs:list")
    html = client_in.get(url, {"sort": "-lr"}).content.decode()
    assert "search-problems" not in html
    assert row_ids(html) == [run.pk for run in lab["runs"]][::-1]
    header = re.search(r'<th class="config-col" data-col="lr" aria-sort="descending"><a href="([^"]*)"', html)
    assert header and header.group(1) == "?sort=lr"  # the sorted key's column is shown, its link reverses it
    for key in ("project", "sweep", "engine"):
        assert f'data-sort="{key}"' in html
    html = client_in.get(url, {"sort": "-bogus"}).content.decode()
    problems = re.search(r'id="search-problems">(.*?)</ul>', html, re.S).group(1)
    assert "sort “-bogus” is not a column" in problems and "a config key such as lr" in problems
