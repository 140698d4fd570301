"""``python -m rackplan``: the same as the ``rackplan`` command."""

import sys

from rackplan.cli import main

sys.exit(main())
