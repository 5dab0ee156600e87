"""``python -m paper_figs [options]`` is ``spectheory figs [options]``."""

import sys

from spectheory.cli import main

sys.exit(main(["figs", *sys.argv[1:]]))
