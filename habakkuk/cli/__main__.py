"""`python -m habakkuk.cli ARGS`: the same as the installed `habakkuk ARGS`."""

import sys

from habakkuk.cli.entry import main

sys.exit(main())
