"""What the passes need to know about operator types: which are pure, which are no-ops at
inference, which are convolutions, and how PNNX names them."""

from __future__ import annotations

from ..graph import Operator

IO_TYPES = frozenset({"pnnx.Input", "pnnx.Output"})

# Results differ between calls (or are uninitialised): never merged, never folded.
NONDETERMINISTIC = frozenset(
    {
        "torch.rand",
        "torch.randn",
        "torch.randint",
        "torch.rand_like",
        "torch.randn_like",
        "torch.randint_like",
        "torch.randperm",
        "torch.bernoulli",
        "torch.normal",
        "torch.multinomial",
        "torch.poisson",
        "torch.empty",
        "torch.empty_like",
        "Tensor.new_empty",
        "nn.RReLU",
        "F.rrelu",
    }
)

DROPOUT_TYPES = frozenset(
    {
        "nn.Dropout",
        "nn.Dropout2d",
        "nn.Dropout3d",
        "nn.AlphaDropout",
        "F.dropout",
        "F.dropoutnd",
        "F.dropout2d",
        "F.dropout3d",
        "F.alpha_dropout",
        "F.feature_alpha_dropout",
    }
)

CONV_TYPES = frozenset({"nn.Conv1d", "nn.Conv2d", "nn.Conv3d"})
CONV_TRANSPOSE_TYPES = frozenset({"nn.ConvTranspose1d", "nn.ConvTranspose2d", "nn.ConvTranspose3d"})
BATCHNORM_TYPES = frozenset({"nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d"})

RESHAPE_TYPES = frozenset({"Tensor.reshape", "Tensor.view"})
PERMUTE_TYPES = frozenset({"Tensor.permute", "torch.permute"})


def is_pure(op: Operator) -> bool:
    """Same inputs, same outputs, no side effect: safe to merge (CSE) and to precompute."""
    if op.type in IO_TYPES or op.type in NONDETERMINISTIC:
        return False
    # In-place methods (`Tensor.copy_`, `Tensor.index_put_`) write into an input.
    return not op.type.endswith("_")
