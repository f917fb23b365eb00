"""A snippet a user copies to make a reference .npz from their own PyTorch model.

It registers a forward hook on every leaf module and saves each output keyed by the module's
path (`layer1.0.conv1`, `fc`; `lstm:0`, `lstm:1`… for a module returning a tuple; `relu#2`
for a module's second call: pnnx names the first call after the module) and the model's
outputs as out0, out1, …: the keys kuiper compare / the app's Forward page read
(kuiper_core.explore.compare.key_operand). For a TorchScript model converted by pnnx the
operator names are these module paths; for every model the outN keys match.
"""

from __future__ import annotations

SNIPPET = '''\\
import numpy as np
import torch


def save_references(model, inputs, path="references.npz"):
    """Run `model` on `inputs` (a list of tensors), saving every leaf module's output keyed by
    its module path (as forward hooks see it) and the outputs as out0, out1, ... in `path`."""
    saved = {}

    def flat(value):
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (tuple, list)):
            return [t for v in value for t in flat(v)]
        return []

    def array(t):
        # a copy now: an in-place module run later (ReLU(inplace=True)) would change the tensor
        return t.detach().cpu().clone().numpy()

    calls = {}

    def keep(name):
        def hook(module, args, output):
            # a module called again (one ReLU used twice) keeps each call: name, name#2, ...
            calls[name] = calls.get(name, 0) + 1
            key = name if calls[name] == 1 else f"{name}#{calls[name]}"
            tensors = flat(output)
            if len(tensors) == 1 and isinstance(output, torch.Tensor):
                saved[key] = array(tensors[0])
            else:
                for i, t in enumerate(tensors):
                    saved[f"{key}:{i}"] = array(t)

        return hook

    # leaf modules only: a container's output is its last child's
    leaves = [(n, m) for n, m in model.named_modules() if n and not any(True for _ in m.children())]
    handles = [m.register_forward_hook(keep(n)) for n, m in leaves]
    try:
        with torch.no_grad():
            result = model.eval()(*inputs)
    finally:
        for h in handles:
            h.remove()
    for i, y in enumerate(flat(result)):
        saved[f"out{i}"] = array(y)
    np.savez(path, **saved)
    return sorted(saved)


# e.g.: save_references(model, [torch.from_numpy(np.load("input.npy"))])
'''


def hook_snippet(input_path: str = "input.npy") -> str:
    """The snippet's text, its example line reading `input_path`."""
    return SNIPPET.replace('np.load("input.npy")', f"np.load({input_path!r})")
