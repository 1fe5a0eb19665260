"""A gunicorn config file for tests/faults/test_launch_retry.py: each worker process it forks dies (SIGKILL, as
the out-of-memory killer or a crash would end it) at a chosen point of its next launch, once, when the file named
by $SEEDBED_TEST_DIE exists; the file says where: "before_commit" (the launch's transaction still open) or
"after_send" (committed, the broker took the run's message, nothing answered and ``sent()`` not yet run)."""
import os
import signal


def post_fork(server, worker):
    import workers.dispatch as dispatch

    marker = os.environ["SEEDBED_TEST_DIE"]
    real_send_task, real_send_on_commit = dispatch.send_task, dispatch.send_on_commit

    def die_if(point: str) -> None:
        try:
            with open(marker) as f:
                wanted = f.read().strip()
        except FileNotFoundError:
            return
        if wanted == point:
            os.unlink(marker)
            os.kill(os.getpid(), signal.SIGKILL)

    def send_task(*args, **kwargs):
        reason = real_send_task(*args, **kwargs)
        die_if("after_send")
        return reason

    def send_on_commit(*args, **kwargs):
        die_if("before_commit")
        return real_send_on_commit(*args, **kwargs)

    dispatch.send_task, dispatch.send_on_commit = send_task, send_on_commit
