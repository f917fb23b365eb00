"""Export the operator test corpus: one tiny torch model per case, converted by real pnnx.

Each module in tools/opcases/ defines CASES: {case_name: factory}, where factory() returns
(torch module, [example input tensors]) or (module, inputs, export_module kwargs), e.g.
{"optlevel": 1} for layers that optlevel 2 removes, or {"pnnx": "20250530"} for a type only an
older pnnx release writes (tools/old_pnnx.py; a README.md in the case's folder says so). Every case lands in tests/data/ops/<case_name>/
as model.pnnx.param/.bin + inputs.npz + expected.npz (+ operands.npz), which
tests/test_ops.py runs through the engine and compares with PyTorch.

    python tools/export_opcases.py                 # all families, skip cases already exported
    python tools/export_opcases.py conv pool       # only these families (module names)
    python tools/export_opcases.py -k upsample -f  # cases whose name contains 'upsample', re-export
    python tools/export_opcases.py --optlevel 0 --out /tmp/o0   # every case at optlevel 0, elsewhere
    python tools/export_opcases.py --optlevel 0 --out tests/data/ops_o0 --cases tests/data/ops_o0/CASES.txt

Needs the `export` extra (torch==2.13.0 + pnnx).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from old_pnnx import converter, remake_note  # noqa: E402
from pnnx_export import export_module  # noqa: E402

OUT = ROOT / "tests" / "data" / "ops"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("families", nargs="*", help="opcases modules to export (default: all)")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("-f", "--force", action="store_true", help="re-export existing cases")
    ap.add_argument(
        "--optlevel", type=int, choices=(0, 1, 2), help="pnnx optlevel for every case (default: the case's own)"
    )
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default: {OUT.relative_to(ROOT)})")
    ap.add_argument("--cases", type=Path, help="a file naming the cases to export, one a line")
    args = ap.parse_args(argv)

    import torch

    torch.manual_seed(0)
    import opcases

    only = set(args.cases.read_text().split()) if args.cases else None
    names = args.families or [m.name for m in pkgutil.iter_modules(opcases.__path__) if not m.name.startswith("_")]
    failed: list[str] = []
    for fam in names:
        mod = importlib.import_module(f"opcases.{fam}")
        for case, factory in mod.CASES.items():
            if args.k not in case or (only is not None and case not in only):
                continue
            dest = args.out / case
            if dest.exists() and not args.force:
                continue
            torch.manual_seed(0)
            try:
                module, inputs, *options = factory()
                kwargs = dict(options[0]) if options else {}
                if args.optlevel is not None:
                    kwargs["optlevel"] = args.optlevel
                version = kwargs.pop("pnnx", None)
                if version is not None:
                    kwargs["converter"] = converter(version)
                export_module(module, inputs, dest, name="model", **kwargs)
                readme = dest / "README.md"
                readme.unlink(missing_ok=True)
                if version is not None:
                    readme.write_text(remake_note(version, case))
                print(f"ok   {case}")
            except Exception:  # report every failing case, keep going
                failed.append(case)
                print(f"FAIL {case}\n{traceback.format_exc()}", file=sys.stderr)
    if failed:
        print(f"{len(failed)} case(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
