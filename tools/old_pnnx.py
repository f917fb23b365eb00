"""The converter binary of an older pnnx release, for the op cases that only older pnnx writes.

Files converted before late 2025 say `Tensor.view` (now merged into Tensor.reshape) and
`Tensor.contiguous` (now dropped); early-2024 releases wrote `torch.permute` (now
Tensor.permute). The engine still reads those files, so tools/opcases/coverage.py converts a
case with that release. The pnnx wheel's binary is self-contained (libc/libstdc++ only) and
reads TorchScript saved by the installed torch.

    python tools/old_pnnx.py 20250530     # print the binary's path (downloads it once)

Downloads with `pip download pnnx==VERSION --no-deps` into ~/.cache/kuiper-explorer/.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CACHE = Path.home() / ".cache" / "kuiper-explorer"


def converter(version: str) -> Path:
    """Path of pnnx==`version`'s converter binary, downloaded and unpacked on first use."""
    exe = CACHE / f"pnnx-{version}" / "pnnx" / "pnnx"
    if exe.exists():
        return exe
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", f"pnnx=={version}", "--no-deps", "-d", tmp]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        (wheel,) = Path(tmp).glob("pnnx-*.whl")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(exe.parent.parent)
    exe.chmod(0o755)
    return exe


def remake_note(version: str, case: str) -> str:
    """The README.md written beside a case converted by an older pnnx."""
    return (
        f"Converted by pnnx {version} (not the installed pnnx), whose files still exist: see\n"
        f"tools/opcases/coverage.py. Remake: `python tools/export_opcases.py coverage -k {case} -f`\n"
        f"(downloads pnnx=={version} once with pip, tools/old_pnnx.py).\n"
    )


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(converter(sys.argv[1]))
