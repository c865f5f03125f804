"""`python -m planc`: the command line, from its entry point (`planc.cli.main`, whose
docstring says what it does first and why)."""

import sys

from planc.cli import main

sys.exit(main())
