"""``python -m tests.differential`` (from the checkout's root): see ``command``."""

import sys

from tests.differential.command import main

sys.exit(main())
