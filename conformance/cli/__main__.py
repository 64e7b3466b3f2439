"""``python -m conformance.cli``: the ``torch-conformance`` command."""

import sys

from conformance.cli.main import main

sys.exit(main())
