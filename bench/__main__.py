"""Allow ``python -m bench``."""

import sys

from asynciocomm_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
