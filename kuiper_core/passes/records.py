"""What a pass is (PassInfo) and what it did (Change): the plain records the pass manager and its
instruments both read (instruments.py reports them; manager.py runs passes and collects them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassInfo:
    name: str
    opt_level: int
    required: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Change:
    """One rewrite a pass made: `action` (removed, merged, folded, fused, rewired, added,
    changed, kept) on `operator`, with a human-readable `detail`."""

    action: str
    operator: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.action} {self.operator}" + (f": {self.detail}" if self.detail else "")


__all__ = ["Change", "PassInfo"]
