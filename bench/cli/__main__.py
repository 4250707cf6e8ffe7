"""`python -m bench.cli ...`: the same entry point as the `podbench` console script."""
import sys

from bench.cli import main

sys.exit(main())
