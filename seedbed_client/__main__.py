"""``python -m seedbed_client COMMAND``: see the package docstring (``python -m seedbed_client --help``)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
