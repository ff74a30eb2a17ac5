"""The DRA tests import their object builders (dra_objects) by name."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
