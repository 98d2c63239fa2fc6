"""``python -m dsh_jupyter.cli``: the ``dsh-jupyter`` command."""

import sys

from . import main

sys.exit(main())
