"""Indexing: gather, index_select, advanced indexing with index tensors (`x[:, idx]`),
flip, roll, cumulative sums and products, view_as."""

import torch

from opcases._common import Fn
from opcases.shape import case, dynamic


def _ids(fn, shape, index_shape, high):
    """A case with a float input and an int64 index input below `high`."""
    return lambda: (Fn(fn), [torch.randn(*shape), torch.randint(0, high, index_shape)])


CASES = {
    "index_gather": _ids(lambda x, i: torch.gather(x, 2, i) * 2, (2, 3, 5), (2, 3, 4), 5),
    "index_gather_method_smaller": _ids(lambda x, i: x.gather(1, i) * 2, (3, 4, 5), (2, 3, 5), 4),
    "index_gather_argmax": case(lambda x: torch.gather(x, -1, x.argmax(-1, keepdim=True)) + x, (2, 3, 4)),
    "index_select": _ids(lambda x, i: torch.index_select(x, 1, i) * 2, (2, 4, 3), (5,), 4),
    "index_select_method": _ids(lambda x, i: x.index_select(-1, i) * 2, (2, 3, 4), (3,), 4),
    "index_tensor_input": _ids(lambda x, i: x[:, i] * 2, (2, 5, 3), (2, 3), 5),
    "index_two_tensors": _ids(lambda x, i: x[i, :, i] * 2, (4, 3, 4), (3,), 4),
    "index_list_constant": case(lambda x: x[:, [3, 0, 0]] * 2, (2, 4, 3)),
    "index_flip": case(lambda x: torch.flip(x, [0, 2]) * 2, (2, 3, 4)),
    "index_flip_method": case(lambda x: x.flip(-1) + x, (2, 3, 4)),
    "index_roll": case(lambda x: torch.roll(x, (1, -2), (1, 2)) * 2, (2, 3, 4)),
    "index_roll_flat": case(lambda x: torch.roll(x, 5) * 2, (2, 3, 4)),
    "index_cumsum": case(lambda x: torch.cumsum(x, 1) * 2, (2, 3, 4)),
    "index_cumsum_int": case(lambda x: (x > 0).long().cumsum(-1) * 2, (2, 3, 4)),
    "index_cumprod": case(lambda x: torch.cumprod(x, dim=-1) * 2, (2, 3, 4)),
    "index_view_as_dynamic": dynamic(lambda x, y: (x * 2).view_as(y), [(2, 12), (2, 3, 4)], [(3, 12), (3, 3, 4)]),
}
