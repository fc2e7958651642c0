"""``python -m finegemm.bench [options]``: the same as ``python -m finegemm bench``."""

import sys

from .cli import main, parser

if __name__ == "__main__":
    sys.exit(main(parser().parse_args()))
