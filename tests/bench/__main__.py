import sys

from tests.bench.cli import main

sys.exit(main())
