"""``python -m asynciocomm_bench``, the same as ``asynciocomm-bench``."""

import sys

from asynciocomm_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
