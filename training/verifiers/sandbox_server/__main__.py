"""Start the fork server: ``python -I <this folder> UID GID MODE [TMP_MB]`` (training/verifiers/sandbox.py
does, with this folder bound read-only inside bubblewrap). Isolated mode puts nothing of the environment on
``sys.path``; Python puts this folder first, which is taken off again: the folder is loaded as the package
``sandbox_server`` by its path, so its modules import each other relatively and nothing else is looked up
outside the standard library. See docs/architecture.md#verifiers."""
import importlib.util
import os
import sys

if __package__:  # python -m training.verifiers.sandbox_server
    from .server import main
else:
    _HERE = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _HERE:
        del sys.path[0]
    _spec = importlib.util.spec_from_file_location("sandbox_server", os.path.join(_HERE, "__init__.py"),
                                                   submodule_search_locations=[_HERE])
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["sandbox_server"] = _package
    _spec.loader.exec_module(_package)
    main = _package.main

main(sys.argv)
