"""What ``./seedbed setup`` shows of pip's messages: pip's "dependency conflicts" note about the packages that
pyproject.toml's ``[tool.seedbed]`` installs without their dependencies on purpose (``no-deps``, ``extras-no-deps``)
is replaced by one plain line; every other line, a conflict of any other package included, is shown as pip wrote it.

    python -m workers.pip_notes STDERR_FILE      # prints the filtered text to stderr
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

__all__ = ["without_deps", "filtered"]

HEADER = "ERROR: pip's dependency resolver does not currently take into account"
CONFLICT = re.compile(r"^(\S+) \S+ (requires|has requirement) ")


def without_deps(pyproject: Path) -> set[str]:
    """The distributions installed with --no-deps, lower-cased names."""
    conf = tomllib.loads(pyproject.read_text())["tool"]["seedbed"]
    return {re.split(r"[=<>!~ \[]", spec)[0].lower() for spec in conf["no-deps"] + conf["extras-no-deps"]}


def filtered(text: str, bare: set[str]) -> str:
    """``text`` (pip's stderr) with the conflict lines of ``bare`` packages left out, and pip's header line too
    when no other package's conflict remains; one line says what was left out.

    >>> print(filtered("WARNING: x\\n" + HEADER + " all ...\\nifb 1 requires absl-py, which is not installed.",
    ...                {"ifb"}))
    WARNING: x
    (pip's note that ifb's own dependencies are not installed is left out: [tool.seedbed] in pyproject.toml installs it without them on purpose)
    """
    lines = text.splitlines()
    ours = [line for line in lines if (m := CONFLICT.match(line)) and m[1].lower() in bare]
    others = [line for line in lines if CONFLICT.match(line) and line not in ours]
    kept = [line for line in lines if line not in ours and (others or not line.startswith(HEADER))]
    if ours:
        names = sorted({CONFLICT.match(line)[1] for line in ours})
        kept.append(f"(pip's note that {', '.join(names)}'s own dependencies are not installed is left out: "
                    f"[tool.seedbed] in pyproject.toml installs {'it' if len(names) == 1 else 'them'} without them "
                    "on purpose)")
    return "\n".join(kept)


def main(argv: list[str]) -> int:
    text = Path(argv[0]).read_text(errors="replace")
    out = filtered(text, without_deps(Path(__file__).resolve().parent.parent / "pyproject.toml"))
    if out:
        print(out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
