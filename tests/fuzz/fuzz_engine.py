"""Hypothesis fuzz cases for the engine, run by tests/test_fuzz.py in a subprocess under an
address-space limit (not collected directly: the file name does not start with test_).

Only a KuiperError may come out of any case, no case may take more than CASE_SECONDS, and a
LimitError from the runtime's out-of-memory net (a size no check foresaw) counts as a failure:
sizes must be refused before they are allocated.
"""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper_core import expression as ex
from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.expression.functions import FUNCTIONS
from kuiper_core.pnnx import load_weights, parse_param_bytes
from kuiper_core.runtime import RuntimeGraph

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "tests" / "data" / "ops"
SAMPLES = ROOT / "sample_models"
CASE_SECONDS = 3.0
# Small limits: a hostile size is refused long before the subprocess's memory limit.
FUZZ_LIMITS = limits.DEFAULT.replace(max_tensor_elements=1 << 22, max_planned_bytes=1 << 28)

SETTINGS = dict(
    derandomize=True,  # a fixed seed: CI sees the same cases every run
    database=None,
    deadline=None,  # timed by hand (CASE_SECONDS), with the case in the message
    suppress_health_check=list(HealthCheck),
)

# The op cases at optlevel 2, 0 and 1 (prim::/aten:: layers, values computed at run time)
CASES = sorted(p.parent for d in ("ops", "ops_o0", "ops_o1") for p in (OPS.parent / d).glob("*/model.pnnx.param"))
MODELS = [(c / "model.pnnx.param", c / "model.pnnx.bin", c / "inputs.npz") for c in CASES]
MODELS += [
    (SAMPLES / f"{n}.pnnx.param", SAMPLES / f"{n}.pnnx.bin", SAMPLES / f"{n}.input.npy")
    for n in ("tiny_mlp", "digits_cnn", "expr_zoo")
]

HUGE = "9" * 4400
HOSTILE_NUMBERS = [
    "0",
    "-1",
    "1",
    "2",
    "-2",
    "7",
    "1000",
    "20000",
    "300000000",
    "-300000000",
    "2147483647",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    HUGE,
    "-" + HUGE,
    "0.0",
    "-0.0",
    "0.5",
    "1e308",
    "1e309",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "1e-45",
    "3e8",
]
HOSTILE_TOKENS = HOSTILE_NUMBERS + [
    "",
    "None",
    "True",
    "False",
    "()",
    "(,)",
    "(1,)",
    "[]",
    "(()",
    "(nan)",
    "abc",
    "%x",
    "@0",
    "?",
    "(?,?)",
    "\0",
    "\t",
    "\ufeff",
    "é",
    "🙂",
    "\u202e",
    "x" * 300,
]
DTYPES = ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", "c64", "c128", "f99", ""]


def _timed(what: str, fn) -> None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    try:
        fn()
    except KuiperError as e:
        assert "ran out of memory" not in str(e), f"{what}: a size was allocated, not refused first: {e}"
    dt = time.perf_counter() - t0
    assert dt < CASE_SECONDS, f"{what} took {dt:.1f} s"


def _inputs(path: Path) -> list[np.ndarray]:
    if path.suffix == ".npy":
        return [np.load(path)]
    with np.load(path) as z:
        return [z[f"in{i}"] for i in range(len(z.files))]


def _run(param: bytes, bin_source: Path | bytes, inputs: list[np.ndarray]) -> None:
    with limits.use(FUZZ_LIMITS):
        graph = parse_param_bytes(param, "fuzz.pnnx.param")
        load_weights(graph, bin_source if isinstance(bin_source, bytes) else bin_source, name="fuzz.pnnx.bin")
        rg = RuntimeGraph.from_graph(graph).build()
    for y in rg.forward(*inputs):
        if isinstance(y, np.ndarray) and y.size and y.dtype.kind in "biuf":
            float(y.min())  # what the CLI prints: must not hang on a huge view
    for _ in rg.steps(*inputs):
        pass


# -- mutated .param text ------------------------------------------------------------------------------
KINDS = ("token", "value", "shape", "chars", "line", "truncate", "counts", "format")


@st.composite
def mutated_param(
    draw: st.DrawFn, models: list[tuple[Path, Path, Path]] = MODELS, kinds: tuple[str, ...] = KINDS, most: int = 3
) -> tuple[bytes, Path, Path, str]:
    param, bin_path, inputs = draw(st.sampled_from(models))
    text = param.read_text()
    lines = text.split("\n")
    done = []
    for _ in range(draw(st.integers(1, most))):
        kind = draw(st.sampled_from(kinds))
        while len(lines) < 2:  # a truncation or deletion before may have left one line or none
            lines.append("")
        body = [i for i in range(2, len(lines)) if lines[i].strip()]
        i = draw(st.sampled_from(body)) if body else len(lines) - 1
        toks = lines[i].split(" ")
        if kind == "token":
            j = draw(st.integers(0, len(toks) - 1))
            toks[j] = draw(st.sampled_from(HOSTILE_TOKENS))
        elif kind == "value":  # key=value, @w=(...)dtype or #x=(...)dtype with a hostile value
            keyed = [j for j, t in enumerate(toks) if "=" in t] or [len(toks) - 1]
            j = draw(st.sampled_from(keyed))
            key = toks[j].split("=", 1)[0] or "k"
            items = draw(st.lists(st.sampled_from(HOSTILE_NUMBERS + ["?", "%n", ""]), max_size=9))
            value = draw(st.sampled_from([draw(st.sampled_from(HOSTILE_TOKENS)), "(" + ",".join(items) + ")"]))
            if key[0] in "@#":
                value = "(" + ",".join(items) + ")" + draw(st.sampled_from(DTYPES))
            toks[j] = f"{key}={value}"
        elif kind == "shape":  # declare a big or odd shape on some operand
            dims = draw(st.lists(st.sampled_from(["0", "1", "2", "3", "16000", "65536", "?", "%n"]), max_size=9))
            names = [t for t in toks[4:] if t and "=" not in t] or ["0"]
            toks.append(f"#{draw(st.sampled_from(names))}=({','.join(dims)}){draw(st.sampled_from(DTYPES))}")
        elif kind == "chars":
            pos = draw(st.integers(0, len(lines[i])))
            junk = draw(st.text(alphabet="()=,#@$%?-.0123456789 \t\r\0eé🙂", max_size=8))
            cut = draw(st.integers(0, 4))
            lines[i] = lines[i][:pos] + junk + lines[i][pos + cut :]
            toks = lines[i].split(" ")
        elif kind == "line":
            j = draw(st.sampled_from(body)) if body else i
            op = draw(st.sampled_from(["dup", "del", "swap"]))
            if op == "dup":
                lines.insert(j, lines[i])
            elif op == "del":
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            toks = lines[i].split(" ") if i < len(lines) else [""]
        elif kind == "truncate":
            cut = draw(st.integers(0, len(text)))
            lines = text[:cut].split("\n")
            i = 0
            toks = lines[0].split(" ")
        elif kind == "counts":
            lines += [""] * (2 - len(lines))  # (after a truncation)
            lines[1] = f"{draw(st.sampled_from(HOSTILE_NUMBERS))} {draw(st.sampled_from(HOSTILE_NUMBERS))}"
            toks = lines[i].split(" ") if i < len(lines) else [""]
        else:  # CRLF, tabs, a byte-order mark
            fmt = draw(st.sampled_from(["crlf", "tabs", "bom"]))
            joined = "\n".join(lines)
            joined = {
                "crlf": joined.replace("\n", "\r\n"),
                "tabs": joined.replace(" ", "\t"),
                "bom": "\ufeff" + joined,
            }[fmt]
            lines = joined.split("\n")
            i = 0
            toks = lines[0].split(" ")
        if i < len(lines) and kind in ("token", "value", "shape"):
            lines[i] = " ".join(toks)
        done.append(kind)
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:  # now and then, bytes that are not UTF-8
        pos = draw(st.integers(0, len(raw)))
        raw = raw[:pos] + b"\xff\xfe" + raw[pos:]
    return raw, bin_path, inputs, f"{param.parent.name}/{param.name} {done}"


@settings(max_examples=400, **SETTINGS)
@given(mutated_param())
def test_mutated_param(case: tuple[bytes, Path, Path, str]) -> None:
    raw, bin_path, inputs, what = case
    _timed(what, lambda: _run(raw, bin_path, _inputs(inputs)))


@st.composite
def mildly_mutated_param(draw: st.DrawFn) -> tuple[bytes, Path, Path, str]:
    """A real export with one number of one param nudged (most still run): what the passes
    must keep the meaning of. Hostile values are test_mutated_param's business."""
    param, bin_path, inputs = draw(st.sampled_from(MODELS))
    lines = param.read_text().split("\n")
    spots = [
        (i, j)
        for i, line in enumerate(lines[2:], 2)
        for j, t in enumerate(line.split(" "))
        if "=" in t and t[0] not in "@#$" and any(c.isdigit() for c in t)
    ]
    what = f"{param.parent.name} intact"
    if spots and draw(st.integers(0, 3)):
        i, j = draw(st.sampled_from(spots))
        toks = lines[i].split(" ")
        key, value = toks[j].split("=", 1)
        digits = [k for k, c in enumerate(value) if c.isdigit()]
        k = draw(st.sampled_from(digits))
        value = value[:k] + str(draw(st.integers(0, 9))) + value[k + 1 :]
        toks[j] = f"{key}={value}"
        lines[i] = " ".join(toks)
        what = f"{param.parent.name} {toks[j]}"
    return "\n".join(lines).encode(), bin_path, inputs, what


@settings(max_examples=150, **SETTINGS)
@given(mildly_mutated_param())
def test_passes_on_mutated_param(case: tuple[bytes, Path, Path, str]) -> None:
    """`kuiper opt` on hostile graphs: a mutant that runs must give the same answer optimised."""
    from kuiper_core.passes import optimize

    raw, bin_path, inputs, what = case
    xs = _inputs(inputs)
    state: dict[str, object] = {}

    def go() -> None:
        with limits.use(FUZZ_LIMITS):
            graph = parse_param_bytes(raw, "fuzz.pnnx.param")
            load_weights(graph, bin_path, name="fuzz.pnnx.bin")
            with np.errstate(all="ignore"):
                state["before"] = RuntimeGraph.from_graph(graph).build().forward(*xs)
                state["after"] = RuntimeGraph.from_graph(optimize(graph, 2).after).build().forward(*xs)

    _timed(what + " -O2", go)
    if "after" in state:
        for a, b in zip(state["before"], state["after"]):  # type: ignore[call-overload]
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, a.dtype, b.shape, b.dtype)
            if a.dtype.kind in "fc":
                assert np.allclose(a, b, rtol=1e-4, atol=1e-4, equal_nan=True), what
            else:
                assert np.array_equal(a, b), what


# -- mutated .bin zips ----------------------------------------------------------------------------------
WEIGHTED = [m for m in MODELS if zipfile.ZipFile(m[1]).namelist()][:80]


@st.composite
def mutated_bin(draw: st.DrawFn, models: list[tuple[Path, Path, Path]] = WEIGHTED) -> tuple[bytes, bytes, Path, str]:
    param, bin_path, inputs = draw(st.sampled_from(models))
    data = bytearray(bin_path.read_bytes())
    done = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["byte", "field", "truncate", "insert", "append", "duplicate"]))
        if kind == "byte" and data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "field":  # a header field: flags, method, sizes, name length, offsets
            sigs = [
                (b"PK\x03\x04", [6, 8, 18, 22, 26, 28]),
                (b"PK\x01\x02", [8, 10, 20, 24, 28, 30, 42]),
                (b"PK\x05\x06", [8, 10, 12, 16]),
                (b"PK\x06\x06", [24, 32, 40, 48]),
            ]
            sig, offsets = draw(st.sampled_from(sigs))
            at = bytes(data).find(sig)
            if at >= 0:
                off = at + draw(st.sampled_from(offsets))
                width = draw(st.sampled_from([2, 4]))
                value = draw(st.sampled_from([0, 1, 8, 0x21, 0x41, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]))
                data[off : off + width] = (value % (1 << (8 * width))).to_bytes(width, "little")[
                    : len(data[off : off + width])
                ]
        elif kind == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "insert":
            pos = draw(st.integers(0, len(data)))
            data[pos:pos] = draw(st.binary(max_size=16))
        elif kind == "append":
            data += draw(st.binary(max_size=64))
        else:
            data += bin_path.read_bytes()
        done.append(kind)
    return param.read_bytes(), bytes(data), inputs, f"{param.parent.name} .bin {done}"


@settings(max_examples=300, **SETTINGS)
@given(mutated_bin())
def test_mutated_bin(case: tuple[bytes, bytes, Path, str]) -> None:
    param, data, inputs, what = case
    _timed(what, lambda: _run(param, data, _inputs(inputs)))


# -- random expressions ------------------------------------------------------------------------------------
NAMES = sorted(FUNCTIONS)
leaves = st.one_of(
    st.integers(0, 3).map(lambda i: f"@{i}"),
    st.sampled_from(["@300", "@3000000", "@" + HUGE]),
    st.sampled_from(HOSTILE_NUMBERS[:16] + ["1.5", "-2.5", "1e-30", "1.0e+00+2.0e+00j", "0", "0", "-0"]),
    st.sampled_from(["True", "False", "None", "torch.float", "nosuch"]),
)


def _call(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(st.sampled_from(NAMES), st.lists(children, min_size=0, max_size=3)).map(
            lambda t: f"{t[0]}({','.join(t[1])})"
        ),
        st.lists(children, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
    )


expressions = st.one_of(
    st.recursive(leaves, _call, max_leaves=12),
    st.text(alphabet="@()[],0123456789.-+eaddmulnegsize_ \t", max_size=30),
    st.integers(1, 3000).map(lambda n: "neg(" * n + "@0" + ")" * n),
)

DTYPE_CHOICES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]
SHAPES = [(), (0,), (1,), (3,), (2, 3), (1, 3), (3, 1), (2, 0, 3), (4, 1, 1)]


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(DTYPE_CHOICES)))
    shape = draw(st.sampled_from(SHAPES))
    n = int(np.prod(shape))
    if dtype.kind == "f":
        values = draw(
            st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e30, np.nan, np.inf, -np.inf]), min_size=n, max_size=n)
        )
    elif dtype.kind == "b":
        values = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    else:
        info = np.iinfo(dtype)
        values = draw(
            st.lists(st.sampled_from([0, 1, -1 if info.min < 0 else 2, info.min, info.max]), min_size=n, max_size=n)
        )
    return np.array(values, dtype=dtype).reshape(shape)


@settings(max_examples=500, **SETTINGS)
@given(expressions, st.lists(arrays(), max_size=4))
def test_random_expressions(text: str, inputs: list[np.ndarray]) -> None:
    """Plan and stack machine: only KuiperErrors, and the same value whenever both succeed."""
    results: list[object] = []

    def evaluate() -> None:
        with limits.use(FUZZ_LIMITS):
            with np.errstate(all="ignore"):
                results.append(ex.evaluate(text, inputs))
                results.append(ex.evaluate_traced(text, inputs).result)

    _timed(f"expression {text[:80]!r} on {[(a.dtype, a.shape) for a in inputs]}", evaluate)
    if len(results) == 2:
        fast, traced = results
        if isinstance(fast, np.ndarray) or isinstance(traced, np.ndarray):
            fast, traced = np.asarray(fast), np.asarray(traced)
            assert fast.shape == traced.shape and fast.dtype == traced.dtype, (text, fast, traced)
            assert np.array_equal(fast, traced, equal_nan=fast.dtype.kind in "fc"), (text, fast, traced)
        else:
            assert repr(fast) == repr(traced), (text, fast, traced)


# -- .npy and .npz readers ---------------------------------------------------------------------------------
@settings(max_examples=200, **SETTINGS)
@given(
    st.binary(max_size=200),
    st.sampled_from(["f4", "<i8", ">f8", "|b1", "<c16", "|O", "V8", "<U3"]),
    st.lists(st.sampled_from([0, 1, 3, 65536, 1 << 40, -1]), max_size=4),
    st.integers(0, 3),
)
def test_npy_and_npz_readers(tail: bytes, dtype: str, shape: list[int], cut: int) -> None:
    from kuiper_core.npy import read_npy, read_npz

    dims = "".join(f"{d}," for d in shape)
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': ({dims}), }}"
    raw = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + tail
    raw = raw[: len(raw) - cut]
    _timed("npy", lambda: read_npy(raw, "fuzz.npy", FUZZ_LIMITS))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.npy", raw)
    _timed("npz", lambda: read_npz(buf.getvalue(), "fuzz.npz", FUZZ_LIMITS))


# -- what the Forward page draws of any tensor --------------------------------------------------------------
@settings(max_examples=200, **SETTINGS)
@given(
    st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_, np.complex64]),
    st.sampled_from([(1, 3, 4, 4), (2, 1, 5, 3), (1, 0, 4, 4), (1, 2, 0, 2), (3, 40, 2, 2), (1, 1, 1, 1)]),
    st.lists(
        st.sampled_from([0.0, 1.0, -1.0, 1e308, -1e308, 3e38, np.nan, np.inf, -np.inf, 1e-320]), min_size=1, max_size=6
    ),
)
def test_tensor_views(dtype: type, shape: tuple[int, ...], values: list[float]) -> None:
    from kuiper_core.explore import tensors as T

    n = int(np.prod(shape))
    with np.errstate(all="ignore"):
        a = np.resize(np.array(values), n).astype(dtype).reshape(shape)
        T.tensor_stats(a)
        T.histogram_table(a)
        mosaic, _ = T.channel_grid(a)
        T.npy_bytes(a)
    assert mosaic.dtype == np.uint8
