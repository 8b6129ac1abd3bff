"""``python -m edgesched.data``: list, fetch and check the real public data."""

import sys

from .cli import main

sys.exit(main())
