"""The TensorBoard logger must not import torch into a run that does not use it (tabular algorithms):
tensorboardX's writer would, for type annotations only, and that import was most of such a run's
start-up. torch stays importable afterwards."""

import subprocess
import sys

SCRIPT = """
import sys
from rlf.logging.loggers import _tensorboardx
writer = _tensorboardx().SummaryWriter
assert "torch" not in sys.modules, "tensorboardX pulled in torch"
import torch  # what a neural plugin does later in the same process
assert isinstance(torch.zeros(1), torch.Tensor)
print("ok")
"""


def test_tensorboardx_is_imported_without_torch_and_torch_still_imports_later():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
