"""``python -m spectheory`` is the ``spectheory`` command."""

import sys

from spectheory_cli import main

sys.exit(main())
