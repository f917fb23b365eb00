"""layers/_index.py (which module registers which layer type) matches the registrations, and
loading a model imports only the layer modules it uses."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT
from kuiper_core.layers._index import MODULE_OF
from kuiper_core.layers.registry import module_index


def test_index_matches_the_registrations() -> None:
    actual = module_index()
    stale = {t: (MODULE_OF.get(t), m) for t, m in actual.items() if MODULE_OF.get(t) != m}
    gone = sorted(set(MODULE_OF) - set(actual))
    assert not stale and not gone, (
        f"kuiper_core/layers/_index.py is stale (type: (index, actual)) {stale}, gone {gone}: "
        "run `python -m kuiper_core.layers.registry`"
    )


def test_loading_a_model_imports_only_its_layer_modules() -> None:
    code = (
        "import sys, kuiper_core\n"
        "kuiper_core.load('sample_models/digits_cnn.pnnx.param')\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('kuiper_core.layers.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    loaded = set(eval(out))
    assert {"conv", "linear", "pool", "activation"} <= loaded
    assert not loaded & {"attention", "recurrent", "resize", "aten"}, loaded
