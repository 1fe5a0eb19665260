"""The sandbox's seccomp filter, classic BPF assembled by hand, and the prctl calls that attach it
(docs/architecture.md#verifiers). Standard library only: it runs inside the fork server."""
from __future__ import annotations

import ctypes
import errno
import os
import struct

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, _PR_SET_SECCOMP = 1, 4, 22
PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 36, 38
_SECCOMP_MODE_FILTER = 2
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_AF_UNIX = 1
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_NEW_MASK = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

# Syscall numbers per architecture (Linux uapi unistd tables). System V shared memory, semaphores and message
# queues and POSIX message queues are refused at creation: they outlive their processes in the server's IPC
# namespace (one for all its runs), so a program could otherwise leave bytes for a later run's program to read.
ARCHES = {
    "x86_64": {
        "audit_arch": 0xC000003E, "x32_bit": 0x40000000,
        "socket": (41, 53),  # socket, socketpair: allowed for AF_UNIX only
        "clone": 56, "clone3": 435,
        "deny": {
            "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "unshare": 272, "setns": 308,
            "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "keyctl": 250, "add_key": 248,
            "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246,
            "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
            "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "iopl": 172, "ioperm": 173,
            "execve": 59, "execveat": 322, "open_by_handle_at": 304, "name_to_handle_at": 303,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
            "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
            "mount_setattr": 442, "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240,
        },
    },
    "aarch64": {
        "audit_arch": 0xC00000B7, "x32_bit": None,
        "socket": (198, 199),
        "clone": 220, "clone3": 435,
        "deny": {
            "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "unshare": 97, "setns": 268,
            "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "keyctl": 219, "add_key": 217,
            "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "kexec_load": 104,
            "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
            "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "execve": 221, "execveat": 281,
            "open_by_handle_at": 265, "name_to_handle_at": 264, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
            "fsmount": 432, "fspick": 433, "mount_setattr": 442, "msgget": 186, "semget": 190, "shmget": 194,
            "mq_open": 180,
        },
    },
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def build_seccomp_filter(machine: str) -> bytes:
    """The filter program for ``machine`` (``os.uname().machine``), as packed ``struct sock_filter``s.

    Denied calls fail with an errno (EACCES for sockets, ENOSYS for clone3 so libc falls back to clone,
    EPERM otherwise) rather than killing, so the program sees an ordinary error; a foreign ABI (i386 or
    x32 calls on x86_64) kills the process outright.
    """
    arch = ARCHES[machine]
    prog = [_insn(_LD_W_ABS, 0, 0, 4),                                   # A = seccomp_data.arch
            _insn(_JEQ_K, 1, 0, arch["audit_arch"]),
            _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
            _insn(_LD_W_ABS, 0, 0, 0)]                                   # A = seccomp_data.nr
    if arch["x32_bit"]:
        prog += [_insn(_JGE_K, 0, 1, arch["x32_bit"]), _insn(_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for nr in arch["socket"]:
        # if nr matches: A = low 32 bits of args[0] (the domain); AF_UNIX is allowed, anything else EACCES
        prog += [_insn(_JEQ_K, 0, 4, nr), _insn(_LD_W_ABS, 0, 0, 16), _insn(_JEQ_K, 0, 1, _AF_UNIX),
                 _insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EACCES)]
    prog += [_insn(_JEQ_K, 0, 4, arch["clone"]), _insn(_LD_W_ABS, 0, 0, 16),   # clone flags
             _insn(_JSET_K, 0, 1, _CLONE_NEW_MASK), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
             _insn(_RET_K, 0, 0, _RET_ALLOW)]
    prog += [_insn(_JEQ_K, 0, 1, arch["clone3"]), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for nr in sorted(set(arch["deny"].values())):
        prog += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    if LIBC.prctl(option, arg, arg3, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


class SeccompFilter:
    """A filter program made ready once (the server forks two children a run: each only attaches it)."""

    def __init__(self, program: bytes):
        self._buf = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buf))
        self.address = ctypes.addressof(self._fprog)

    def install(self) -> None:
        """no_new_privs, then the filter. Irreversible for this process and its descendants."""
        prctl(_PR_SET_NO_NEW_PRIVS, 1)
        prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self.address)


def install_seccomp(program: bytes) -> None:
    """no_new_privs, then the filter. Irreversible for this process and its descendants."""
    SeccompFilter(program).install()
