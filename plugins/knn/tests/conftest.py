import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

# Several test runs share a small machine; one thread each avoids oversubscription, which made
# these small networks tens of times slower.
torch.set_num_threads(1)
