import sys
from pathlib import Path

from rlf.nn import set_threads

sys.path.insert(0, str(Path(__file__).parent))

# Several test runs share a small machine; one thread each avoids oversubscription, which made
# these small networks tens of times slower.
set_threads(1)
