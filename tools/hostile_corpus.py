"""A corpus of hostile files, inputs and command lines, each run through the `kuiper` CLI.

Every case says what must happen: `match` (exit 0 and PyTorch's outputs, e.g. a CRLF or
BOM copy of a real export), `ok` (exit 0), `error` (exit 2 with a short `error: …` and no
traceback) or `either` (0 or 2). Anything else is a finding: exit 1 (an internal error), a
wrong answer, an accepted bad file, a refused good one, a traceback, a message over 5,000
characters, a case over --slow seconds, a hang or a crash.

    python tools/hostile_corpus.py                    # build in a temp dir, run, report
    python tools/hostile_corpus.py --keep /tmp/hc -v  # keep the files, print every finding
    python tools/hostile_corpus.py -k bin -k npy      # only cases whose name contains these

Categories: format variants of real exports (CRLF, tabs, BOM, unicode names, ...),
truncations, huge and odd numbers in every kind of token, NULs and control characters,
graph structure, .bin zip tricks, symlinks and special files, .npy inputs (dtypes, NaN/inf,
empty, ranks 0-8, byte order, headers), CLI arguments, expressions, declared dtypes and
limits. Cases run in a memory-limited worker (tools/_supervise.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from _supervise import serve, supervise

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "tests" / "data" / "ops"
SAMPLES = ROOT / "sample_models"
HUGE = "9" * 4400


@dataclass
class Case:
    name: str
    argv: list[str]
    expect: str  # match | ok | error | either
    expected: list[str] = field(default_factory=list)  # .npy files the outputs must match (match)
    outputs: list[str] = field(default_factory=list)  # where --output writes them
    id: int = -1


@dataclass
class Base:
    """A real export with its inputs and PyTorch's outputs, copied into the corpus."""

    name: str
    param: str
    bin: bytes | None
    inputs: list[np.ndarray]
    expected: list[np.ndarray]


def _op_base(case: str) -> Base:
    """An op case: `name` from tests/data/ops, or `ops_o0/name` (any folder under tests/data)."""
    d = OPS / case if "/" not in case else ROOT / "tests" / "data" / case
    with np.load(d / "inputs.npz") as z:
        inputs = [z[f"in{i}"] for i in range(len(z.files))]
    with np.load(d / "expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    b = (d / "model.pnnx.bin").read_bytes() if (d / "model.pnnx.bin").exists() else None
    return Base(case.replace("/", "."), (d / "model.pnnx.param").read_text(), b, inputs, expected)


def _sample_base(name: str) -> Base:
    with np.load(SAMPLES / f"{name}.expected.npz") as z:
        expected = [z[k] for k in sorted(z.files)]
    return Base(
        name,
        (SAMPLES / f"{name}.pnnx.param").read_text(),
        (SAMPLES / f"{name}.pnnx.bin").read_bytes(),
        [np.load(SAMPLES / f"{name}.input.npy")],
        expected,
    )


class Corpus:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cases: list[Case] = []

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write(self, rel: str, data: bytes | str) -> Path:
        p = self.path(rel)
        p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        return p

    def npy(self, rel: str, array: np.ndarray) -> Path:
        p = self.path(rel)
        with open(p, "wb") as f:
            np.save(f, array, allow_pickle=True)
        return p

    def add(self, name: str, argv: list[str], expect: str, expected: list[np.ndarray] | None = None) -> None:
        case = Case(name, [str(a) for a in argv], expect, id=len(self.cases))
        if expected is not None:
            for i, y in enumerate(expected):
                case.expected.append(str(self.npy(f"{name}/expected{i}.npy", y)))
                case.outputs.append(str(self.path(f"{name}/out{i}.npy")))
            case.argv += [a for o in case.outputs for a in ("--output", o)]
        self.cases.append(case)

    def model(
        self,
        name: str,
        param: str | bytes,
        base: Base | None,
        expect: str,
        *,
        bin_bytes: bytes | None | str = "base",
        inputs: list[np.ndarray] | None = None,
        expected: list[np.ndarray] | None = None,
        command: str = "run",
    ) -> None:
        """Write NAME/m.pnnx.param (+ .bin) and the inputs; add a `run` (or `inspect`) case."""
        p = self.write(f"{name}/m.pnnx.param", param)
        b = base.bin if bin_bytes == "base" and base is not None else bin_bytes
        if isinstance(b, (bytes, bytearray)):
            self.write(f"{name}/m.pnnx.bin", b)
        if command == "inspect":
            self.add(name, ["inspect", p], expect)
            return
        xs = inputs if inputs is not None else (base.inputs if base is not None else [])
        argv: list[object] = ["run", p]
        for i, x in enumerate(xs):
            argv += ["--input", self.npy(f"{name}/in{i}.npy", x)]
        if not xs:
            argv += ["--input", self.npy(f"{name}/in0.npy", np.zeros((1,), np.float32))]
        want = expected if expected is not None else (base.expected if base is not None else None)
        self.add(name, argv, expect, want if expect == "match" else None)  # type: ignore[arg-type]
        if not name.startswith(("numbers/", "truncate", "chars/")):  # the graph passes on it too
            checks = [a for i, a in enumerate(argv) if i and argv[i - 1] == "--input"]
            opt = ["opt", p, "-o", self.path(f"{name}/opt/o.pnnx.param")] + [a for x in checks for a in ("--check", x)]
            self.add(f"opt/{name}", [str(a) for a in opt], "ok" if expect in ("match", "ok") else "either")


# -- the corpus ----------------------------------------------------------------------------------------
def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.split("\n")]


def _rename_operands(text: str, new: callable) -> str:  # type: ignore[valid-type]
    """Every operand name N -> new(N), in operand positions, `#N=` and `$k=N`."""
    out = []
    for i, line in enumerate(text.split("\n")):
        t = line.split()
        if i < 2 or len(t) < 4:
            out.append(line)
            continue
        n = int(t[2]) + int(t[3])
        t[4 : 4 + n] = [new(x) for x in t[4 : 4 + n]]
        for j in range(4 + n, len(t)):
            k, _, v = t[j].partition("=")
            if k.startswith("#"):
                t[j] = f"#{new(k[1:])}={v}"
            elif k.startswith("$"):
                t[j] = f"{k}={new(v)}"
        out.append(" ".join(t))
    return "\n".join(out)


def _rename_operators(text: str, new: callable, only_weightless: bool = True) -> str:  # type: ignore[valid-type]
    out = []
    for i, line in enumerate(text.split("\n")):
        t = line.split()
        if i >= 2 and len(t) >= 4 and not (only_weightless and any(x.startswith("@") for x in t)):
            t[1] = new(t[1])
            line = " ".join(t)
        out.append(line)
    return "\n".join(out)


def build(c: Corpus) -> None:
    bases = [
        _op_base(n)
        for n in ("linear_addmm", "conv_2d_basic", "io_attribute_const", "io_tuple_outputs", "expr_int_bitwise")
    ]
    bases += [_sample_base(n) for n in ("tiny_mlp", "digits_cnn", "expr_zoo")]
    # optlevel 0 and 1 (prim::/aten:: layers, values computed at run time) and a dynamic slice
    bases += [
        _op_base(n)
        for n in (
            "ops_o0/tensor_arange_posenc",
            "ops_o0/shape_dyn_select",
            "ops_o0/tensor_where_scalars",
            "ops_o0/tensor_constant_to",
            "ops_o1/tensor_arange_posenc",
            "shape_dyn_slice_end",
        )
    ]
    by_name = {b.name: b for b in bases}

    # 1. Format variants of real exports: the same model, so PyTorch's answer.
    for b in bases:
        t = b.param
        variants = {
            "crlf": t.replace("\n", "\r\n"),
            "tabs": t.replace(" ", "\t"),
            "spaces": t.replace(" ", "   "),
            "trailing": t.replace("\n", "  \n"),
            "bom": "\ufeff" + t,
            "blank_lines": t.replace("\n", "\n\n").replace("7767517\n\n", "7767517\n", 1).replace("\n\n", "\n", 1),
            "no_final_newline": t.rstrip("\n"),
            "many_final_newlines": t + "\n\n\n",
            "unicode_operands": _rename_operands(t, lambda n: f"ö{n}é"),
            "emoji_operands": _rename_operands(t, lambda n: f"🙂{n}"),
            "nbsp_in_operands": _rename_operands(t, lambda n: f"a\u00a0{n}"),
            "rtl_operands": _rename_operands(t, lambda n: f"\u202e{n}\u200d"),
            "long_operator_names": _rename_operators(t, lambda n: n + "x" * 5000),
            "unicode_operator_names": _rename_operators(t, lambda n: "算子_" + n),
        }
        for v, text in variants.items():
            c.model(f"format/{b.name}/{v}", text, b, "match")
        c.model(f"format/{b.name}/cr_only", t.replace("\n", "\r"), b, "error")
        c.model(f"format/{b.name}/inspect", t, b, "ok", command="inspect")

    # 2. Truncations: a cut file is an error, unless only the final newline went.
    for b in bases[:6]:
        t = b.param
        for k in range(1, 16):
            cut = t[: len(t) * k // 16]
            c.model(f"truncate/{b.name}/{k}", cut, b, "match" if cut.rstrip("\n") == t.rstrip("\n") else "error")
        if b.bin and zipfile.ZipFile(io.BytesIO(b.bin)).namelist():  # (a weightless model reads no .bin)
            for k in (0, 1, 22, len(b.bin) // 2, len(b.bin) - 22, len(b.bin) - 1):
                c.model(f"truncate_bin/{b.name}/{k}", t, b, "error", bin_bytes=b.bin[:k])

    # 3. Huge and odd numbers in every kind of token, one at a time.
    numbers = [
        HUGE,
        "-" + HUGE,
        "9223372036854775808",
        "9223372036854775807",
        "2147483648",
        "-1",
        "0",
        "1e309",
        "nan",
        "-inf",
        "3e8",
        "0x10",
        "1_000",
        "١٢",
        "1.5",
        "+1",
        "--1",
        "",
    ]
    for b in (
        by_name["linear_addmm"],
        by_name["conv_2d_basic"],
        by_name["tiny_mlp"],
        by_name["ops_o0.shape_dyn_select"],
        by_name["ops_o0.tensor_arange_posenc"],
        by_name["ops_o1.tensor_arange_posenc"],
    ):
        lines = b.param.split("\n")
        slots = [(1, 0), (1, 1)]  # the counts
        for i in range(2, len(lines)):
            t = lines[i].split()
            if len(t) >= 4:
                slots += [(i, 2), (i, 3)] + [(i, j) for j in range(4, len(t)) if "=" in t[j]][:4]
        if b.name.startswith("ops_o"):  # long optlevel-0/1 files: their constants and params only
            slots = [(i, j) for i, j in slots if j >= 4][:40]
        for n, (i, j) in enumerate(slots):
            for v in numbers[n % 3 :: 3]:  # a third of the numbers per slot, all of them over the slots
                t = lines[i].split()
                if j >= len(t):
                    continue
                if "=" in t[j]:
                    k, _, val = t[j].partition("=")
                    if k[0] in "@#":  # a dim inside the shape
                        inner = val[1 : val.index(")")].split(",")
                        inner[0] = v
                        t[j] = f"{k}=({','.join(inner)}){val[val.index(')') + 1 :]}"
                    else:
                        t[j] = f"{k}={v}"
                else:
                    t[j] = v
                new = lines[:i] + [" ".join(t)] + lines[i + 1 :]
                c.model(f"numbers/{b.name}/{i}.{j}/{len(v)}{v[:6]}", "\n".join(new), b, "either")

    # 4. NULs, control characters and invalid UTF-8 at several places.
    for b in (by_name["conv_2d_basic"], by_name["io_attribute_const"]):
        t = b.param
        for k in range(1, 9):
            pos = len(t) * k // 9
            for tag, junk in (("nul", "\0"), ("ctrl", "\x01\x1b"), ("del", "\x7f"), ("ls", "\u2028")):
                c.model(f"chars/{b.name}/{k}/{tag}", t[:pos] + junk + t[pos:], b, "either")
            raw = t.encode()
            c.model(
                f"chars/{b.name}/{k}/bad_utf8",
                raw[: len(raw) * k // 9] + b"\xff\xc0" + raw[len(raw) * k // 9 :],
                b,
                "error",
            )

    # 5. Graph structure.
    x = np.ones((1, 4), np.float32)
    head = "7767517\n"
    graphs = {
        "empty_file": ("", "error"),
        "magic_only": (head, "error"),
        "bad_magic": ("7767518\n2 1\npnnx.Input i 0 1 x\npnnx.Output o 1 0 x\n", "error"),
        "zero_zero": (head + "0 0\n", "error"),
        "negative_counts": (head + "-1 -1\n", "error"),
        "no_output": (head + "1 1\npnnx.Input i 0 1 x #x=(1,4)f32\n", "error"),
        "no_input": (head + "1 1\nnn.ReLU r 0 1 x\n", "error"),
        "input_two_outputs": (head + "2 2\npnnx.Input i 0 2 x y\npnnx.Output o 2 0 x y\n", "error"),
        "input_with_input": (head + "3 2\npnnx.Input i 0 1 x\npnnx.Input j 1 1 x y\npnnx.Output o 1 0 y\n", "error"),
        "input_no_output": (head + "3 1\npnnx.Input i 0 0\npnnx.Input j 0 1 x\npnnx.Output o 1 0 x\n", "error"),
        "identity": (head + "2 1\npnnx.Input i 0 1 x #x=(1,4)f32\npnnx.Output o 1 0 x\n", "match"),
        "output_has_output": (head + "2 2\npnnx.Input i 0 1 x\npnnx.Output o 1 1 x y\n", "either"),
        "use_before_produce": (head + "3 2\npnnx.Input i 0 1 x\nnn.ReLU r 1 1 y z\npnnx.Output o 1 0 z\n", "error"),
        "produced_twice": (head + "3 1\npnnx.Input i 0 1 x\nnn.ReLU r 1 1 x x\npnnx.Output o 1 0 x\n", "error"),
        "self_input": (head + "3 2\npnnx.Input i 0 1 x\nnn.ReLU r 2 1 x y y\npnnx.Output o 1 0 y\n", "error"),
        "duplicate_names": (
            head + "4 3\npnnx.Input i 0 1 x #x=(1,4)f32\nnn.ReLU r 1 1 x a\nnn.ReLU r 1 1 a b\npnnx.Output o 1 0 b\n",
            "match",
        ),
        "output_twice": (
            head + "3 1\npnnx.Input i 0 1 x #x=(1,4)f32\npnnx.Output o 1 0 x\npnnx.Output p 1 0 x\n",
            "either",
        ),
        "shape_of_stranger": (head + "2 1\npnnx.Input i 0 1 x #y=(1,4)f32\npnnx.Output o 1 0 x\n", "error"),
        "dollar_stranger": (
            head + "3 2\npnnx.Input i 0 1 x\nnn.ReLU r 1 1 x y $input=q\npnnx.Output o 1 0 y\n",
            "error",
        ),
        "empty_key": (head + "3 2\npnnx.Input i 0 1 x\nnn.ReLU r 1 1 x y =1\npnnx.Output o 1 0 y\n", "error"),
        "empty_value": (head + "3 2\npnnx.Input i 0 1 x\nnn.ReLU r 1 1 x y k=\npnnx.Output o 1 0 y\n", "error"),
        "double_equals": (
            head + "3 2\npnnx.Input i 0 1 x #x=(1,4)f32\nnn.ReLU r 1 1 x y k==1\npnnx.Output o 1 0 y\n",
            "either",
        ),
        "key_twice": (
            head + "3 2\npnnx.Input i 0 1 x #x=(1,4)f32\nnn.LeakyReLU r 1 1 x y negative_slope=0.5 "
            "negative_slope=0.5\npnnx.Output o 1 0 y\n",
            "error",  # a key given twice is refused (issue 27): pnnx keeps the last
        ),
        "unknown_type": (head + "3 2\npnnx.Input i 0 1 x\nnn.Nope r 1 1 x y\npnnx.Output o 1 0 y\n", "error"),
        "too_many_lines": (head + "1 1\npnnx.Input i 0 1 x\npnnx.Output o 1 0 x\n", "error"),
        "operand_count_wrong": (head + "2 5\npnnx.Input i 0 1 x #x=(1,4)f32\npnnx.Output o 1 0 x\n", "either"),
        "attr_without_bin": (
            head + "3 2\npnnx.Input i 0 1 x\npnnx.Attribute a 0 1 y @data=(1,4)f32\npnnx.Output o 2 0 x y\n",
            "error",
        ),
        "zero_d_attr": (
            head + "3 2\npnnx.Input i 0 1 x #x=(1,4)f32\npnnx.Attribute a 0 1 y @data=()f32\npnnx.Output o 2 0 x y\n",
            "error",
        ),
        "huge_attr": (
            head + "3 2\npnnx.Input i 0 1 x\npnnx.Attribute a 0 1 y @data=(100000,100000)f32\npnnx.Output o 2 0 x y\n",
            "error",
        ),
        "rank9_shape": (head + "2 1\npnnx.Input i 0 1 x #x=(1,1,1,1,1,1,1,1,4)f32\npnnx.Output o 1 0 x\n", "error"),
    }
    ident = [np.ones((1, 4), np.float32)]
    for n, (text, expect) in graphs.items():
        want = [np.maximum(x, 0)] if expect == "match" else None
        c.model(f"graph/{n}", text, None, expect, bin_bytes=None, inputs=ident, expected=want)

    # Ranks 0 to 8 through an identity and a ReLU, and zero-size dims.
    for rank in range(0, 9):
        shape = tuple([1] * max(rank - 1, 0) + [3])[:rank]
        dims = ",".join(map(str, shape))
        text = head + f"3 2\npnnx.Input i 0 1 x #x=({dims})f32\nnn.ReLU r 1 1 x y #y=({dims})f32\npnnx.Output o 1 0 y\n"
        a = np.linspace(-1, 1, max(1, int(np.prod(shape)))).astype(np.float32).reshape(shape)
        c.model(f"rank/{rank}", text, None, "match", bin_bytes=None, inputs=[a], expected=[np.maximum(a, 0)])
    for shape in ((1, 0), (0,), (2, 0, 3)):
        dims = ",".join(map(str, shape))
        text = head + f"3 2\npnnx.Input i 0 1 x #x=({dims})f32\nnn.ReLU r 1 1 x y #y=({dims})f32\npnnx.Output o 1 0 y\n"
        a = np.zeros(shape, np.float32)
        c.model(f"rank/empty_{dims}", text, None, "either", bin_bytes=None, inputs=[a])

    # Long chains and wide fans, and a 1 MiB line.
    for n in (1000, 20000):
        lines = ["pnnx.Input i 0 1 x0 #x0=(1,4)f32"] + [f"nn.ReLU r{k} 1 1 x{k} x{k + 1}" for k in range(n)]
        lines.append(f"pnnx.Output o 1 0 x{n}")
        c.model(
            f"graph/chain_{n}",
            head + f"{n + 2} {n + 1}\n" + "\n".join(lines) + "\n",
            None,
            "match",
            bin_bytes=None,
            inputs=ident,
            expected=ident,
        )
    fan = ["pnnx.Input i 0 1 x #x=(1,4)f32"] + [f"nn.ReLU r{k} 1 1 x y{k}" for k in range(5000)]
    fan.append("pnnx.Output o 5000 0 " + " ".join(f"y{k}" for k in range(5000)))
    c.model("graph/fan_5000", head + "5002 5001\n" + "\n".join(fan) + "\n", None, "ok", bin_bytes=None, inputs=ident)
    c.model(
        "graph/line_over_1mib",
        head + "2 1\npnnx.Input i 0 1 x " + "k=1 " * 300_000 + "\npnnx.Output o 1 0 x\n",
        None,
        "error",
        bin_bytes=None,
        inputs=ident,
    )
    c.model("graph/declares_200000_operators", head + "200000 1\n", None, "error", bin_bytes=None, inputs=ident)

    # 6. .bin zip tricks (on a model with two weights).
    b = by_name["conv_2d_basic"]
    assert b.bin is not None
    entries = {
        i.filename: zipfile.ZipFile(io.BytesIO(b.bin)).read(i) for i in zipfile.ZipFile(io.BytesIO(b.bin)).infolist()
    }

    def zip_of(items: list[tuple[str, bytes]], method: int = zipfile.ZIP_STORED, comment: bytes = b"") -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as zf:
            zf.comment = comment
            for k, v in items:
                zf.writestr(k, v)
        return buf.getvalue()

    good = list(entries.items())
    tricks: dict[str, tuple[bytes, str]] = {
        "empty": (b"", "error"),
        "junk": (b"this is not a zip" * 10, "error"),
        "npz": (zip_of([(f"{k}.npy", v) for k, v in good]), "error"),
        "deflated": (zip_of(good, zipfile.ZIP_DEFLATED), "error"),
        "bzip2": (zip_of(good, zipfile.ZIP_BZIP2), "error"),
        "lzma": (zip_of(good, zipfile.ZIP_LZMA), "error"),
        "rewritten_stored": (zip_of(good), "match"),
        "reordered": (zip_of(good[::-1]), "match"),
        "extra_entries": (zip_of(good + [("junk.txt", b"x"), ("../../etc/passwd", b"root")]), "match"),
        "directory_entry": (zip_of([("layer.weight/", b"")] + good), "match"),
        "comment": (zip_of(good, comment=b"c" * 65535), "match"),
        "prepended": (b"MZ" + b"\0" * 4096 + b.bin, "match"),
        "appended": (b.bin + b"\0" * 4096, "either"),
        "missing_bias": (zip_of([g for g in good if not g[0].endswith("bias")]), "error"),
        "short_weight": (zip_of([(k, v[:-4]) for k, v in good]), "error"),
        "long_weight": (zip_of([(k, v + b"\0\0\0\0") for k, v in good]), "error"),
        "case_changed": (zip_of([(k.upper(), v) for k, v in good]), "error"),
        "thousands_of_entries": (zip_of(good + [(f"e{i}", b"") for i in range(5000)]), "error"),
    }
    for flag, tag in ((0x1, "encrypted"), (0x20, "flag5"), (0x40, "flag6"), (0x8, "data_descriptor")):
        data = bytearray(b.bin)
        for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            pos = data.find(sig)
            while pos >= 0:
                data[pos + at] |= flag
                pos = data.find(sig, pos + 4)
        tricks[tag] = (bytes(data), "either" if tag == "data_descriptor" else "error")
    for tag, (data, expect) in tricks.items():
        c.model(f"bin/{tag}", b.param, b, expect, bin_bytes=data)
    # Headers pointing elsewhere: sizes, offsets, name lengths.
    zf = zipfile.ZipFile(io.BytesIO(b.bin))
    for info in zf.infolist()[:1]:
        for field_name, off, width in (
            ("local_size", 22, 4),
            ("local_name_len", 26, 2),
            ("local_extra_len", 28, 2),
            ("method", 8, 2),
        ):
            for value in (0, 0xFFFF, 0xFFFFFFFF if width == 4 else 0x7FFF):
                data = bytearray(b.bin)
                data[info.header_offset + off : info.header_offset + off + width] = value.to_bytes(width, "little")
                c.model(f"bin/header_{field_name}_{value}", b.param, b, "either", bin_bytes=bytes(data))
    # Special files: symlinks, a directory, a FIFO, /dev/zero, a symlink loop.
    special = c.root / "special"
    special.mkdir(exist_ok=True)
    (special / "loop_a").symlink_to(special / "loop_b")
    (special / "loop_b").symlink_to(special / "loop_a")
    os.mkfifo(special / "fifo")
    (special / "adir").mkdir()
    p = c.write("bin/sym/m.pnnx.param", b.param)
    for tag, target in (
        ("dev_zero", "/dev/zero"),
        ("fifo", special / "fifo"),
        ("dir", special / "adir"),
        ("loop", special / "loop_a"),
        ("missing", special / "nothing"),
    ):
        c.add(
            f"special/bin_{tag}",
            ["run", p, "--bin", target, "--input", c.npy(f"special/bin_{tag}/x.npy", b.inputs[0])],
            "error",
        )
        c.add(
            f"special/param_{tag}",
            ["run", target, "--input", c.npy(f"special/param_{tag}/x.npy", b.inputs[0])],
            "error",
        )
        c.add(f"special/npy_{tag}", ["run", p, "--bin", c.write("special/good.bin", b.bin), "--input", target], "error")
    link = c.root / "special" / "link.pnnx.param"
    link.symlink_to(c.write("special/real/m.pnnx.param", b.param))
    c.add(
        "special/symlinked_param",
        [
            "run",
            link,
            "--bin",
            c.write("special/real/m.pnnx.bin", b.bin),
            "--input",
            c.npy("special/symlinked_param/x.npy", b.inputs[0]),
        ],
        "match",
        b.expected,
    )

    # 7. .npy inputs.
    lin = by_name["tiny_mlp"]
    x0 = lin.inputs[0]
    inputs: dict[str, tuple[np.ndarray, str]] = {
        "f64": (x0.astype(np.float64), "match"),
        "f16": (x0.astype(np.float16), "ok"),
        "big_endian": (x0.astype(">f4"), "match"),
        "fortran": (np.asfortranarray(x0), "match"),
        "int64": (x0.astype(np.int64), "error"),
        "bool": (x0 > 0, "error"),
        "complex": (x0.astype(np.complex64), "error"),
        "nan": (np.full_like(x0, np.nan), "ok"),
        "inf": (np.full_like(x0, np.inf), "ok"),
        "mixed_nan_inf": (np.where(x0 > 0.5, np.nan, -np.inf).astype(np.float32), "ok"),
        "f64_overflowing_f32": (np.full(x0.shape, 1e300), "error"),
        "subnormal": (np.full_like(x0, 1e-40), "ok"),
        "batch0": (np.zeros((0,) + x0.shape[1:], np.float32), "error"),
        "batch3": (np.concatenate([x0] * 3), "match"),
        "rank0": (np.float32(1.0).reshape(()), "error"),
        "rank3": (x0[0], "error"),
        "rank5": (x0[None], "error"),
        "wrong_dims": (np.zeros((1, 1, 8, 9), np.float32), "error"),
        "structured": (np.zeros(x0.shape, dtype=[("a", "f4")]), "error"),
        "object": (np.array([{}, 1], dtype=object), "error"),
        "strings": (np.array(["a", "b"]), "error"),
        "datetime": (np.zeros(3, "datetime64[s]"), "error"),
    }
    for tag, (a, expect) in inputs.items():
        want = [np.concatenate([lin.expected[0]] * 3)] if tag == "batch3" else None
        c.model(f"npy/{tag}", lin.param, lin, expect, inputs=[a], expected=want)
    header = np.lib.format.header_data_from_array_1_0(x0)
    for tag, shape, body in (
        ("claims_huge", (100000, 100000), b"\0" * 64),
        ("claims_more", x0.shape, b"\0" * 16),
        ("negative_dim", (-1, 1, 8, 8), b"\0" * 256),
        ("truncated", x0.shape, x0.tobytes()[:-1]),
    ):
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, dict(header, shape=shape))
        path = c.write(f"npy_raw/{tag}.npy", buf.getvalue() + body)
        c.add(
            f"npy/{tag}",
            [
                "run",
                c.write("npy_raw/m.pnnx.param", lin.param),
                "--bin",
                c.write("npy_raw/m.pnnx.bin", lin.bin or b""),
                "--input",
                path,
            ],
            "error",
        )
    for tag, raw in (
        ("empty_file", b""),
        ("magic_only", b"\x93NUMPY"),
        ("text", b"1 2 3"),
        ("pickle", b"\x80\x04K\x01."),
        ("huge_header_len", b"\x93NUMPY\x01\x00\xff\xff" + b" " * 100),
    ):
        c.add(
            f"npy/{tag}",
            [
                "run",
                c.write("npy_raw/m.pnnx.param", lin.param),
                "--bin",
                c.write("npy_raw/m.pnnx.bin", lin.bin or b""),
                "--input",
                c.write(f"npy_raw/{tag}.npy", raw),
            ],
            "error",
        )

    # 8. Command lines.
    p = c.write("cli/m.pnnx.param", lin.param)
    c.write("cli/m.pnnx.bin", lin.bin or b"")
    xin = c.npy("cli/x.npy", x0)
    (c.root / "cli" / "outdir").mkdir(exist_ok=True)
    os.mkfifo(c.root / "cli" / "out.fifo")
    for tag, argv, expect in (
        ("output_dir", ["run", p, "--input", xin, "--output", c.root / "cli" / "outdir"], "error"),
        ("output_missing_dir", ["run", p, "--input", xin, "--output", c.root / "cli" / "no" / "y.npy"], "error"),
        ("output_fifo", ["run", p, "--input", xin, "--output", c.root / "cli" / "out.fifo"], "error"),
        ("output_no_suffix", ["run", p, "--input", xin, "--output", c.root / "cli" / "y.out"], "ok"),
        (  # an output never replaces an input (output_files.py)
            "output_over_input",
            ["run", p, "--input", c.npy("cli/x2.npy", x0), "--output", c.root / "cli" / "x2.npy"],
            "error",
        ),
        (
            "two_outputs_for_one",
            ["run", p, "--input", xin, "--output", c.root / "cli/a.npy", "--output", c.root / "cli/b.npy"],
            "error",
        ),
        ("two_inputs_for_one", ["run", p, "--input", xin, "--input", xin], "error"),
        ("model_is_dir", ["run", c.root / "cli", "--input", xin], "error"),
        ("model_missing", ["run", c.root / "cli" / "nope.pnnx.param", "--input", xin], "error"),
        ("bin_is_param", ["run", p, "--bin", p, "--input", xin], "error"),
        ("param_is_bin", ["run", c.root / "cli" / "m.pnnx.bin", "--input", xin], "error"),
        ("inspect_kahn", ["inspect", p, "--order", "kahn"], "ok"),
        (
            "unicode_path",
            [
                "run",
                c.write("cli/模型 ü/m.pnnx.param", lin.param),
                "--bin",
                c.write("cli/模型 ü/m.pnnx.bin", lin.bin or b""),
                "--input",
                xin,
            ],
            "ok",
        ),
    ):
        c.add(f"cli/{tag}", argv, expect)

    # 9. Expressions in a model, on float and int inputs.
    exprs = [
        "add(@0,@1)",
        "div(@0,0)",
        "floor_divide(@0,0)",
        "remainder(@0,0)",
        "fmod(@0,0)",
        "pow(@0,-1)",
        "lshift(@0,70)",
        "rshift(@0,-1)",
        "int(@0)",
        "size(@0,5)",
        "size(@0,-9)",
        "torch.long(@0)",
        "neg(" * 3000 + "@0" + ")" * 3000,
        "add(@0,@7)",
        "add(@0," + HUGE + ")",
        "mul(@0,1e309)",
        "atan2(@0,@1)",
        "logaddexp(@0,@1)",
        "max(@0,nan)",
        "sqrt(neg(@0))",
        "[@0,@1]",
        "size(@0)",
        "True",
        "None",
        "and(@0,1.5)",
        "neg(torch.bool(@0))",
        "round(@0)",
        "1.0e+00+2.0e+00j",
        "add(@0)",
        "nosuch(@0)",
        "add(@0,@1",
        "",
    ]
    for dtype, a0, a1 in (
        ("f32", np.float32([[1.5, -2.0, 0.0]]), np.float32([[0.5, 0.0, -1.0]])),
        ("i64", np.int64([[7, -3, 0]]), np.int64([[2, 0, -1]])),
    ):
        for k, e in enumerate(exprs):
            text = (
                head + f"4 3\npnnx.Input i 0 1 a #a=(1,3){dtype}\npnnx.Input j 0 1 b #b=(1,3){dtype}\n"
                f"pnnx.Expression e 2 1 a b y expr={e}\npnnx.Output o 1 0 y\n"
            )
            c.model(f"expr/{dtype}/{k}", text, None, "either", bin_bytes=None, inputs=[a0, a1])

    # 10. Declared dtypes on inputs and outputs, fed matching and other arrays.
    for dt, npdt in (
        ("f32", np.float32),
        ("f64", np.float64),
        ("f16", np.float16),
        ("bf16", np.float32),
        ("i64", np.int64),
        ("i32", np.int32),
        ("i16", np.int16),
        ("i8", np.int8),
        ("u8", np.uint8),
        ("bool", np.bool_),
        ("c64", np.complex64),
        ("c128", np.complex128),
    ):
        a = np.array([[0, 1, 2]]).astype(npdt)
        text = head + f"2 1\npnnx.Input i 0 1 x #x=(1,3){dt}\npnnx.Output o 1 0 x #x=(1,3){dt}\n"
        c.model(f"dtype/{dt}/same", text, None, "match", bin_bytes=None, inputs=[a], expected=[a])
        for other in (np.float64, np.int64, np.uint8, np.bool_):
            c.model(
                f"dtype/{dt}/from_{np.dtype(other).name}",
                text,
                None,
                "either",
                bin_bytes=None,
                inputs=[np.array([[0, 1, 2]]).astype(other)],
            )
        relu = head + f"3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.ReLU r 1 1 x y #y=(1,3){dt}\npnnx.Output o 1 0 y\n"
        c.model(
            f"dtype/{dt}/declared_relu_output",
            relu,
            None,
            "match" if dt in ("f32", "bf16") else "error",
            bin_bytes=None,
            inputs=[np.float32([[-1, 0, 2]])],
            expected=[np.float32([[0, 0, 2]])],
        )

    # 11. The textual IR (.kir): the same hostility in the other text format.
    sys.path.insert(0, str(ROOT))
    from kuiper_core import print_ir
    from kuiper_core.pnnx import parse_param

    for b in (by_name["tiny_mlp"], by_name["conv_2d_basic"]):
        kir = print_ir(parse_param(b.param))
        variants = {
            "plain": (kir, "match"),
            "crlf": (kir.replace("\n", "\r\n"), "match"),
            "bom": ("\ufeff" + kir, "match"),
            "tabs": (kir.replace("  (", "\t("), "match"),
        }
        for k in range(1, 10):
            variants[f"truncate_{k}"] = (kir[: len(kir) * k // 10], "error")
        for tag, old, new in (
            ("huge_dim", "x8x8x", f"x{HUGE}x8x"),
            ("huge_int", ")1", ")" + HUGE),
            ("big_shape", "1x1x8x8", "100000x100000x8x8"),
            ("neg_dim", "1x64", "-1x64"),
            ("nul", "nn.", "n\0n."),
            ("long_line", "{", "{" + " " * 1_100_000),
            ("zero_dim", "1x1x8x8", "0x1x8x8"),
            ("huge_weight", "<32x64", "<3200000x6400000"),
        ):
            if old in kir:  # (each pattern is one model's)
                variants[tag] = (kir.replace(old, new, 1), "error" if tag != "zero_dim" else "either")
        if "(Array)[" in kir:  # arrays nested past max_param_depth (layers and passes would recurse)
            deep = "(Array)[" * 5000 + "(Int32)1" + "]" * 5000
            variants["deep_array"] = (kir.replace("(Array)[", f"(Array)[{deep},", 1), "error")
        for tag, (text, expect) in variants.items():
            p = c.write(f"kir/{b.name}/{tag}/m.kir", text)
            c.write(f"kir/{b.name}/{tag}/m.bin", b.bin or b"")
            argv = ["run", p]
            for i, x in enumerate(b.inputs):
                argv += ["--input", c.npy(f"kir/{b.name}/{tag}/in{i}.npy", x)]
            c.add(f"kir/{b.name}/{tag}", argv, expect, b.expected if expect == "match" else None)
    # More operations than max_operators (lowered: parsing 100,000 takes a while before the limit)
    ops = "\n".join(f'  (%{i}) = "pnnx.Input" @i{i} () : () -> pnnx.tensor<1xf32>' for i in range(2000))
    p = c.write("kir/ops_2000/m.kir", "{\n" + ops + "\n}\n")
    c.add(
        "kir/ops_2000", ["--limit", "max_operators=1000", "run", p, "--input", c.npy("kir/ops_2000/x.npy", x)], "error"
    )

    # 12. Layers with sizes from params: refused before allocating.
    for tag, line in (
        ("upsample_20000", "nn.Upsample u 1 1 x y mode=nearest size=(20000,20000)"),
        ("upsample_scale_1e8", "nn.Upsample u 1 1 x y mode=bilinear scale_factor=(1e8,1e8)"),
        ("pad_1e9", "F.pad p 1 1 x y mode=constant pad=(1000000000,0)"),
        ("expand_4e10", "Tensor.expand e 1 1 x y sizes=(1,1,200000,200000)"),
        ("repeat_1e6", "Tensor.repeat r 1 1 x y sizes=(1,1,1000000,1000000)"),
        ("select_dim_3e8", "Tensor.select s 1 1 x y dim=300000000 index=0"),
        ("slice_dims_3e8", "Tensor.slice s 1 1 x y dims=(300000000) starts=(0) ends=(1) steps=(1)"),
        ("zeros_1e12", "torch.zeros z 1 1 x y size=(1000000,1000000)"),
        ("lrn_size_1e8", "nn.LocalResponseNorm n 1 1 x y size=100000000"),  # fine: O(channels), not O(size)
        ("maxpool_kernel_1e5", "nn.MaxPool2d m 1 1 x y kernel_size=(100000,100000) padding=(50000,50000)"),
        ("adaptive_1e5", "nn.AdaptiveAvgPool2d a 1 1 x y output_size=(100000,100000)"),
    ):
        hw = 1 if tag.startswith("expand") else 4  # expand grows size-1 dims only
        text = head + f"3 2\npnnx.Input i 0 1 x #x=(1,1,{hw},{hw})f32\n{line}\npnnx.Output o 1 0 y\n"
        c.model(
            f"sizes/{tag}",
            text,
            None,
            "ok" if tag.startswith("lrn") else "error",
            bin_bytes=None,
            inputs=[np.ones((1, 1, hw, hw), np.float32)],
        )

    _issue_27(c, head, by_name)


def _issue_27(c: Corpus, head: str, by_name: dict[str, Base]) -> None:
    """13. Issue 27: written outputs, the .param writer, exact passes at batch 2 and for
    signed zeros, folded-value budgets, long lines."""
    from kuiper_core import print_ir
    from kuiper_core.pnnx import parse_param

    lin = by_name["tiny_mlp"]
    d = "w27/outputs"
    p = c.write(f"{d}/m.pnnx.param", lin.param)
    c.write(f"{d}/m.pnnx.bin", lin.bin or b"")
    os.mkfifo(c.path(f"{d}/out.fifo"))
    for tag, target, extra, expect in (
        ("kir_over_its_bin", f"{d}/m.pnnx.kir", [], "error"),  # would write m.pnnx.bin
        ("param_over_itself", f"{d}/m.pnnx.param", [], "error"),
        ("bin_as_output", f"{d}/m.pnnx.bin", [], "error"),
        ("in_place", f"{d}/m.pnnx.param", ["--in-place"], "ok"),
        ("fifo", f"{d}/out.fifo", [], "error"),
        ("dev_full", "/dev/full", [], "error"),
        ("directory", d, [], "error"),
        ("missing_folder", f"{d}/no/o.pnnx.param", [], "error"),
    ):
        target_path = target if target.startswith("/") else c.root / target
        c.add(f"w27/opt_{tag}", ["opt", p, "-O2", "-o", target_path, *extra], expect)

    # names and strings .param cannot hold, from the textual IR (which quotes them)
    kir = print_ir(parse_param(lin.param))
    first_name = re.search(r"@(\S+) \(%", kir)
    assert first_name is not None
    bare = first_name.group(1)
    for tag, name, expect in (
        ("surrogate", '"l\\ud800r"', "error"),
        ("space", '"l r"', "error"),
        ("newline", '"l\\nr 1 1 a b"', "error"),
        ("equals", '"a=b"', "error"),
        ("bell", '"l\\u0007r"', "error"),
        ("plain", "plain_name", "ok"),
    ):
        text = kir.replace(f"@{bare} (", f"@{name} (", 1)
        k = c.write(f"w27/names/{tag}/m.kir", text)
        c.write(f"w27/names/{tag}/m.bin", (lin.bin or b"").replace(bare.encode(), bare.encode()))
        c.add(f"w27/names/{tag}/to_param", ["opt", k, "-O1", "-o", c.path(f"w27/names/{tag}/o.pnnx.param")], "either")
        if expect == "error":  # with no weights to look up by the new name, the writer is what refuses
            text = (
                '{\n  (%x) = "pnnx.Input" @in0 () : () -> pnnx.tensor<1x4xf32>\n'
                f'  (%y) = "nn.ReLU" @{name} (%x) : (pnnx.tensor<1x4xf32>) -> pnnx.tensor<1x4xf32>\n'
                '  () = "pnnx.Output" @out (%y) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
            )
            k = c.write(f"w27/names/{tag}/relu.kir", text)
            c.add(
                f"w27/names/{tag}/relu_to_param",
                ["opt", k, "-O1", "-o", c.path(f"w27/names/{tag}/r.pnnx.param")],
                "error",
            )
            c.add(f"w27/names/{tag}/relu_to_kir", ["opt", k, "-O1", "-o", c.path(f"w27/names/{tag}/r.kir")], "ok")
    # (Int32)000…01 is 1; 25 digits past the zeros are out of range
    for tag, digits, expect in (("zeros_then_1", "0" * 40 + "1", "ok"), ("long", "9" * 25, "error")):
        text = (
            '{\n  (%x) = "pnnx.Input" @in0 () : () -> pnnx.tensor<1x4xf32>\n'
            f'  (%y) = "F.leaky_relu" @lr (%x) {{negative_slope:(Int32){digits}}} : '
            "(pnnx.tensor<1x4xf32>) -> pnnx.tensor<1x4xf32>\n"
            '  () = "pnnx.Output" @out (%y) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
        )
        k = c.write(f"w27/int32/{tag}/m.kir", text)
        c.add(
            f"w27/int32/{tag}",
            ["run", k, "--input", c.npy(f"w27/int32/{tag}/x.npy", np.float32([[1, -2, 3, -4]]))],
            expect,
        )
    # a key given twice on a .param line
    twice = (
        head
        + "3 2\npnnx.Input i 0 1 x #x=(1,4)f32\nF.leaky_relu r 1 1 x y negative_slope=0.1 negative_slope=-5.0\npnnx.Output o 1 0 y\n"
    )
    c.model("w27/duplicate_key", twice, None, "error", bin_bytes=None, inputs=[np.float32([[-0.1, 2, -0.3, 4]])])

    # -O1 at batch 2 and with signed zeros: --check compares every bit (exit 1 on a difference)
    expand_as = (
        head + "5 5\npnnx.Input i 0 1 x #x=(1,4)f32\npnnx.Attribute w 0 1 c @data=(1,4)f32 #c=(1,4)f32\n"
        "Tensor.expand_as e 2 1 c x d #c=(1,4)f32 #x=(1,4)f32 #d=(1,4)f32\n"
        "torch.sum s 1 1 d y dim=(0) keepdim=False #d=(1,4)f32 #y=(4)f32\npnnx.Output o 1 0 y #y=(4)f32\n"
    )
    weights = io.BytesIO()
    with zipfile.ZipFile(weights, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("w.data", np.float32([[1, 2, 3, 4]]).tobytes())
    signed = (
        head + "4 3\npnnx.Input i 0 1 x #x=(1,4)f32\n"
        "pnnx.Expression a 1 1 x y expr=add(@0,0.0) #x=(1,4)f32 #y=(1,4)f32\n"
        "pnnx.Expression d 1 1 y z expr=div(1.0,@0) #y=(1,4)f32 #z=(1,4)f32\npnnx.Output o 1 0 z #z=(1,4)f32\n"
    )
    for tag, text, b, x in (
        ("expand_as_batch2", expand_as, weights.getvalue(), np.ones((2, 4), np.float32)),
        ("signed_zero", signed, None, np.float32([[-0.0, 0.0, np.inf, np.nan]])),
    ):
        m = c.write(f"w27/exact/{tag}/m.pnnx.param", text)
        if b is not None:
            c.write(f"w27/exact/{tag}/m.pnnx.bin", b)
        xin = c.npy(f"w27/exact/{tag}/x.npy", x)
        for level in ("-O1", "-O2"):
            out = c.path(f"w27/exact/{tag}/o{level}.pnnx.param")
            c.add(f"w27/exact/{tag}{level}", ["opt", m, level, "-o", out, "--check", xin], "ok")

    # values folded at build: a kilobyte of .param, 128 MiB folded; over a lowered budget
    sys.path.insert(0, str(ROOT / "tests"))
    from hostile import folding_model

    text, b = folding_model(8, 2048)
    m = c.write("w27/folding/m.pnnx.param", text)
    c.write("w27/folding/m.pnnx.bin", b)
    xin = c.npy("w27/folding/x.npy", np.float32([1]))
    c.add("w27/folding/within", ["run", m, "--input", xin], "ok")
    c.add("w27/folding/over", ["--limit", "max_folded_bytes=50000000", "run", m, "--input", xin], "error")
    c.add(
        "w27/folding/opt_over",
        ["--limit", "max_folded_bytes=50000000", "opt", m, "-o", c.path("w27/folding/o.kir")],
        "error",
    )

    # a 0.97 MB line of 40,000 operands, each named by `$` and annotated by `#`: seconds, not minutes
    n = 40_000
    big = (
        f"torch.cat cat {n} 1 {' '.join('x' for _ in range(n))} y dim=0 "
        + " ".join(f"$a{k}=x" for k in range(n))
        + " "
        + " ".join("#x=(1)f32" for _ in range(n))
        + f" #y=({n})f32"
    )
    m = c.write("w27/long_line/m.pnnx.param", head + f"3 3\npnnx.Input i 0 1 x #x=(1)f32\n{big}\npnnx.Output o 1 0 y\n")
    c.add("w27/long_line/inspect", ["inspect", m], "ok")


# -- running -----------------------------------------------------------------------------------------
def _compare(case: dict) -> str | None:
    for got, want in zip(case["outputs"], case["expected"]):
        if not Path(got).exists():
            return f"{got} was not written"
        y, ref = np.load(got, allow_pickle=False), np.load(want, allow_pickle=False)
        if y.shape != ref.shape:
            return f"shape {y.shape} != {ref.shape}"
        if ref.dtype.kind in "biuc" or ref.dtype.kind == "b":
            if not np.array_equal(y, ref):
                return "values differ"
            continue
        bound = 1e-4 * max(1.0, float(np.nanmax(np.abs(ref))) if ref.size and np.isfinite(ref).any() else 1.0)
        if not np.array_equal(np.isnan(y), np.isnan(ref)):
            return "NaN positions differ"
        diff = np.abs(y.astype(np.float64) - ref.astype(np.float64))
        err = float(np.nanmax(diff)) if diff.size and np.isfinite(diff).any() else 0.0
        if err > bound:
            return f"max error {err:.3g} > {bound:.3g}"
    return None


def _run_one(case: dict) -> dict:
    sys.path.insert(0, str(ROOT))
    from kuiper_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(case["argv"])
    except SystemExit as e:  # argparse
        code = int(e.code or 0)
    except BaseException as e:  # noqa: BLE001  -- a finding
        return {"kind": "escaped", "msg": f"{type(e).__name__}: {e}"[:300]}
    seconds = time.perf_counter() - t0
    stderr = err.getvalue()
    first = stderr.strip().split("\n")[0][:300] if stderr.strip() else ""
    expect = case["expect"]
    if code == 1:
        return {"kind": "internal", "msg": first, "seconds": seconds}
    if "Traceback" in stderr:
        return {"kind": "traceback", "msg": first, "seconds": seconds}
    if len(stderr) > 5000:
        return {"kind": "long-message", "msg": f"{len(stderr):,} characters: {first[:100]}", "seconds": seconds}
    if code == 2:
        if not stderr.startswith("error:") and "error:" not in first:
            return {"kind": "unclear", "msg": first, "seconds": seconds}
        if "ran out of memory" in stderr:
            return {"kind": "oom-net", "msg": first, "seconds": seconds}
        return {"kind": "refused" if expect in ("ok", "match") else "error", "msg": first, "seconds": seconds}
    if code == 0:
        if expect == "error":
            return {"kind": "accepted", "msg": out.getvalue().strip()[:200], "seconds": seconds}
        if expect == "match":
            bad = _compare(case)
            if bad is not None:
                return {"kind": "wrong", "msg": bad, "seconds": seconds}
        if case["argv"][0] == "opt":  # `--check`: the optimised model must give the original's answer
            m = re.search(r"max \|optimised − original\| = (\S+)", out.getvalue())
            if m is not None and not float(m.group(1)) <= OPT_TOLERANCE:
                return {"kind": "wrong", "msg": f"the passes changed the answer: {m.group(0)}", "seconds": seconds}
        return {"kind": "ok", "msg": "", "seconds": seconds}
    return {"kind": f"exit:{code}", "msg": first, "seconds": seconds}


FINE = {"ok", "error"}
OPT_TOLERANCE = 1e-3  # the corpus's inputs are small: passes only reorder float arithmetic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="build the corpus in this directory and keep it")
    ap.add_argument("-k", action="append", default=[], help="only cases whose name contains this (repeatable)")
    ap.add_argument("--mem-mb", type=int, default=4000, help="worker address-space limit (MB)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one case may take before it is a hang")
    ap.add_argument("--slow", type=float, default=10.0, help="report cases slower than this")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each finding as it comes")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--manifest", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        cases = json.loads(Path(args.manifest).read_text())
        serve(cases, args.worker, args.mem_mb, _run_one)
        return 0

    tmp = None
    if args.keep:
        root = Path(args.keep)
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="kx_hostile_")
        root = Path(tmp.name)
    try:
        corpus = Corpus(root)
        build(corpus)
        cases = [c for c in corpus.cases if not args.k or any(k in c.name for k in args.k)]
        for i, c in enumerate(cases):
            c.id = i
        manifest = root / "manifest.json"
        manifest.write_text(json.dumps([asdict(c) for c in cases]))
        print(f"{len(cases)} cases in {root}", flush=True)

        def worker_argv(start: int) -> list[str]:
            return [
                sys.executable,
                __file__,
                "--worker",
                str(start),
                "--manifest",
                str(manifest),
                "--mem-mb",
                str(args.mem_mb),
            ]

        def show(r: dict) -> None:
            if args.verbose and (r["kind"] not in FINE or r["seconds"] > args.slow):
                print(f"  {r['kind']:12} {cases[r['id']].name}: {r['msg'][:160]}", flush=True)

        t0 = time.time()
        results = supervise(len(cases), worker_argv, timeout=args.timeout, on_result=show)
        kinds = Counter(r["kind"] for r in results.values())
        findings = [
            (cases[i], r) for i, r in sorted(results.items()) if r["kind"] not in FINE or r["seconds"] > args.slow
        ]
        print(
            f"\n{len(cases)} cases in {time.time() - t0:.0f}s: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
        )
        by_category = Counter(c.name.split("/")[0] for c in cases)
        print("by category: " + ", ".join(f"{k} {n}" for k, n in sorted(by_category.items())))
        print(f"{len(findings)} findings")
        for case, r in findings:
            print(f"  {r['kind']:12} {case.name} (expected {case.expect}, {r['seconds']:.1f}s): {r['msg'][:200]}")
        return 1 if findings else 0
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
