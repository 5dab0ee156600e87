"""``python -m cli`` is the ``spectheory`` command."""

import sys

from cli import main

sys.exit(main())
