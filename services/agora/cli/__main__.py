"""`python -m agora.cli`: the `agora` command line."""

import sys

from agora.cli.parser import main

sys.exit(main())
