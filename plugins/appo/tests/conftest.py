import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# Nothing outside this machine is reachable from the tests; a private Ray instance reports nothing.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
