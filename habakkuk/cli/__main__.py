"""`python -m habakkuk.cli ARGS`: the same as the installed `habakkuk ARGS`."""

import sys

from habakkuk.cli.entry import main

if __name__ == "__main__":  # imported (the Textual canary reads every module), it runs nothing
    sys.exit(main())
