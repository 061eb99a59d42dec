"""`python -m tests.fuzz --frames N --seed S`: see tests/fuzz/runner.py."""

import sys

from tests.fuzz.runner import main

sys.exit(main())
