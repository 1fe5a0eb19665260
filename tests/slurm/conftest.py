"""A real Slurm cluster for the tests (``workers.slurm.cluster``: munge, a controller and two nodes on this
machine, under the test workers' ``SEEDBED_HOME``), started once per session, and the queue ``slurm`` that names
it, registered in each test's database."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def slurm_cluster(worker_env):
    from workers.slurm import cluster

    _, home = worker_env
    conf = cluster.start(home)
    yield conf
    cluster.stop(home)


@pytest.fixture
def slurm_queue(slurm_cluster):
    from webapp.runs.models import Queue, QueueKind

    return Queue.objects.create(name="slurm", kind=QueueKind.SLURM, slurm_conf=str(slurm_cluster),
                                partition="debug", nodes=2, cpus_per_task=1, description="the tests' cluster")


@pytest.fixture
def slurm_env(slurm_cluster):
    return {**os.environ, "SLURM_CONF": str(slurm_cluster)}


@pytest.fixture
def alice_api(client, django_user_model):
    """The API as a user with a token (tests/api/conftest.py's ``Api``)."""
    from tests.api.conftest import Api, _user_with_token

    _, token = _user_with_token(django_user_model, "alice")
    return Api(client, token)
