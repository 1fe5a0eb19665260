"""code verifier: correct programs pass, a corpus of hostile programs fails and leaves nothing behind."""
import os
import textwrap
import threading
import time

import pytest

from training.verifiers import VerifierError, get_verifier, score_batch
from training.verifiers.code import extract_program, plan_tests
from training.verifiers.sandbox import probe_bwrap, sandbox_ids

# Put a secret in this (the trusted) process's environment: no sandboxed program may see it.
SECRET = "seedbed-secret-7f3a"
os.environ["SEEDBED_TEST_SECRET"] = SECRET
HOSTILE_MARK = "seedbed_hostile_"


def fenced(code: str) -> str:
    return "Here is my solution:\n```python\n" + textwrap.dedent(code).strip() + "\n```\n"


@pytest.fixture(scope="module")
def code_v():
    return get_verifier("code", timeout_s=1.5, memory_mb=512, cache_size=0)


def sandbox_uid() -> int:
    return sandbox_ids()[0]


def processes_of_uid(uid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                pids.append(int(name))
                            break
            except OSError:
                pass
    return pids


def processes_under(root: int, uid: int) -> list[int]:
    """The processes of ``uid`` that descend from ``root`` (other tests' sandboxes, run beside this one by
    pytest-xdist, run as the same uid)."""
    def descends(pid: int) -> bool:
        for _ in range(64):
            if pid == root:
                return True
            try:
                with open(f"/proc/{pid}/status") as f:
                    pid = int(next(line for line in f if line.startswith("PPid:")).split()[1])
            except (OSError, StopIteration, ValueError):
                return False
            if pid <= 1:
                return False
        return False
    return [pid for pid in processes_of_uid(uid) if descends(pid)]


def stray_files(uid: int) -> list[str]:
    found = []
    for folder in ("/tmp", "/dev/shm", "/var/tmp", os.getcwd(), "/"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                owner = os.lstat(path).st_uid
            except OSError:
                continue
            if name.startswith(HOSTILE_MARK) or (owner == uid and uid != os.getuid()):
                found.append(path)
    return found


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)  # polling a condition with a deadline, not a fixed sleep
    return predicate()


# ---- correct and wrong programs -------------------------------------------------------------------

GOOD_SQUARE = fenced("""
    def square(x):
        return x * x
""")


def test_correct_programs_pass(code_v):
    assert code_v(GOOD_SQUARE, {"tests": "assert square(3) == 9\nassert square(-2) == 4"}).score == 1.0
    io = {"entry_point": "square", "inputs": [[1], [2], [12]], "outputs": [1, 4, 144]}
    assert code_v(GOOD_SQUARE, io).score == 1.0
    prog = fenced("""
        def pair(a):
            return (a, a + 1)
        def words(s):
            return sorted(set(s.split()))
    """)
    tests = textwrap.dedent("""
        import math
        x = pair(1)
        assert x == (1, 2)
        assert pair(2) != (2, 4)
        assert words("b a b") == ["a", "b"]
        assert len(words("a a")) == 1
        assert pair(3)[0] == math.floor(3.5)
        assert isinstance(pair(0), tuple)
        for i in range(3):
            assert pair(i)[1] == i + 1
    """)
    result = code_v(prog, {"tests": tests})
    assert result.score == 1.0, result.details
    assert result.details["passed"] == result.details["total"] == 7  # `import math`, `x = pair(1)`: set-up


def test_wrong_programs_fail_with_reason(code_v):
    wrong = fenced("def square(x):\n    return x + x")
    r = code_v(wrong, {"tests": "assert square(2) == 4\nassert square(3) == 9"})
    assert r.score == 0.0 and r.details["passed"] == 1 and "got 6" in r.details["first_failure"]
    r = code_v(wrong, {"entry_point": "square", "inputs": [[3]], "outputs": [9]})
    assert r.score == 0.0
    assert code_v("no code at all", {"tests": "assert f()"}).details["reason"] == "no ```python block"
    with pytest.raises(VerifierError, match="check nothing of the program's"):
        code_v(GOOD_SQUARE, {"tests": "import math\nassert True"})
    tup = fenced("def f():\n    return (1, 2)")
    assert code_v(tup, {"tests": "assert f() == [1, 2]"}).score == 0.0  # Python: (1, 2) != [1, 2]
    assert code_v(tup, {"entry_point": "f", "inputs": [[]], "outputs": [[1, 2]]}).score == 1.0  # JSON: no tuples
    loop_fail = fenced("def f(i):\n    return i")
    assert code_v(loop_fail, {"tests": "for i in range(3):\n    assert f(i) == 1"}).score == 0.0


def test_values_cross_as_they_left(code_v):
    """The test process sees the program's values as plain data of their own types: tuples stay tuples, sets
    sets, dicts keep their order, big ints and non-finite floats survive; keyword arguments go across too."""
    prog = fenced("""
        def values(n, *, scale=1):
            return {"t": (n, n + 1), "s": {n, -n}, "fs": frozenset([n]), "d": {"b": 1, "a": 2, 3: [n]},
                    "big": 10 ** 30 * scale, "inf": float("inf"), "nan": float("nan"), "neg0": -0.0, "none": None}
    """)
    tests = textwrap.dedent("""
        import math
        v = values(2, scale=3)
        assert v["t"] == (2, 3) and isinstance(v["t"], tuple)
        assert v["s"] == {2, -2} and isinstance(v["s"], set)
        assert isinstance(v["fs"], frozenset) and 2 in v["fs"]
        assert list(v["d"]) == ["b", "a", 3] and v["d"][3] == [2]
        assert v["big"] == 3 * 10 ** 30
        assert math.isinf(v["inf"]) and math.isnan(v["nan"]) and math.copysign(1, v["neg0"]) == -1
        assert v["none"] is None
    """)
    result = code_v(prog, {"tests": tests})
    assert result.score == 1.0, result.details


def test_tests_may_lean_on_the_programs_imports(code_v):
    """Tests written for one shared namespace use the program's ``import math``: the test process imports its
    own copy of the module (never the program's object, which could have been patched)."""
    prog = fenced("""
        import math
        import os.path as osp
        math.pi = 3.0  # patched in the program's process only
        def area(r):
            return 3.141592653589793 * r * r
    """)
    result = code_v(prog, {"tests": "assert abs(area(1) - math.pi) < 1e-9\nassert osp.join('a', 'b') == 'a/b' and area(0) == 0"})
    assert result.score == 1.0, result.details


def test_programs_and_tests_see_the_standard_library_only(code_v):
    """The server runs without ``site`` (``python -I -S``): no ``.pth`` file of the interpreter's installation
    ran in it, and neither process has the installation's site-packages on its path."""
    prog = fenced("""
        import sys
        def seen():
            return [sys.flags.no_site, "site" in sys.modules, [p for p in sys.path if "-packages" in p]]
    """)
    result = code_v(prog, {"tests": "assert seen() == [1, False, []]\n"
                                    "import sys\nassert sys.flags.no_site == 1 and 'site' not in sys.modules"})
    assert result.score == 1.0, result.details


def test_the_programs_exceptions_reach_the_tests_but_a_broken_channel_is_no_exception_a_test_expects(code_v):
    prog = fenced("""
        def f(x):
            if x < 0:
                raise ValueError("negative")
            return x
        class Custom(Exception):
            pass
        def g(x):
            raise Custom("mine")
        def h(x):
            return object()
    """)
    expects_value_error = "try:\n    f(-1)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass"
    assert code_v(prog, {"tests": expects_value_error}).score == 1.0
    assert code_v(prog, {"tests": "try:\n    g(1)\nexcept Exception as e:\n    assert str(e) == 'mine'"}).score == 1.0
    # a value that cannot cross is no exception the tests could have expected
    swallowed = code_v(prog, {"tests": "try:\n    h(1)\nexcept Exception:\n    pass"})
    assert swallowed.score == 0.0 and "not plain JSON data" in swallowed.details["first_failure"]


def test_partial_credit_and_details_layers():
    v = get_verifier("code", timeout_s=2, partial_credit=True)
    r = v(fenced("def f(x):\n    return 1"), {"tests": "assert f(0) == 1\nassert f(1) == 2\nassert f(2) == 1"})
    assert r.score == pytest.approx(2 / 3)
    layers = r.details["layers"]
    expect_ns = probe_bwrap()["works"]
    assert layers["uid_switch"] is (os.geteuid() == 0)
    assert layers["net_namespace"] is expect_ns and layers["pid_namespace"] is expect_ns
    assert layers["seccomp"] is True and layers["rlimits"] is True and layers["program_part_only"] is True
    assert layers["tests_apart"] is (os.geteuid() == 0)  # without a uid switch the tests are within reach
    assert layers["tmp_mb"] == (1024 // 4 if expect_ns else 0)  # memory_mb's default, 1024


SYSV_IPC = fenced("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    made = {"shm": libc.shmget(0, 4096, 0o1600), "sem": libc.semget(0, 1, 0o1600), "msg": libc.msgget(0, 0o1600)}
    errors = {name: os.strerror(ctypes.get_errno()) if made[name] == -1 else made[name] for name in made}
    def f():
        return errors
""")


def test_ipc_objects_that_would_outlive_the_program_are_refused():
    """System V shared memory, semaphores and message queues outlive their processes in the server's IPC
    namespace, which all its runs share: a program could leave bytes in one for a later run's program (same
    uid) to read. Their creation is refused by the seccomp filter (b1d04b3 made all three)."""
    v = get_verifier("code", timeout_s=5, cache_size=0)
    denied = os.strerror(1)  # EPERM
    r = v(SYSV_IPC, {"tests": f"assert f() == {{'shm': {denied!r}, 'sem': {denied!r}, 'msg': {denied!r}}}, f()"})
    assert r.score == 1.0, r.details


def test_cache_by_code_and_tests():
    v = get_verifier("code", timeout_s=2)
    ex = {"tests": "assert square(5) == 25"}
    first, second = v(GOOD_SQUARE, ex), v(GOOD_SQUARE, ex)
    assert first.score == second.score == 1.0 and not first.details["cached"] and second.details["cached"]
    assert not v(GOOD_SQUARE, {"tests": "assert square(6) == 36"}).details["cached"]


def test_bad_examples_are_verifier_errors(code_v):
    with pytest.raises(VerifierError, match="tests"):
        code_v(GOOD_SQUARE, {"tests": "assert ("})
    with pytest.raises(VerifierError, match="'tests' or 'entry_point'"):
        code_v(GOOD_SQUARE, {"answer": 3})
    with pytest.raises(VerifierError, match="equal length"):
        code_v(GOOD_SQUARE, {"entry_point": "square", "inputs": [[1]], "outputs": []})


def test_extract_and_plan():
    assert extract_program("```\nx = 1\n```") == "x = 1\n"
    assert extract_program("```python\na\n```\n```\nb\n```") == "a\n"  # a tagged block wins
    steps, checks = plan_tests("assert f(1) == g(1)\nassert f(2) != 3\ny = 2\nf(y)\nassert True")
    assert [s["src"] for s in steps] == ["f(1)", "g(1)", "f(2)", "y = 2", "f(y)", "assert True"]
    assert [c.kind for _, c in checks] == ["equal_steps", "equal", "setup", "ok", "setup"] and checks[1][1].negate
    assert 3 not in [s.get("src") for s in steps]  # the expected value stays on the trusted side


# ---- the program never holds the tests ---------------------------------------------------------------

MARKER = "seedbed-tests-marker-4b1d"
# Where the tests' source could be in the program process: a live object (the collector), or anywhere in its
# memory (an earlier request's remains included), read through ctypes over its writable mappings.
# The marker is matched by a pattern ("marke[r]") so that the program itself never writes it into its memory.
FINDS_THE_MARKER = f"""
    import ctypes, gc, re
    def seen():
        pattern = "{MARKER.replace("marker", "marke[r]")}"
        live = any(isinstance(v, str) and re.search(pattern, v) for o in gc.get_objects()
                   for v in ((o,) if isinstance(o, str) else o.values() if isinstance(o, dict) else
                             o if isinstance(o, (list, tuple)) else ()))
        memory = False
        for line in open("/proc/self/maps"):
            if " rw" in line:
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                if end - start < 1 << 28 and re.search(pattern.encode(), ctypes.string_at(start, end - start)):
                    memory = True
        return [bool(live), memory]
"""


def test_the_program_process_never_holds_the_tests_of_this_request_or_an_earlier_one():
    """The program is forked from a zygote that never held a request and reads only its code, the set-up and
    the names it is to define: a marker in the tests (in a tolerance's source, which travels to the test
    process) is nowhere in its objects or its memory, in the run that carries it nor in the next run on the
    same server. On b1d04b3 both runs found it (the program was a fork of the request-reading server)."""
    v = get_verifier("code", timeout_s=5, cache_size=0, processes=1)
    carries = {"tests": f"assert abs(len('{MARKER}') - 25) < 1\nassert seen() == [False, False]"}
    after = {"tests": "assert seen() == [False, False]"}
    first, second = v.batch([fenced(FINDS_THE_MARKER)] * 2, [carries, after])
    assert first.score == 1.0, first.details
    assert second.score == 1.0, second.details


def test_the_tests_run_as_a_uid_of_their_own():
    """The test process's uid is not the program's (as root: seedbed-sandbox-tests and seedbed-sandbox)."""
    v = get_verifier("code", timeout_s=3, cache_size=0)
    result = v(fenced("import os\ndef uid():\n    return os.getuid()"),
               {"tests": "import os\nassert uid() != os.getuid()"})
    assert result.score == (1.0 if os.geteuid() == 0 else 0.0), result.details


# ---- the hostile corpus ---------------------------------------------------------------------------

TESTS = {"tests": "assert f(2) == 4\nassert f(3) == 9"}
HOSTILE = {
    "infinite_loop": "def f(x):\n    return x * x\nwhile True:\n    pass",
    "fork_bomb": """
        import os
        def f(x):
            return x * x
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
    "memory_bomb": """
        blocks = []
        while True:
            blocks.append(bytearray(50 * 1024 * 1024))
        def f(x):
            return x * x
    """,
    "huge_output": """
        import sys
        while True:
            sys.stdout.write("x" * 1000000)
        def f(x):
            return x * x
    """,
    "read_etc_passwd": """
        def f(x):
            return {2: 4, 3: 9}[x] if open("/etc/passwd").read().startswith("root") else 0
    """,
    "read_parent_environment": f"""
        import glob, os
        def found():
            blobs = [" ".join(os.environ.values())]
            for path in glob.glob("/proc/*/environ"):
                try:
                    blobs.append(open(path, "rb").read().decode(errors="replace"))
                except OSError:
                    pass
            return any("{SECRET}" in b for b in blobs)
        def f(x):
            return x * x if found() else -1
    """,
    "write_outside_dir": f"""
        import os
        for path in ("../{HOSTILE_MARK}up", "/{HOSTILE_MARK}root", "{os.getcwd()}/{HOSTILE_MARK}repo"):
            open(path, "w").write("pwned")
        def f(x):
            return x * x
    """,
    "write_tmp": f"""
        open("/tmp/{HOSTILE_MARK}tmp", "w").write("pwned")
        def f(x):
            return x * x
    """,
    "write_dev_shm": f"""
        open("/dev/shm/{HOSTILE_MARK}shm", "w").write("pwned")
        def f(x):
            return x * x
    """,
    "socket_to_redis": """
        import socket
        s = socket.create_connection(("127.0.0.1", 6379), timeout=1)
        s.sendall(b"PING\\r\\n")
        reply = s.recv(10)
        def f(x):
            return x * x if reply.startswith(b"+PONG") else 0
    """,
    "kill_parent": """
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(1, signal.SIGKILL)
        def f(x):
            return x * x
    """,
    "sys_exit_before_tests": "import sys\nsys.exit(0)\ndef f(x):\n    return x * x",
    "os_exit_before_tests": "import os\nos._exit(0)\ndef f(x):\n    return x * x",
    "atexit_trick": """
        import atexit, os, sys
        atexit.register(lambda: os.write(3, b'{"i": 0, "value": 4}\\n{"i": 1, "value": 9}\\n'))
        sys.exit(0)
    """,
    "patch_builtins": """
        import builtins
        builtins.AssertionError = type("Never", (Exception,), {})
        builtins.isinstance = lambda *a: True
        builtins.bool = lambda *a: True
        builtins.print = lambda *a, **k: None
        def f(x):
            return None
    """,
    "eq_always_true": """
        class Yes:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def f(x):
            return Yes()
    """,
    "int_subclass_eq": """
        class Liar(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def f(x):
            return Liar(0)
    """,
    "forge_pass_marker": """
        import os, sys
        print("ALL TESTS PASSED")
        sys.stderr.write("OK\\n")
        for fd in range(3, 10):
            try:
                os.write(fd, b'{"program_ok": true}\\n{"i": 0, "value": 4}\\n{"i": 1, "value": 9}\\n')
            except OSError:
                pass
        def f(x):
            return 0
    """,
    "deep_recursion": """
        import sys
        sys.setrecursionlimit(10 ** 8)
        def down(n):
            return down(n + 1) + 1
        down(0)
        def f(x):
            return x * x
    """,
    "ctypes_segfault": """
        import ctypes
        ctypes.string_at(0)
        def f(x):
            return x * x
    """,
    "spawn_shell": """
        import subprocess
        out = subprocess.run(["sh", "-c", "echo 4"], capture_output=True).stdout
        def f(x):
            return int(out) if x == 2 else 9
    """,
    "sleeping": "import time\ntime.sleep(60)\ndef f(x):\n    return x * x",
    "double_fork_daemon": f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3)
                open("/tmp/{HOSTILE_MARK}daemon", "w").write("late")
                while True:
                    time.sleep(1)
            os._exit(0)
        def f(x):
            return 0
    """,
    "ptrace_parent": """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        attached = libc.ptrace(16, os.getppid(), 0, 0) == 0
        def f(x):
            return x * x if attached else 0
    """,
    "unshare_user_namespace": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        became_root = libc.unshare(0x10000000) == 0
        def f(x):
            return x * x if became_root else 0
    """,
    "flood_report_pipe": """
        import os
        while True:
            os.write(3, b"x" * 65536)
    """,
    "close_report_fd": """
        import os
        os.dup2(os.open("/dev/null", os.O_WRONLY), 3)
        def f(x):
            return x * x
    """,
    "thread_bomb": """
        import threading, time
        def f(x):
            return x * x
        while True:
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    """,
}


def test_hostile_corpus_fails_and_leaves_nothing_behind(code_v):
    assert len(HOSTILE) >= 20
    uid = sandbox_uid()
    names = list(HOSTILE)
    completions = [fenced(HOSTILE[n]) for n in names] + [GOOD_SQUARE.replace("square", "f")]
    examples = [TESTS] * len(completions)
    results = score_batch(code_v, completions, examples)
    verdicts = {n: r for n, r in zip(names, results)}
    errors = {n: r for n, r in verdicts.items() if isinstance(r, VerifierError)}
    assert not errors, errors
    passed = {n: r.details for n, r in verdicts.items() if r.score != 0.0}
    assert not passed, passed
    # The correct program in the same batch still passes: the servers survived everything above.
    assert results[-1].score == 1.0, results[-1].details
    for name in ("infinite_loop", "sleeping"):
        assert "timed out" in verdicts[name].details["first_failure"]
    assert verdicts["socket_to_redis"].details["first_failure"].startswith("program raised PermissionError")
    if uid != os.getuid():
        assert wait_until(lambda: not processes_of_uid(uid), timeout=10), processes_of_uid(uid)
    assert not stray_files(uid)


def test_daemon_cannot_write_later(code_v):
    """The double-forked daemon was killed with its run: even after its sleep, no file appears."""
    r = code_v(fenced(HOSTILE["double_fork_daemon"]), TESTS)
    assert r.score == 0.0
    uid = sandbox_uid()
    if uid != os.getuid():
        assert not processes_of_uid(uid)
    deadline = time.monotonic() + 3.5
    assert not wait_until(lambda: bool(stray_files(uid)), timeout=max(0.0, deadline - time.monotonic()))


def test_server_killed_mid_run_is_verifier_error():
    v = get_verifier("code", timeout_s=20, processes=1, memory_mb=600)  # its own sandbox (other limits key)
    sandbox = v.sandbox
    uid = sandbox_uid()
    program = fenced("import time\ntime.sleep(30)\ndef f(x):\n    return x")

    seen: list[int] = []

    def ours() -> list[int]:  # this sandbox's processes of the uid (other tests' may run beside it)
        return [pid for worker in sandbox.pool._workers for pid in processes_under(worker.proc.pid, uid)]

    def kill_server_once_running():
        if wait_until(lambda: bool(seen.extend(ours()) or seen), timeout=20):
            for worker in sandbox.pool._workers:
                worker.proc.kill()

    killer = threading.Thread(target=kill_server_once_running)
    killer.start()
    try:
        with pytest.raises(VerifierError, match="sandbox failed"):
            v(program, {"tests": "assert f(1) == 1"})
    finally:
        killer.join()
    assert seen
    assert wait_until(lambda: not set(seen) & set(processes_of_uid(uid)), timeout=10)
    assert v(GOOD_SQUARE, {"tests": "assert square(2) == 4"}).score == 1.0  # a fresh server took over


# ---- memory: the files a run writes count -------------------------------------------------------------

def shmem_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no Shmem in /proc/meminfo")


@pytest.mark.skipif(not probe_bwrap()["works"], reason="the private /tmp is bubblewrap's")
def test_tmpfs_is_bounded_by_memory_mb():
    """memory_mb 64: the sandbox's /tmp is a tmpfs of 16 MB. A program writing 400 MB there (1 MB files, as
    RLIMIT_FSIZE allows) and holding on until the timeout fails with the reason, and the host's shared memory
    (tmpfs pages are Shmem) never grows by anything like 400 MB while it runs."""
    v = get_verifier("code", timeout_s=3, memory_mb=64, cache_size=0, processes=1)
    program = fenced("""
        import os, time
        block = b"x" * (1 << 20)
        try:
            for i in range(400):
                with open(os.path.join(os.environ["TMPDIR"], f"fill-{i}"), "wb") as f:
                    f.write(block)
        except OSError:
            pass
        time.sleep(60)
        def f(x):
            return x * x
    """)
    v(GOOD_SQUARE, {"tests": "assert square(2) == 4"})  # servers started outside the measurement
    baseline, peak, done = shmem_mb(), [0.0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], shmem_mb())
            time.sleep(0.02)  # sampling a meter while the run goes

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = v(program, {"tests": "assert f(2) == 4"})
    finally:
        done.set()
        sampler.join()
    assert result.score == 0.0
    assert result.details["first_failure"] == "/tmp full: the sandbox's tmpfs is limited to 16 MB", result.details
    assert peak[0] - baseline < 64, (baseline, peak[0])
    # and the space is free again for the next run
    assert v(GOOD_SQUARE, {"tests": "assert square(3) == 9"}).score == 1.0


def test_program_can_use_its_tmpdir_under_a_strict_umask():
    """Workers run with umask 077; the runs' folder must still be traversable by the sandbox user, so that
    ``tempfile`` (which uses the absolute $TMPDIR) works in a program."""
    old = os.umask(0o077)
    try:
        v = get_verifier("code", timeout_s=2.5, memory_mb=128, cache_size=0, processes=1)  # a fresh sandbox
        program = fenced("""
            import tempfile
            with tempfile.NamedTemporaryFile("w+") as f:
                f.write("kept")
                f.seek(0)
                kept = f.read()
            def f(x):
                return kept
        """)
        result = v(program, {"tests": "assert f(0) == 'kept'"})
    finally:
        os.umask(old)
    assert result.score == 1.0, result.details


@pytest.mark.skipif(not probe_bwrap()["works"], reason="the private /tmp is bubblewrap's")
def test_memory_mb_is_shared_by_the_programs_address_space_and_files():
    v = get_verifier("code", timeout_s=2, memory_mb=64, cache_size=0, processes=1)
    program = fenced("""
        import resource
        def limit():
            return resource.getrlimit(resource.RLIMIT_AS)[0] // 2 ** 20
    """)
    result = v(program, {"tests": "assert limit() == 48"})  # 64 MB = 48 MB of address space + a 16 MB /tmp
    assert result.score == 1.0, result.details
