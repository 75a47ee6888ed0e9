"""``python -m tests.reliability`` (from the checkout's root): see ``longrun``."""

import sys

from tests.reliability.longrun import main

sys.exit(main())
