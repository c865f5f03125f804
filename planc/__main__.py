import sys

from planc.cli import main

sys.exit(main())
