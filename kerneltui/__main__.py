"""`python -m kerneltui`: the same as the `kerneltui` command."""

import sys

from kerneltui.cli import main

sys.exit(main())
