"""The torch plugins share one network toolkit (rlf.nn): none of them decides on its own what an image
is, builds its own convolution stack or sets torch's thread count. Checked on the sources, so a new
plugin is held to it too (the toolkit's behaviour is tested in tests/integration/test_nn_toolkit.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "plugins").glob("*/src/**/*.py"))
FORBIDDEN = {
    "set_num_threads": "set torch threads with rlf.nn.set_threads or rlf.nn.TorchThreads",
    "Conv2d(": "build convolutions with rlf.nn.nature_cnn or rlf.nn.conv_stack",
    "MIN_IMAGE_SIDE =": "decide what an image is with rlf.nn.image_layout",
    "one_hot(obs": "encode observations with rlf.nn.ObservationEncoder",
}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "plugins")))
def test_plugins_use_the_shared_network_toolkit(path):
    text = path.read_text()
    for needle, instead in FORBIDDEN.items():
        assert needle not in text, f"{path.relative_to(ROOT)} uses {needle!r}: {instead}"
    # an MLP is a loop of Linear layers with activations between: rlf.nn.mlp
    assert not re.search(r"for .+:\n\s+layers \+= \[nn\.Linear", text), f"{path.relative_to(ROOT)}: use rlf.nn.mlp"
