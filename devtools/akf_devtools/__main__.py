"""``python -m akf_devtools``: the ``akf-dev`` command."""

from __future__ import annotations

import sys

from akf_devtools.cli import main

sys.exit(main())
