"""The network toolkit torch plugins build on (``networks``: the image rule, the observation encoder, MLP
and Nature CNN builders, torch's CPU threads), acting in numpy with a small MLP's own weights
(``numpy_mlp``), torch's lazy helpers (``torch_utils``) and running
observation statistics (``normalize``, numpy only).

Importing this package imports no torch: each name loads its module on first use."""

from rlf.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["image_layout", "ObservationEncoder", "MultiInputEncoder", "as_tensors", "init_orthogonal", "mask_logits", "mlp", "conv_stack", "flat_size",
                     "nature_cnn", "set_threads", "TorchThreads", "MIN_IMAGE_SIDE",
                     "MAX_IMAGE_CHANNELS", "DEFAULT_TORCH_THREADS", "NATURE_CONVS", "ConvLayer", "NetworkChoice"],
                   "networks"),
    "NumpyMLP": "numpy_mlp",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
