"""``python -m dsh_jupyter.cli``: the ``dsh-jupyter`` command."""

import sys

from . import main

if __name__ == "__main__":  # importing the module (pkgutil walks, documentation tools) runs nothing
    sys.exit(main())
