"""Start the fork server: ``python -I -S <this folder> UID GID TESTS_UID TESTS_GID MODE [TMP_MB [CGROUP]]`` (training/verifiers/sandbox.py
does, with this folder bound read-only inside bubblewrap). Isolated mode puts nothing of the environment on
``sys.path`` and ``-S`` no site-packages (no ``.pth`` file runs here; programs import the standard library only); Python puts this folder first, which is taken off again: the folder is loaded as the package
``sandbox_server`` by its path, so its modules import each other relatively and nothing else is looked up
outside the standard library. See docs/architecture.md#verifiers."""
import importlib.util
import os
import sys


def _load_main():
    """The server's ``main``, from this folder loaded as the package ``sandbox_server``."""
    if __package__:  # python -m training.verifiers.sandbox_server
        from .server import main
        return main
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == here:
        del sys.path[0]
    spec = importlib.util.spec_from_file_location("sandbox_server", os.path.join(here, "__init__.py"),
                                                  submodule_search_locations=[here])
    package = importlib.util.module_from_spec(spec)
    sys.modules["sandbox_server"] = package
    spec.loader.exec_module(package)
    return package.main


if __name__ == "__main__":  # (imported, e.g. by the doctest walk over training/, it does nothing)
    _load_main()(sys.argv)
