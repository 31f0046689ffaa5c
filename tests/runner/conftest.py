"""Helpers for the runner tests: ray_cluster.py (a local Ray cluster) lies beside this file."""

from __future__ import annotations

import sys
from pathlib import Path

# ray_cluster is a helper module beside this file, not an installed package.
sys.path.insert(0, str(Path(__file__).parent))
