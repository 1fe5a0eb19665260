"""The two sandboxed processes of a run, each forked by the server and already locked down when these run
(docs/architecture.md#verifiers): the program process runs the model's program and answers ``get``/``call``
requests; the test process runs the example's tests, reaching the program only through JSON, and writes one
report per step on a pipe the program process cannot reach. Standard library only."""
from __future__ import annotations

import json

from .wire import describe_exception, finish_and_exit, read_line, to_wire, write_all, from_wire


def program_harness(req: dict, request_fd: int, reply_fd: int) -> None:
    """Run the set-up code and the program (compiled on its own), then serve ``get``/``call`` requests, one
    JSON line each way. A set-up stub the program did not redefine is no name of the program's.

    Everything here is the program's to tamper with (it shares the process): nothing it sends is trusted.
    """
    import builtins
    dumps, loads = json.dumps, json.loads

    def send(obj) -> None:
        write_all(reply_fd, (dumps(obj) + "\n").encode())

    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        if req.get("setup"):
            exec(compile(req["setup"], "<setup_code>", "exec", dont_inherit=True), namespace)
        stubs = {name: namespace.get(name) for name in req.get("program_names", ())}
        exec(compile(req["code"], "<program>", "exec", dont_inherit=True), namespace)
    except BaseException as exc:  # SystemExit too: a program that exits before the tests fails them
        send({"program_error": describe_exception(exc)})
        finish_and_exit()
    for name, stub in stubs.items():
        if stub is not None and namespace.get(name) is stub:
            del namespace[name]
    send({"program_ok": True})
    buf = bytearray()
    while True:
        line = read_line(request_fd, buf, 1 << 30)
        if line is None:  # the test process is done
            finish_and_exit()
        req = loads(line)
        n, name = req["n"], req["name"]
        if name not in namespace:
            send({"n": n, "missing": True})
            continue
        target = namespace[name]
        if type(target) is type(json) and type(getattr(target, "__name__", None)) is str:
            send({"n": n, "module": target.__name__})  # the tests import their own copy (and call it there)
            continue
        if req["op"] == "get" and not callable(target):
            try:
                send({"n": n, "value": to_wire(target)})
            except BaseException as exc:
                send({"n": n, "unsendable": describe_exception(exc)})
            continue
        if req["op"] == "get":
            send({"n": n, "callable": True})
            continue
        try:
            value = target(*[from_wire(a) for a in req["args"]],
                           **{k: from_wire(v) for k, v in req["kwargs"].items()})
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: reported, not obeyed
            try:
                message = str(exc)[:400]
            except BaseException:
                message = "<unprintable exception>"
            send({"n": n, "error": message, "type": type(exc).__name__})
            continue
        try:
            send({"n": n, "value": to_wire(value)})
        except BaseException as exc:
            send({"n": n, "unsendable": describe_exception(exc)})


# ---- the test process: runs the example's tests, reaching the program only through JSON ------------


class ProgramFault(BaseException):
    """The program process could not give a plain-data answer (it ended, sent something malformed or a value
    that is not plain data, or has no such name). A BaseException, so that a test's ``except Exception`` never
    takes it for an error the test expected."""


class ProgramError(Exception):
    """The program raised an exception of a class the tests cannot name (its own, or a non-builtin one)."""


def _exception_for(type_name: str, message: str) -> BaseException:
    """The program's exception re-raised in the test process: the builtin class of that name when it is an
    ``Exception`` (so ``except ValueError`` in a test works), never StopIteration (which would silently end
    an iteration in the tests), SystemExit or KeyboardInterrupt (those become a ProgramFault)."""
    import builtins
    cls = getattr(builtins, type_name, None) if type(type_name) is str else None
    if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, Exception):
        return ProgramFault(f"the program raised {type_name}: {message}")
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(
            cls, (StopIteration, StopAsyncIteration)):
        try:
            return cls(message)
        except BaseException:
            pass
    if type(type_name) is str and type_name.isidentifier() and len(type_name) <= 100:
        return type(type_name, (ProgramError,), {})(message)  # its name as the program called it, for reasons
    return ProgramError(message)


class _Module(str):
    """A run's call answered "that name is a module" (the test process imports its own copy and calls that)."""


class _ProgramLink:
    """The test process's end of the two pipes to the program process."""

    def __init__(self, request_fd: int, reply_fd: int, cap: int):
        self.request_fd, self.reply_fd, self.cap = request_fd, reply_fd, cap
        self.buf = bytearray()
        self.count = 0
        self.broken = ""
        self.greeted: str | None = None  # "" once the program ran to its end, else why not; None: not read yet
        self.answers = 0  # the program's answers so far (a value, a function, a result or its exception)

    def _receive(self) -> dict:
        try:
            line = read_line(self.reply_fd, self.buf, self.cap)
            if line is None:
                raise ProgramFault("the program process ended (it exited or was killed)")
            reply = json.loads(line)
            if type(reply) is not dict:
                raise ValueError("not an object")
            return reply
        except ProgramFault as exc:
            self.broken = str(exc)
            raise
        except BaseException as exc:  # ValueError, RecursionError, MemoryError: the program's doing
            self.broken = f"the program process sent a malformed message ({describe_exception(exc)[:120]})"
            raise ProgramFault(self.broken) from None

    def greeting(self) -> str:
        """"" once the program ran to its end, else why not (read once: the program's first line)."""
        if self.greeted is None:
            self.greeted = self._greeting()
        return self.greeted

    def _greeting(self) -> str:
        try:
            hello = self._receive()
        except ProgramFault as exc:
            return str(exc)
        if hello == {"program_ok": True}:
            return ""
        if set(hello) == {"program_error"} and type(hello["program_error"]) is str:
            self.broken = f"program raised {hello['program_error'][:300]}"
            return self.broken
        self.broken = "the program process sent a malformed greeting"
        return self.broken

    def ask(self, request: dict) -> dict:
        if self.greeting() or self.broken:  # (set-up code may ask before the steps do)
            raise ProgramFault(self.broken or self.greeting())
        self.count += 1
        request["n"] = self.count
        try:
            write_all(self.request_fd, (json.dumps(request) + "\n").encode())
        except OSError:
            self.broken = "the program process ended (it exited or was killed)"
            raise ProgramFault(self.broken) from None
        reply = self._receive()
        if reply.get("n") != self.count:
            self.broken = "the program process answered out of turn"
            raise ProgramFault(self.broken)
        return reply

    def call_many(self, calls: list, known: set):
        """Yield ``(answer, reached)`` for each of ``calls`` ([name, args] each), sent at once (a few KB: the
        pipe takes them without blocking) and answered in turn: the value or the exception :meth:`call` would
        raise, and whether the name was the program's (as the lookup before a call would have counted it);
        once the channel breaks, that fault for the rest (reached when the name is in ``known``, the names whose
        lookup the program answered before, as one call after the other would give; this run's answered ones
        are added). Each is yielded as soon as its answer is read."""
        done = 0
        try:
            if self.greeting() or self.broken:
                raise ProgramFault(self.broken or self.greeting())
            first = self.count + 1
            lines = []
            for name, args in calls:
                self.count += 1
                lines.append(json.dumps({"op": "call", "name": name, "args": [to_wire(a) for a in args],
                                         "kwargs": {}, "n": self.count}) + "\n")
            try:
                write_all(self.request_fd, "".join(lines).encode())
            except OSError:
                self.broken = "the program process ended (it exited or was killed)"
                raise ProgramFault(self.broken) from None
            for k, (name, _) in enumerate(calls):
                try:
                    reply = self._receive()
                    if reply.get("n") != first + k:
                        self.broken = "the program process answered out of turn"
                        raise ProgramFault(self.broken)
                except ProgramFault as exc:  # it broke on this call: the lookup before it had been answered
                    done += 1
                    yield exc, True
                    raise
                if set(reply) == {"n", "module"} and type(reply["module"]) is str:
                    done += 1
                    yield _Module(reply["module"]), False  # (the lookup: the tests' own import of it)
                    continue
                try:
                    outcome = (self._answer(name, reply), True)
                except ProgramFault as exc:  # no such name, or an answer that is no plain data
                    outcome = (exc, set(reply) != {"n", "missing"})
                except Exception as exc:  # noqa: BLE001 - the program's exception, raised here as a test sees it
                    outcome = (exc, True)
                if outcome[1]:
                    known.add(name)
                done += 1
                yield outcome
        except ProgramFault as exc:
            for name, _ in calls[done:]:
                yield exc, name in known

    def value(self, reply: dict):
        if set(reply) == {"n", "unsendable"} and type(reply["unsendable"]) is str:
            raise ProgramFault(f"the program's answer is not plain JSON data ({reply['unsendable'][:200]})")
        if set(reply) != {"n", "value"}:
            raise ProgramFault("the program process sent a malformed answer")
        try:
            value = from_wire(reply["value"])
        except BaseException as exc:
            raise ProgramFault(f"the program's answer is not plain JSON data ({describe_exception(exc)[:200]})") from None
        self.answers += 1
        return value

    def call(self, name: str, args: tuple, kwargs: dict):
        try:
            request = {"op": "call", "name": name, "args": [to_wire(a) for a in args],
                       "kwargs": {k: to_wire(v) for k, v in kwargs.items()}}
        except (TypeError, ValueError) as exc:
            raise ProgramFault(f"the tests passed {name}() an argument that is not plain data ({exc})") from None
        return self._answer(name, self.ask(request))

    def _answer(self, name: str, reply: dict):
        """A call's answer: its value, or the program's exception raised here."""
        if set(reply) == {"n", "missing"}:
            raise ProgramFault(f"name {name!r} is not defined by the program")
        if set(reply) == {"n", "error", "type"} and type(reply["error"]) is str:
            self.answers += 1
            raise _exception_for(reply["type"], reply["error"][:400])
        return self.value(reply)


def _proxy(link: _ProgramLink, name: str):
    """A function of the test process standing for the program's ``name``: JSON arguments out, a JSON value back."""
    def call(*args, **kwargs):
        return link.call(name, args, kwargs)
    call.__name__ = call.__qualname__ = name
    return call


class _TestGlobals(dict):
    """The tests' namespace. A name neither the tests nor the set-up code defines, and no builtin, is looked up
    in the program process: a function there becomes a proxy, plain data comes back as a copy, a module is
    the test process's own import of it. Builtins come first, so a program's ``abs = ...`` or ``isinstance =
    ...`` never reaches the tests."""

    def __init__(self, link: _ProgramLink, builtins_module, forced: tuple = ()):
        super().__init__(__name__="__main__", __builtins__=builtins_module)
        self._link, self._builtins = link, builtins_module
        self._forced = frozenset(forced)  # the entry point: the program's even when a builtin has its name
        # The program's functions, once it confirmed them; kept out of the dict itself, so that every lookup
        # comes here and counts as reaching the program (``assert callable(f)`` does, ``assert True or f``
        # does not).
        self._proxies: dict = {}

    @property
    def answered(self) -> set:
        """The names whose lookup the program answered as a function (their proxies; the set is a copy)."""
        return set(self._proxies)

    def programs(self, name: str) -> bool:
        """Whether a lookup of ``name`` now goes to the program (no name of the tests' own, no builtin)."""
        return not dict.__contains__(self, name) and (name in self._forced or not hasattr(self._builtins, name))

    def __missing__(self, name):
        proxy = self._proxies.get(name)
        if proxy is not None:
            self._link.answers += 1
            return proxy
        if name not in self._forced and hasattr(self._builtins, name):
            raise KeyError(name)
        reply = self._link.ask({"op": "get", "name": name})
        if set(reply) == {"n", "missing"}:
            # not NameError: a test's ``except Exception`` (expecting the program to raise) must not take it
            raise ProgramFault(f"name {name!r} is not defined by the program")
        if set(reply) == {"n", "callable"} and reply["callable"] is True:
            self._link.answers += 1
            proxy = self._proxies[name] = _proxy(self._link, name)
            return proxy
        if set(reply) == {"n", "module"} and type(reply["module"]) is str:
            return self.bind_module(name, reply["module"])
        return self._link.value(reply)

    def bind_module(self, name: str, module: str):
        """A module the program imported (tests that lean on its ``import math``): the test process's own copy
        of it, from the read-only installation, never the program's object, bound to ``name`` here."""
        if not all(part.isidentifier() for part in module.split(".")):
            raise ProgramFault("the program process sent a malformed module name")
        import importlib
        try:
            value = importlib.import_module(module)
        except ImportError:
            raise ProgramFault(f"the program's module {module[:100]!r} cannot be imported by the tests") from None
        self[name] = value
        return value


def tests_harness(req: dict, report_fd: int, request_fd: int, reply_fd: int) -> None:
    """Run the set-up code, then each step against the program process; one JSON line per step on
    ``report_fd``, which the program process has no way to reach. Never returns."""
    import builtins

    def emit(obj) -> None:
        write_all(report_fd, (json.dumps(obj) + "\n").encode())

    link = _ProgramLink(request_fd, reply_fd, int(req["max_report_kb"]) * 1024)
    entry = req.get("entry_point")
    namespace = _TestGlobals(link, builtins, (entry,) if entry else ())
    emit({"setup_ok": True})
    if req.get("setup"):
        try:
            exec(compile(req["setup"], "<setup_code>", "exec", dont_inherit=True), namespace)
        except BaseException as exc:
            emit({"setup_error": describe_exception(exc)})
            finish_and_exit()
    for name in req.get("program_names", ()):  # the set-up's stubs (and the entry point) are the program's
        namespace.pop(name, None)
    problem = link.greeting()
    emit({"program_error": problem} if problem else {"program_ok": True})
    if problem:
        finish_and_exit()
    steps = req["steps"]
    i = 0
    while i < len(steps):
        batch = _call_run(steps, i, namespace)
        if len(batch) > 1:  # calls of the program's functions with literal arguments: sent at once
            calls = [steps[j]["call"] for j in batch]
            for k, (answer, reached) in enumerate(link.call_many(calls, namespace.answered)):
                try:
                    if isinstance(answer, _Module):  # called here, as the step's own evaluation would
                        namespace.bind_module(steps[i + k]["call"][0], answer)(*steps[i + k]["call"][1])
                    if isinstance(answer, BaseException):
                        raise answer
                    report = {"i": i + k, "value": to_wire(answer)}
                except BaseException as exc:
                    report = {"i": i + k, "error": describe_exception(exc)}
                report["used"] = reached
                emit(report)
            i += len(batch)
            continue
        step = steps[i]
        answers = link.answers
        try:
            if step["kind"] == "exec":
                exec(compile(step["src"], f"<test {i}>", "exec", dont_inherit=True), namespace)
                value = None
            elif step["kind"] == "eval":
                value = eval(compile(step["src"], f"<test {i}>", "eval", dont_inherit=True), namespace)
            else:  # call
                value = link.call(step["entry"], tuple(step["args"]), {})
            report = {"i": i, "value": to_wire(value)}
        except BaseException as exc:
            report = {"i": i, "error": describe_exception(exc)}
        report["used"] = link.answers > answers  # whether the step reached the program at all
        emit(report)
        i += 1
    finish_and_exit()


def _call_run(steps: list, i: int, namespace: _TestGlobals, most: int = 64, most_bytes: int = 16384) -> list:
    """The indices of the steps from ``i`` on that are each a call of one of the program's functions with
    plain-data arguments (the host marked them ``call``; the name is neither the tests' own now nor a builtin),
    at most ``most`` of them and about ``most_bytes`` of requests, so that all of them fit in the pipe."""
    run, size = [], 0
    for j in range(i, min(len(steps), i + most)):
        call = steps[j].get("call") if steps[j]["kind"] == "eval" else None
        if not (type(call) is list and len(call) == 2 and type(call[0]) is str and type(call[1]) is list
                and namespace.programs(call[0])):
            break
        size += 64 + len(json.dumps(call[1]))
        if run and size > most_bytes:
            break
        run.append(j)
    return run
