"""docker-compose.yml is valid (Debian's docker-compose checks it; Docker's engine does not run here)."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO

ENV = {**os.environ, "POSTGRES_PASSWORD": "pw", "DJANGO_SECRET_KEY": "key", "DJANGO_ALLOWED_HOSTS": "seedbed.lab"}


def compose(*args, env=ENV):
    assert shutil.which("docker-compose"), "docker-compose is installed by ./seedbed (apt package docker-compose)"
    return subprocess.run(["docker-compose", "-f", str(REPO / "docker-compose.yml"), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_compose_file_is_valid():
    result = compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_compose_has_the_services_health_checks_and_one_gpu_per_worker():
    result = compose("config")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    services = config["services"]
    assert {"postgres", "redis", "web", "maintenance", "worker-gpu0"} <= set(services)
    for name, service in services.items():
        assert "healthcheck" in service, f"{name} has no health check"
    gpu = services["worker-gpu0"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}]
    assert gpu["build"]["args"]["EXTRAS"] == "gpu"
    shell, flag, line = gpu["command"]
    assert (shell, flag) == ("sh", "-c")
    doctor, celery = line.split(" && exec ")
    assert doctor == "python -m workers.doctor --for worker"  # stops the worker when it cannot sandbox code
    command = celery.split()
    assert command[command.index("-Q") + 1] == "gpu" and command[command.index("-c") + 1] == "1"
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgres://")
    assert {"depends_on", "volumes"} <= set(services["web"])
    assert {"seedbed-data", "postgres-data", "redis-data"} <= set(config["volumes"])


def test_compose_refuses_to_start_without_its_secrets():
    for secret in ("POSTGRES_PASSWORD", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS"):
        env = {k: v for k, v in ENV.items() if k != secret}
        result = compose("config", "-q", env=env)
        assert result.returncode != 0 and secret in result.stderr + result.stdout, secret


def test_the_workers_get_what_bubblewrap_needs_and_only_they_do():
    """The code verifier's sandbox creates namespaces and pivots into a read-only root inside the worker."""
    services = yaml.safe_load(compose("config").stdout)["services"]
    worker = services["worker-gpu0"]
    assert worker["cap_add"] == ["SYS_ADMIN"]
    assert set(worker["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined"}
    for name in ("web", "maintenance", "postgres", "redis"):
        assert "cap_add" not in services[name] and "security_opt" not in services[name], name


def test_the_image_installs_bubblewrap_and_creates_the_sandbox_users():
    """The programs' user and the tests' (each its own uid: a program cannot signal or read its tests)."""
    from training.verifiers.sandbox import SANDBOX_USER, TESTS_USER

    commands = (REPO / "Dockerfile").read_text().replace("\\\n", " ").splitlines()  # continuations joined
    assert any("apt-get install" in c and "bubblewrap" in c for c in commands)
    for user in (SANDBOX_USER, TESTS_USER):
        assert any(re.search(rf"useradd --system [^&]*\b{user}(\s|$)", c) for c in commands), user


def test_check_deploy_is_clean_under_the_compose_settings(tmp_path):
    """`manage.py check --deploy` with the web service's environment as compose gives it (a real secret key)
    reports nothing: HTTPS only, secure cookies, HSTS, hosts named."""
    import secrets
    import sys

    env_for_compose = {**ENV, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    web_env = yaml.safe_load(compose("config", env=env_for_compose).stdout)["services"]["web"]["environment"]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SEEDBED_"))},
           **{k: str(v) for k, v in web_env.items()}, "SEEDBED_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
