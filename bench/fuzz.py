"""`python -m bench.fuzz`: the long fuzz runs (tests/support/fuzz.py holds the generators and
says what each mode does; tests/test_fuzz.py runs them on a small budget).

    python -m bench.fuzz --inputs 1000000 [--seed 1]      # a long run against a fresh server
    python -m bench.fuzz --port 9092 --inputs 10000       # against a running server
    python -m bench.fuzz --decode-only --inputs 1000000   # the request decoder alone, in-process
    python -m bench.fuzz --hypothesis --inputs 1000000    # hypothesis drives the decoder
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (run as a script too)

from tests.support.fuzz import main  # noqa: E402

if __name__ == "__main__":
    main()
