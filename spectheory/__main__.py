"""``python -m spectheory`` is the ``spectheory`` command."""

import sys

from spectheory.cli import main

sys.exit(main())
