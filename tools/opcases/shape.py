"""Shape ops: reshape/view, flatten, transpose/permute, squeeze/unsqueeze, slice/select,
expand/repeat, contiguous, dtype casts.

Most cases use batch 2 so that a dim param is checked against batch > 1; the reshape cases
with a hard-coded batch are traced at batch 1 on purpose (see kuiper_core/layers/shape.py).
"""

import torch
import torch.nn as nn

from opcases._common import Fn


def case(fn, *shapes):
    return lambda: (Fn(fn), [torch.randn(*s) for s in shapes])


def dynamic(fn, shapes, shapes2):
    """Like case(), converted with a second input shape set (pnnx inputshape2): shapes stay
    symbolic, so size-dependent ops (torch.zeros(x.size(0), 3), x[:, :y.size(1)]) are kept
    as operators fed by size expressions instead of being folded into constants."""
    return lambda: (Fn(fn), [torch.randn(*s) for s in shapes], {"inputshape2": shapes2})


def cli(factory):
    """A case whose generated *_pnnx.py pnnx cannot run itself (e.g. it prints p=inf or
    unbiased=0): convert through the CLI, without operand references."""
    return lambda: (*factory(), {"optlevel": 2, "capture_operands": False})


class SetSlices(nn.Module):
    """YOLOv5's Detect decodes boxes by writing into slices of a tensor: pnnx writes
    Tensor.slice_copy (optlevel 2) or Tensor.copy of a slice view (optlevel 0/1)."""

    def forward(self, x):
        y = x.sigmoid()
        y[..., 0:2] = y[..., 0:2] * 2 + 1
        y[..., 2:4] = (y[..., 2:4] * 2) ** 2
        return y


class SetSelect(nn.Module):
    """`y[:, 1] = 0.5` (Tensor.fill of a select view) and a multi-axis slice assignment."""

    def forward(self, x):
        y = x * 2
        y[:, 1] = 0.5
        y[0, :, 1:3] = x[0, :, 0:2] + 1
        return y + 1


class ViewHead(nn.Module):
    """A classifier head that hard-codes the traced batch: x.view(1, -1) like old exports."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        return self.fc(torch.relu(x).view(1, 36))


class FlattenModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.flat = nn.Flatten()
        self.flat2 = nn.Flatten(0, 1)

    def forward(self, x):
        return self.flat(x), self.flat2(x)


CASES = {
    # reshape / view (float math around them keeps pnnx from folding the op away)
    "shape_reshape": case(lambda x: x.reshape(2, 3, -1) * 2, (2, 3, 4, 5)),
    "shape_reshape_batchdim": case(lambda x: (x * 2).reshape(x.size(0), -1), (2, 3, 4, 5)),
    "shape_view": case(lambda x: (x + 1).view(2, 12, 5), (2, 3, 4, 5)),
    "shape_view_minus1": case(lambda x: (x + 1).view(-1, 5), (2, 3, 4, 5)),
    "shape_view_batch1": lambda: (ViewHead(), [torch.randn(1, 4, 3, 3)]),
    "shape_view_batch1_flat": case(lambda x: (x * 2).view(1, -1), (1, 4, 3, 3)),
    "shape_reshape_as": case(lambda x, y: (x * 2).reshape_as(y) + y, (2, 3, 4), (2, 12)),
    # x.view_as(y): pnnx 20261020 leaves it as aten::view_as (not converted).
    "shape_unflatten": case(lambda x: torch.unflatten(x * 2, 1, (3, 4)), (2, 12, 5)),
    "shape_dyn_reshape": dynamic(lambda x: (x * 2).reshape(x.size(0), -1, 1), [(2, 3, 4)], [(5, 3, 4)]),
    # flatten
    "shape_flatten": case(lambda x: torch.flatten(x, 1) * 2, (2, 3, 4, 5)),
    "shape_flatten_mid": case(lambda x: torch.flatten(x, 1, 2) * 2, (2, 3, 4, 5)),
    "shape_flatten_all": case(lambda x: torch.flatten(x) * 2, (2, 3, 4)),
    "shape_nn_flatten": lambda: (FlattenModule(), [torch.randn(2, 3, 4, 5)]),
    # transpose / permute
    "shape_transpose": case(lambda x: torch.transpose(x, 1, 2) * 2, (2, 3, 4, 5)),
    "shape_transpose_neg": case(lambda x: x.transpose(-1, -2) * 2, (2, 3, 4, 5)),
    "shape_permute_torch": case(lambda x: torch.permute(x, (0, 2, 3, 1)) * 2, (2, 3, 4, 5)),
    "shape_permute_method": case(lambda x: x.permute(3, 0, 2, 1) * 2, (2, 3, 4, 5)),
    # squeeze / unsqueeze
    "shape_squeeze_all": case(lambda x: torch.squeeze(x * 2), (2, 1, 4, 1)),
    "shape_squeeze_dim": case(lambda x: torch.squeeze(x * 2, 1), (2, 1, 4, 1)),
    "shape_squeeze_neg": case(lambda x: (x * 2).squeeze(-1), (2, 1, 4, 1)),
    "shape_squeeze_tuple": case(lambda x: torch.squeeze(x * 2, (1, 3)), (2, 1, 4, 1)),
    "shape_squeeze_noop": case(lambda x: torch.squeeze(x * 2, 2), (2, 1, 4, 1)),
    "shape_unsqueeze": case(lambda x: torch.unsqueeze(x * 2, 1), (2, 3, 4)),
    "shape_unsqueeze_neg": case(lambda x: (x * 2).unsqueeze(-1), (2, 3, 4)),
    # slice / select
    "shape_slice": case(lambda x: x[:, 1:3] * 2, (2, 5, 4)),
    "shape_slice_multi": case(lambda x: x[:, 1:, ::2, -3:-1] * 2, (2, 4, 6, 5)),
    "shape_slice_step": case(lambda x: x[..., 1::3] * 2, (2, 3, 10)),
    "shape_slice_neg": case(lambda x: x[:, -2:] * 2, (2, 5, 4)),
    "shape_slice_end_only": case(lambda x: x[:, :2] * 2, (2, 5, 4)),
    "shape_narrow": case(lambda x: torch.narrow(x, 2, 1, 2) * 2, (2, 3, 5)),
    "shape_select": case(lambda x: x[:, 0] * 2, (2, 3, 4)),
    "shape_select_neg": case(lambda x: x[:, :, -1] * 2, (2, 3, 4)),
    "shape_select_method": case(lambda x: x.select(2, 1) * 2, (2, 3, 4)),
    "shape_dyn_select": dynamic(lambda x, y: x[:, y.size(1) - 1] * 3, [(1, 4, 6), (2, 3)], [(1, 6, 6), (3, 2)]),
    "shape_select_slice": case(lambda x: x[:, 1, 1:3] * 2, (2, 3, 4)),
    "shape_select_slice_multi": case(lambda x: x[:, 1, ::2, 2] * 2, (2, 3, 6, 4)),
    "shape_slice_ellipsis": case(lambda x: x[..., 1:3, 0] * 2, (2, 3, 6, 4)),
    "shape_dyn_slice_end": dynamic(lambda x, y: x[:, : y.size(1)] * 2, [(2, 5), (2, 3)], [(3, 5), (3, 2)]),
    # expand / repeat
    "shape_expand": case(lambda x: x.expand(2, 3, 4) * 2, (2, 1, 4)),
    "shape_expand_minus1": case(lambda x: (x * 2).expand(-1, 3, -1), (2, 1, 4)),
    "shape_expand_newdim": case(lambda x: (x * 2).expand(5, 2, 3, 4), (2, 3, 4)),
    "shape_dyn_expand": dynamic(
        lambda x, y: (x * 2).expand(y.size(0), -1, -1), [(1, 3, 4), (2, 3)], [(1, 3, 4), (5, 3)]
    ),
    "shape_expand_as": case(lambda x, y: (x * 2).expand_as(y) + y, (2, 1, 4), (2, 3, 4)),
    "shape_repeat": case(lambda x: x.repeat(1, 2, 3) * 2, (2, 3, 4)),
    "shape_repeat_newdim": case(lambda x: (x * 2).repeat(2, 1, 1, 2), (2, 3, 4)),
    # contiguous / dtype casts
    "shape_contiguous": case(lambda x: x.transpose(1, 2).contiguous() * 2, (2, 3, 4)),
    "shape_to_int": case(lambda x: (x * 3).to(torch.int64) * 2, (2, 3, 4)),
    "shape_to_double": case(lambda x: (x * 3).to(torch.float64) * 2, (2, 3, 4)),
    "shape_to_roundtrip": case(lambda x: (x * 3).to(torch.int32).to(torch.float32) + 0.5, (2, 3, 4)),
    "shape_type_as": case(lambda x, y: (x * 3).long().type_as(y) + y, (2, 3, 4), (2, 3, 4)),
    "shape_float": case(lambda x: (x * 3).long().float() + 1, (2, 3, 4)),
    # writes into slices (functional in pnnx: the output is a new tensor). pnnx's generated
    # Python writes in place, so its operands seen at the end are not what each operator
    # made: no operand references
    "shape_setitem_slices": lambda: (SetSlices(), [torch.randn(1, 3, 4, 4, 6)], {"capture_operands": False}),
    "shape_setitem_select_fill": lambda: (SetSelect(), [torch.randn(2, 3, 5)], {"capture_operands": False}),
}
