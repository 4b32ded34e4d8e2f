"""`python -m triton_iree`: the `triton-iree` command."""
import sys

from .cli import main

sys.exit(main())
