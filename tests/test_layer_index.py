"""layers/_index.py (which module registers which layer type) matches the registrations,
loading a model imports only the layer modules it uses, and every registered type is read in
some real pnnx export."""

from __future__ import annotations

import subprocess
import sys

from conftest import DATA, ROOT, SAMPLES
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


# Registered types that no real export under tests/data or sample_models contains, each with
# the reason it stays registered. A type some pnnx (this one, an older release, or its ONNX
# import) writes has an export (tools/opcases/coverage.py, tools/export_onnx_cases.py).
_REWRITTEN = (
    "pnnx 20261020 rewrites this ONNX operator to its torch form whether its arguments are "
    "constants, graph inputs or computed (tried); its ONNX import keeps any node it cannot "
    "match, so the layer runs the kept node with ONNX's semantics (tests/test_onnx_ops.py "
    "checks its .param line against onnxruntime)"
)
KNOWN_GAPS: dict[str, str] = {"Einsum": _REWRITTEN, "Range": _REWRITTEN, "Tile": _REWRITTEN, "Where": _REWRITTEN}


def _exported_types() -> set[str]:
    """The first token of every operator line of every .pnnx.param pnnx wrote for the tests."""
    found: set[str] = set()
    for path in [*DATA.rglob("*.pnnx.param"), *SAMPLES.glob("*.pnnx.param")]:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[2:]:
            if line.strip():
                found.add(line.split(None, 1)[0])
    return found


def test_every_registered_type_has_a_real_export() -> None:
    registered, exported = set(module_index()), _exported_types()
    missing = sorted(registered - exported - set(KNOWN_GAPS))
    assert not missing, (
        f"{len(missing)} registered type(s) appear in no real pnnx export: {missing}. Add a case that pnnx "
        "converts to it (tools/opcases/coverage.py), or remove the registration if no pnnx writes it"
    )
    stale = sorted(t for t in KNOWN_GAPS if t in exported or t not in registered)
    assert not stale, f"KNOWN_GAPS lists types that are exported now or no longer registered: {stale}"
