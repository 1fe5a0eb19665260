"""Names and reasons cannot act on the reader's terminal: the server refuses control characters in the names and
reasons people type (a field error naming the field, through the API and the CLI alike), and the client
(``seedbed_client.text.printable``) escapes what it prints, for values stored before that rule or sent from
elsewhere: an escape sequence that would set the terminal's title or write its clipboard (OSC 52), a C1 CSI, or
a newline that would forge a table row is shown escaped, one row per run."""
from __future__ import annotations

import pytest

from tests.api.test_client import alice, assert_failed, cli, config, config_file  # noqa: F401 (fixtures)
from webapp.projects.models import Project
from webapp.runs.models import Run, RunStatus
from webapp.sweeps.models import Sweep

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "\x1b]0;owned\x07"  # sets the window title
CLIPBOARD = "\x1b]52;c;ZWNobyBvd25lZA==\x07"  # writes "echo owned" to the clipboard
CSI = "\x9b2J"  # C1 CSI: clears the screen on terminals that read 8-bit controls
FORGED = "\n999 trusted alice succeeded 6/6"  # a second row under the first
RAW = ("\x1b", "\x07", "\x9b")


def test_the_server_refuses_control_characters_in_names_and_reasons(cli, config_file):
    for name in (f"lr{TITLE}", f"lr{FORGED}", f"lr{CSI}", "lr\u202eevil"):
        assert_failed(cli("runs", "launch", config_file(), "--name", name), 2,
                      "error: name: must not hold control characters; U+")
        assert_failed(cli("sweeps", "launch", config_file(), "--seeds", "2", "--concurrency", "1", "--name", name),
                      2, "error: name: must not hold control characters")
    assert not Run.objects.exists() and not Sweep.objects.exists()
    launched = cli("runs", "launch", config_file(), "--name", "plain · é")
    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get()
    assert_failed(cli("runs", "kill", str(run.pk), "--reason", f"bad{CLIPBOARD}"), 2,
                  "error: reason: must not hold control characters; U+001B at character 4")
    assert Run.objects.get().status == RunStatus.QUEUED  # refused before anything was written
    swept = cli("sweeps", "launch", config_file(), "--seeds", "2", "--concurrency", "1", "--name", "plain sweep")
    assert swept.returncode == 0, swept.stderr
    sweep = Sweep.objects.get()
    assert_failed(cli("sweeps", "stop", str(sweep.pk), "--reason", f"done{FORGED}"), 2,
                  "error: reason: must not hold control characters; U+000A at character 5")
    sweep.refresh_from_db()
    assert sweep.stopped_at is None and not sweep.runs.filter(kill_requested_at__isnull=False).exists()


def test_the_api_rename_refuses_a_newline(client, django_user_model, config):
    from webapp.api.services import token_create
    from webapp.runs import services as run_services

    user = django_user_model.objects.create_user(username="eve", password="pw-for-tests-only")
    token = token_create(user=user, name="t")[1]
    run = run_services.run_create(config=config, user=user, name="ok")
    answer = client.patch(f"/api/v1/runs/{run.pk}", {"name": f"ok{FORGED}"}, content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["errors"]["name"] == "must not hold control characters; U+000A at character 3"
    assert Run.objects.get(pk=run.pk).name == "ok"


def test_the_client_escapes_what_the_server_stored(cli, alice, config):
    project = Project.objects.get(name="alice")
    run = Run.objects.create(project=project, config=config, seed=0, name=f"evil{TITLE}{CSI}{FORGED}",
                             status=RunStatus.KILLED, killed_by="user:alice", kill_reason=f"oops{CLIPBOARD}")
    Sweep.objects.create(project=project, name=f"sweep{CLIPBOARD}{FORGED}", config=config, seeds=[0],
                         concurrency=1, policy={"name": "manual"})

    listed = cli("runs", "list", "--wide")
    assert listed.returncode == 0, listed.stderr
    assert not any(c in listed.stdout for c in RAW)
    header, *rows = listed.stdout.strip().splitlines()
    assert len(rows) == 1 and rows[0].startswith(f"{run.pk} ")  # the newline did not make a row
    assert "evil\\x1b]0;owned\\x07\\x9b2J\\n999 trusted" in rows[0] and rows[0].split()[-3:] == [
        "alice", "killed", "0/6"]

    sweeps = cli("sweeps", "list")
    assert sweeps.returncode == 0, sweeps.stderr
    assert not any(c in sweeps.stdout for c in RAW) and len(sweeps.stdout.strip().splitlines()) == 2
    assert "sweep\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\n999" in sweeps.stdout

    watched = cli("runs", "watch", str(run.pk), "--interval", "0.1")
    assert watched.returncode == 1, watched.stderr  # a killed run
    assert not any(c in watched.stdout + watched.stderr for c in RAW)
    assert watched.stdout.strip().endswith("(killed by user:alice: oops\\x1b]52;c;ZWNobyBvd25lZA==\\x07)")


def test_the_pages_show_a_refused_reason_or_id_as_an_error_not_a_500(alice, config):
    """The run page's and the sweep page's kill with a control character in the reason, and the sweep page's kill
    of a 23-digit run id (b1d04b3: a 500 each)."""
    from django.urls import reverse

    from tests.conftest import logged_in
    from webapp.runs import services as run_services
    from webapp.sweeps import services as sweep_services

    user = alice[0]
    client = logged_in(user)
    client.raise_request_exception = False
    run = run_services.run_create(config=config, user=user, name="plain")
    answer = client.post(reverse("runs:kill", args=[run.pk]), {"reason": f"bad{TITLE}"}, follow=True)
    assert answer.status_code == 200 and "reason: must not hold control characters" in answer.content.decode()
    assert Run.objects.get(pk=run.pk).kill_requested_at is None

    sweep = sweep_services.sweep_create(config=config, seeds=[0, 1], concurrency=1, name="two", user=user,
                                        policy={"name": "manual"})
    first = sweep.runs.order_by("pk").first()
    url = reverse("sweeps:kill", args=[sweep.pk])
    answer = client.post(url, {"run": [str(first.pk)], "reason": f"bad{CSI}"}, follow=True)
    assert answer.status_code == 200 and "reason: must not hold control characters; U+009B" in \
        answer.content.decode()
    answer = client.post(url, {"run": ["12345678901234567890123"]}, follow=True)
    assert answer.status_code == 200 and "run: expected run ids" in answer.content.decode()
    assert not Run.objects.filter(kill_requested_at__isnull=False).exists()
