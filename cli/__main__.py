from __future__ import annotations

import sys

from testcurator.cli.main import main

sys.exit(main())
