"""Small hostile uploads of issue 35, made here rather than committed: pickles with cycles,
shared children and class bombs, TorchScript archives with a second folder or an inflating
`code/` member, zips listing more entries than they hold, ONNX models whose external data is
named many times or hidden behind an overlong varint, or whose shapes list millions of dims;
ncnn `.param` files whose shape expressions overflow; tiny files whose one operator works on
broadcast views for minutes (work bombs).

    python tools/hostile_uploads.py OUT_DIR      # writes every case into OUT_DIR

The tests (tests/test_robustness_uploads.py) import the functions and make each file in a
temporary folder.
"""

from __future__ import annotations

import io
import struct
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACED = ROOT / "tests" / "data" / "debug_models" / "small_cnn.pt"  # a real torch.jit.trace archive


# -- pickles (protocol 2 opcodes written by hand: nothing here is importable) ----------------------------
def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _text(s: str) -> bytes:
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _put(i: int) -> bytes:
    return b"r" + struct.pack("<I", i)  # LONG_BINPUT


def _get(i: int) -> bytes:
    return b"j" + struct.pack("<I", i)  # LONG_BINGET


def pickle_cycle() -> bytes:
    """A module whose state holds itself under two keys: `M.state = {a: M, b: M}` (45 bytes)."""
    body = b"}(" + _text("a") + _get(0) + _text("b") + _get(0) + b"u"  # MARK ... SETITEMS
    return b"\x80\x02" + _global("__torch__.m", "M") + b")\x81" + _put(0) + body + b"b."  # NEWOBJ, BUILD


def pickle_dag(n: int = 70) -> bytes:
    """n modules, each holding the next one twice: 2^n paths, n objects."""
    out = [b"\x80\x02", _global("__torch__.m", "M"), _put(0), b"0"]  # the class memoised, popped
    out += [_get(0), b")\x81}b", _put(1)]  # the last module (an empty state)
    for i in range(1, n):
        out += [_get(0), b")\x81", b"}(", _text("a"), _get(i), _text("b"), _get(i), b"ub", _put(i + 1)]
    out.append(b".")
    return b"".join(out)


def pickle_class_bomb(n: int, name_chars: int = 1) -> bytes:
    """n STACK_GLOBALs of one memoised (module, name) pair, the module `name_chars` long:
    a reader making a class per STACK_GLOBAL makes n of them."""
    module = "__torch__." + "m" * name_chars
    out = [b"\x80\x04", _text(module), _put(0), b"0", _text("M"), _put(1), b"0", b"]("]
    out += [_get(0) + _get(1) + b"\x93"] * n  # STACK_GLOBAL
    out.append(b"e.")
    return b"".join(out)


def pickle_distinct_classes(n: int) -> bytes:
    """n distinct globals (each a new (module, name))."""
    out = [b"\x80\x02]("] + [_global("__torch__.m", f"C{i}") for i in range(n)] + [b"e."]
    return b"".join(out)


def pickle_stateless() -> bytes:
    """A module made with NEWOBJ and no BUILD: an object with no state at all."""
    return b"\x80\x02" + _global("__torch__.m", "M") + b")\x81."


# -- TorchScript archives ---------------------------------------------------------------------------
def torchscript_with(extra: dict[str, bytes], base: Path = TRACED, replace: dict[str, bytes] | None = None) -> bytes:
    """The traced archive `base` with `extra` entries inserted after its first one (so libtorch
    still reads the base's folder) and members of its own folder replaced by `replace`
    (names relative to that folder)."""
    replace = replace or {}
    buf = io.BytesIO()
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
        infos = src.infolist()
        folder = infos[0].filename.split("/", 1)[0]
        for i, info in enumerate(infos):
            rel = info.filename.split("/", 1)[1]
            out.writestr(info.filename, replace.get(rel, src.read(info)))
            if i == 0:
                for name, data in extra.items():
                    out.writestr(name, data)
        for rel, data in replace.items():
            if f"{folder}/{rel}" not in src.namelist():
                out.writestr(f"{folder}/{rel}", data)
    return buf.getvalue()


def second_folder_pt(pkl: bytes | None = None) -> bytes:
    """A real traced .pt plus `evil/data.pkl` (a self-holding module unless `pkl`) listed
    before the real data.pkl: libtorch reads the first entry's folder, not this one."""
    return torchscript_with({"evil/data.pkl": pkl if pkl is not None else pickle_cycle()})


def inflating_code_pt(inflated: int) -> bytes:
    """A real traced .pt with a `code/` member of `inflated` bytes of spaces, deflated."""
    folder = zipfile.ZipFile(TRACED).infolist()[0].filename.split("/", 1)[0]
    buf = io.BytesIO(torchscript_with({}))
    with zipfile.ZipFile(buf, "a") as z:
        info = zipfile.ZipInfo(f"{folder}/code/__torch__/bomb.py")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            chunk = b" " * (1 << 20)
            left = inflated
            while left > 0:
                f.write(chunk[: min(left, len(chunk))])
                left -= len(chunk)
    return buf.getvalue()


# -- zips ----------------------------------------------------------------------------------------------
def zip_listing(n: int, claimed: int | None = None) -> bytes:
    """A zip whose central directory holds `n` entries (all pointing at one empty member) and
    whose end record says `claimed` (default n; at most 65,535 unless zip64 is written)."""
    local = b"PK\x03\x04" + struct.pack("<5H3L2H", 20, 0, 0, 0, 0, 0, 0, 0, 1, 0) + b"a"
    entry = b"PK\x01\x02" + struct.pack("<6H3L5H2L", 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0) + b"a"
    directory = entry * n
    count = n if claimed is None else claimed
    size, offset = len(directory), len(local)
    if count > 0xFFFF:  # zip64 end record + locator, then the classic one pointing at them
        z64_at = offset + size
        z64 = b"PK\x06\x06" + struct.pack("<QHHLLQQQQ", 44, 45, 45, 0, 0, count, count, size, offset)
        locator = b"PK\x06\x07" + struct.pack("<LQL", 0, z64_at, 1)
        end = b"PK\x05\x06" + struct.pack("<4H2LH", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
        return local + directory + z64 + locator + end
    end = b"PK\x05\x06" + struct.pack("<4H2LH", 0, 0, count, count, size, offset, 0)
    return local + directory + end


# -- ONNX ----------------------------------------------------------------------------------------------
def onnx_shared_external(tensors: int = 200, data_bytes: int = 16 << 20, location: str = "w.data") -> bytes:
    """An .onnx (about 11 KB) whose `tensors` initializers each name all of one external file
    of `data_bytes` (write that file beside it: b"\\0" * data_bytes)."""
    import onnx
    from onnx import TensorProto, helper

    inits = []
    for i in range(tensors):
        t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[data_bytes // 4])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", str(data_bytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        inits.append(t)
    nodes = [helper.make_node("Identity", ["w0"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [data_bytes // 4])], inits
    )
    return onnx.helper.make_model(graph).SerializeToString()


def _varint(value: int, pad_to: int = 0) -> bytes:
    """A protobuf varint, written on `pad_to` bytes when longer than needed (overlong)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | 0x80)
        if value == 0:
            break
    while len(out) < pad_to:
        out.append(0x80)
    out[-1] &= 0x7F
    return bytes(out)


def onnx_hidden_external(location: str = "../../etc/passwd") -> bytes:
    """An .onnx with one external initializer whose `location` key's length is an overlong
    varint: a byte search for b"\\n\\x08location" misses it, protobuf reads it. Written from
    the inside out: the entry, the tensor (field 13 of it), the graph (field 5), the model (7)."""
    import onnx
    from onnx import TensorProto, helper

    value = location.encode()
    entry = b"\n" + _varint(8, pad_to=3) + b"location" + b"\x12" + _varint(len(value)) + value
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.data_location = TensorProto.EXTERNAL
    tensor = t.SerializeToString() + b"\x6a" + _varint(len(entry)) + entry
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [], [helper.make_tensor_value_info("y", 1, [4])]
    )
    graph_bytes = graph.SerializeToString() + b"\x2a" + _varint(len(tensor)) + tensor
    model = onnx.helper.make_model(helper.make_graph([], "empty", [], []))
    model.ClearField("graph")
    data = model.SerializeToString() + b"\x3a" + _varint(len(graph_bytes)) + graph_bytes
    assert b"\n\x08location" not in data
    return data


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def onnx_dims_bomb(dims: int = 20_000_000, external: bool = True) -> bytes:
    """An .onnx (2 bytes per dim) of one ReLU whose graph lists a value_info whose shape has
    `dims` empty dims: protobuf makes an object of each (40 MB -> 1.6 GB at 20,000,000). With
    `external`, its one initializer names 16 bytes in `w.data` (the app then parses the model
    to read them in)."""
    import onnx
    from onnx import TensorProto, helper

    shape = b"\x0a\x00" * dims  # TensorShapeProto.dim, empty Dimensions
    value_info = _field(1, b"v") + _field(2, _field(1, b"\x08\x01" + _field(2, shape)))  # name, type.tensor_type
    inits = []
    if external:
        t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.data"), ("offset", "0"), ("length", "16")):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        inits.append(t)
    x = "w" if external else "x"
    graph = helper.make_graph(
        [helper.make_node("Relu", [x], ["y"])],
        "g",
        [] if external else [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        inits,
    )
    model = onnx.helper.make_model(helper.make_graph([], "empty", [], []))
    model.ClearField("graph")
    return model.SerializeToString() + _field(7, graph.SerializeToString() + _field(13, value_info))


def onnx_nested_types(levels: int) -> bytes:
    """An .onnx whose one value_info is a sequence of a sequence … (`levels` deep) of f32
    tensors: messages nested 2 * levels + 4 deep."""
    import onnx
    from onnx import helper

    kind = _field(1, b"\x08\x01")  # TypeProto.tensor_type, f32
    for _ in range(levels):
        kind = _field(4, _field(1, kind))  # TypeProto.sequence_type.elem_type
    value_info = _field(1, b"v") + _field(2, kind)
    model = onnx.helper.make_model(helper.make_graph([], "empty", [], []))
    model.ClearField("graph")
    return model.SerializeToString() + _field(
        7, helper.make_graph([], "g", [], []).SerializeToString() + _field(13, value_info)
    )


PHISH_NODE = "[Session expired: log in again](https://evil.example/login)"


def onnx_named_chain(adds: int = 12, elements: int = 1 << 26, name: str = PHISH_NODE) -> bytes:
    """An .onnx (2 KB) adding `adds` times to a ConstantOfShape of `elements` floats, reduced
    and added to the input, every node named `name`: pnnx folds it away, and onnxruntime with
    every value kept (the conversion check) runs out of memory quoting a node's name. Converted
    with max_planned_bytes=256 MiB, the check's note carried the link to the app's sidebar."""
    import numpy as np
    from onnx import helper, numpy_helper

    one = numpy_helper.from_array(np.array([1.0], np.float32))
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c0"], name=f"{name} 0", value=one)]
    nodes += [helper.make_node("Add", [f"c{i}", "one"], [f"c{i + 1}"], name=f"{name} {i + 1}") for i in range(adds)]
    nodes += [
        helper.make_node("ReduceMax", [f"c{adds}"], ["r"], keepdims=0, name=f"{name} r"),
        helper.make_node("Add", ["x", "r"], ["y"], name=f"{name} y"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", 1, [1, 4])],
        [helper.make_tensor_value_info("y", 1, [1, 4])],
        [
            numpy_helper.from_array(np.array([elements], np.int64), "s"),
            numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


# -- ncnn -----------------------------------------------------------------------------------------------
NCNN_MLP = ROOT / "tests" / "data" / "ncnn" / "tiny_mlp.fp32.ncnn.param"  # pnnx's ncnn files of tiny_mlp


def ncnn_shape_expression(expr: str) -> bytes:
    """tiny_mlp's .ncnn.param with its Reshape (`0=64 1=1`) given the shape expression `expr`."""
    text = NCNN_MLP.read_text()
    assert "0=64 1=1\n" in text
    return text.replace("0=64 1=1\n", f'6="{expr}"\n', 1).encode()


def ncnn_product_bomb(n: int = 100_000) -> str:
    """A shape expression of `n` nested products of 99999999: an integer of 8n digits, each
    product costing more than the last (about 1 MiB of text at 100,000)."""
    return "*(" * n + "99999999," * n + "2" + ")" * n


# -- work bombs: every tensor within max_tensor_elements, the work or a work buffer not -------------------
def _pnnx(lines: list[str]) -> bytes:
    return ("7767517\n" + f"{len(lines)} {len(lines) + 4}\n" + "\n".join(lines) + "\n").encode()


def _one(shape: str) -> str:
    return f"pnnx.Input in 0 1 0 #0=({shape})f32"


def _expand(name: str, out: int, shape: str, of: str = "1,1") -> str:
    """A broadcast view of the input's one number: no memory, any size within the limits."""
    return f"Tensor.expand {name} 1 1 0 {out} sizes=({shape}) #0=({of})f32 #{out}=({shape})f32"


def _max_pool(n: int, k: int, indices: bool) -> bytes:
    o = n - k + 1
    tops, outs = ("1 2 1 2 3", f"2 0 2 3 #2=(1,1,{o},{o})f32 #3=(1,1,{o},{o})i64") if indices else ("1 1 1 2", "1 0 2")
    return _pnnx([
        _one("1,1,1,1"), _expand("e", 1, f"1,1,{n},{n}", "1,1,1,1"),
        f"F.max_pool2d p {tops} kernel_size=({k},{k}) stride=(1,1) padding=(0,0) dilation=(1,1) ceil_mode=False "
        f"return_indices={indices} #1=(1,1,{n},{n})f32",
        f"pnnx.Output out {outs}",
    ])  # fmt: skip


def pnnx_work_bombs(n: int = 8192) -> dict[str, bytes]:
    """.pnnx.param files of a few hundred bytes, no .bin, each an operator over broadcast views
    of the input's one number: (n, n) products and windows (5.5e11 multiply-adds at 8192, minutes
    of CPU), an attention's scores (16 GiB), an unfold's columns (1 TiB), a max pool's windows
    gathered for its indices (4 GiB), non-maximum suppression of 200,000 boxes (2e10 IoUs: ~5 minutes)."""
    sq, four = f"{n},{n}", f"1,1,{n},{n}"
    return {
        "matmul": _pnnx([
            _one("1,1"), _expand("e", 1, sq),
            f"torch.matmul mm 2 1 1 1 2 #1=({sq})f32 #1=({sq})f32 #2=({sq})f32",
            f"pnnx.Output out 1 0 2 #2=({sq})f32",
        ]),
        "einsum": _pnnx([
            _one("1,1"), _expand("e", 1, sq),
            f"torch.einsum es 2 1 1 1 2 equation=ij,jk->ik #1=({sq})f32 #1=({sq})f32 #2=({sq})f32",
            f"pnnx.Output out 1 0 2 #2=({sq})f32",
        ]),
        "max_pool": _max_pool(n, n // 2, indices=False),
        "max_pool_indices": _max_pool(2048, 16, indices=True),  # its windows gathered: 4 GiB
        "adaptive_avg_pool": _pnnx([
            _one("1,1,1,1"), _expand("e", 1, four, "1,1,1,1"),
            f"F.adaptive_avg_pool2d a 1 1 1 2 output_size=({n - 1},{n - 1}) #1=({four})f32 #2=(1,1,{n - 1},{n - 1})f32",
            f"pnnx.Output out 1 0 2 #2=(1,1,{n - 1},{n - 1})f32",
        ]),
        "conv2d": _pnnx([
            _one("1,1,1,1"), _expand("e", 1, "1,1024,252,252", "1,1,1,1"), _expand("w", 2, "1024,1024,3,3", "1,1,1,1"),
            "F.conv2d c 2 1 1 2 3 bias=None stride=(1,1) padding=(1,1) dilation=(1,1) groups=1 "
            "#1=(1,1024,252,252)f32 #2=(1024,1024,3,3)f32 #3=(1,1024,252,252)f32",
            "pnnx.Output out 1 0 3 #3=(1,1024,252,252)f32",
        ]),
        "unfold": _pnnx([
            _one("1,1,1,1"), _expand("e", 1, four, "1,1,1,1"),
            f"F.unfold u 1 1 1 2 kernel_size=(64,64) dilation=(1,1) padding=(0,0) stride=(1,1) #1=({four})f32",
            "pnnx.Output out 1 0 2",
        ]),
        "attention": _pnnx([
            _one("1,1,1,1"), _expand("e", 1, "1,1,65536,1024", "1,1,1,1"),
            "F.scaled_dot_product_attention a 3 1 1 1 1 2 dropout_p=0.0 is_causal=False #1=(1,1,65536,1024)f32",
            "pnnx.Output out 1 0 2",
        ]),
        "conv_transpose_taps": _pnnx([  # one number, an (n, n) kernel: a Python step a tap
            _one("1,1,1,1"), _expand("w", 2, four, "1,1,1,1"),
            "F.conv_transpose2d c 2 1 0 2 3 bias=None stride=(1,1) padding=(0,0) output_padding=(0,0) "
            f"dilation=(1,1) groups=1 #0=(1,1,1,1)f32 #2=({four})f32",
            "pnnx.Output out 1 0 3",
        ]),
        "local_response_norm": _pnnx([  # a Python step of a whole tensor per channel of the window
            _one("1,1,1,1"), _expand("e", 1, "1,1048576,1,1", "1,1,1,1"),
            "F.local_response_norm l 1 1 1 2 size=2000000 alpha=0.0001 beta=0.75 k=1.0 #1=(1,1048576,1,1)f32",
            "pnnx.Output out 1 0 2",
        ]),
        "pool_row_phases": _pnnx([  # a Python step per row phase of a 2^24 stride
            _one("1,1,1,1"), _expand("e", 1, "1,1,16777217,2", "1,1,1,1"),
            "F.max_pool2d p 1 1 1 2 kernel_size=(1,1) stride=(16777216,1) padding=(0,0) dilation=(1,1) "
            "ceil_mode=False return_indices=False #1=(1,1,16777217,2)f32",
            "pnnx.Output out 1 0 2",
        ]),
        "nms": _pnnx([
            "pnnx.Input in 0 1 0 #0=(200000,4)f32", "pnnx.Input in2 0 1 1 #1=(200000)f32",
            "pnnx.custom_op.torchvision.nms n 2 1 0 1 2 arg_2=0.5 $arg_0=0 $arg_1=1 #0=(200000,4)f32 #1=(200000)f32",
            "pnnx.Output out 1 0 2",
        ]),
    }  # fmt: skip


def pnnx_lstm_steps(steps: int = 1 << 22) -> tuple[bytes, bytes]:
    """A 1-wide LSTM (32 bytes of weights) over a broadcast view of `steps` time steps: a Python
    step each (2^22: minutes). Returns the .pnnx.param and its .pnnx.bin."""
    seq = f"{steps},1,1"
    param = _pnnx([
        _one("1,1,1"), _expand("e", 1, seq, "1,1,1"),
        "nn.LSTM rnn 1 1 1 2 batch_first=False bias=False bidirectional=False hidden_size=1 input_size=1 "
        f"num_layers=1 proj_size=0 @weight_hh_l0=(4,1)f32 @weight_ih_l0=(4,1)f32 #1=({seq})f32 #2=({seq})f32",
        "pnnx.Output out 1 0 2",
    ])  # fmt: skip
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name in ("rnn.weight_hh_l0", "rnn.weight_ih_l0"):
            z.writestr(name, struct.pack("<4f", 0.5, 0.5, 0.5, 0.5))
    return param, buf.getvalue()


def ncnn_work_bombs(n: int = 8192) -> dict[str, bytes]:
    """.ncnn.param files with no weights: an (n, n) input multiplied by itself, n/2 windows over
    it, and adaptive pooling of one number to (n, n) (a Python step per output position)."""
    return {
        "matmul": f"7767517\n2 2\nInput in 0 1 data 0={n} 1={n}\nMatMul mm 2 1 data data out\n".encode(),
        "pooling": f"7767517\n2 2\nInput in 0 1 data 0={n} 1={n} 2=1\nPooling p 1 1 data out 0=0 1={n // 2}\n".encode(),
        "adaptive_pooling": f"7767517\n2 2\nInput in 0 1 data 0=1 1=1 2=1\nPooling p 1 1 data out 7=1 8={n} 18={n}\n".encode(),
    }


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("hostile_uploads")
    out.mkdir(parents=True, exist_ok=True)
    cases = {
        "second_folder_cycle.pt": second_folder_pt(),
        "second_folder_dag.pt": second_folder_pt(pickle_dag()),
        "class_bomb.pt": torchscript_with({}, replace={"data.pkl": pickle_class_bomb(700, 1 << 20)}),
        "stateless.pt": torchscript_with({}, replace={"data.pkl": pickle_stateless()}),
        "code_1gib.pt": inflating_code_pt(1 << 30),
        "million_entries.zip": zip_listing(1_000_000),
        "shared_external.onnx": onnx_shared_external(),
        "w.data": b"\0" * (16 << 20),
        "hidden_external.onnx": onnx_hidden_external(),
        "dims_bomb.onnx": onnx_dims_bomb(),
        "phish_chain.onnx": onnx_named_chain(),
        "product_bomb.ncnn.param": ncnn_shape_expression(ncnn_product_bomb()),
        "infinite_size.ncnn.param": ncnn_shape_expression("*(1e308,10.0)"),
    }
    cases.update({f"work_{k}.pnnx.param": v for k, v in pnnx_work_bombs().items()})
    cases.update({f"work_{k}.ncnn.param": v for k, v in ncnn_work_bombs().items()})
    cases["work_lstm.pnnx.param"], cases["work_lstm.pnnx.bin"] = pnnx_lstm_steps()
    for name, data in cases.items():
        (out / name).write_bytes(data)
        print(f"{out / name}: {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
