"""Converting ONNX and TorchScript with the real `pnnx` converter (kuiper_core.formats.convert):
the cache, the log, failures quoted, the time limit, the missing converter; the CLI's
`convert` and every command opening .onnx/.pt. Fake converters (shell scripts named by
KUIPER_PNNX) play the failures pnnx makes rarely or slowly."""

from __future__ import annotations

import os
import stat
import time

import numpy as np
import pytest

import kuiper_core
from conftest import DATA, without_traced_inputs
from kuiper_core import ConversionError, ConverterNotFoundError, InputError
from kuiper_core.cli import main
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats import convert as convert_module
from kuiper_core.formats.convert import ENV_CONVERTER, find_converter

USER = DATA / "user_models"
needs_pnnx = pytest.mark.skipif(
    not converter_available(), reason="the pnnx converter is not installed (pip install --no-deps pnnx)"
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_converter(tmp_path, script: str) -> str:
    path = tmp_path / "fake_pnnx"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_onnx_converts_runs_and_matches_torch(tmp_path):
    lines: list[str] = []
    model = open_model(USER / "lstm.onnx", on_log=lines.append)
    assert model.format == "onnx" and model.conversion is not None and not model.conversion.cached
    assert lines[0].startswith("normalising the ONNX file")  # onnx_prepare.py, then its notes, then pnnx
    start = next(i for i, line in enumerate(lines) if line.startswith("$ pnnx model.onnx optlevel=2"))
    assert any("pass_level" in line for line in lines[start:])
    assert model.conversion.log.count("\n") + 1 == len(lines) - start - 1  # every line was streamed
    files = model.files
    assert files.param.read_text().startswith("7767517") and files.bin.exists() and files.source.exists()
    x = np.load(USER / "lstm.input.npy")
    (y,) = model.build().forward(x)
    np.testing.assert_allclose(y, np.load(USER / "lstm.expected.npz")["out0"], atol=1e-5)


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_second_open_comes_from_the_cache_and_options_change_the_key(private_cache):
    first = open_model(USER / "lstm.pt")
    started = time.perf_counter()
    lines: list[str] = []
    again = open_model((USER / "lstm.pt").read_bytes(), name="upload.pt", on_log=lines.append)  # same content
    assert time.perf_counter() - started < 2.0  # no conversion: a hash and a read (the first took seconds)
    assert again.conversion.cached and again.conversion.key == first.conversion.key
    assert lines == [f"using the cached conversion {first.conversion.key} (pnnx {first.conversion.version}, "
                     f"{first.conversion.seconds:.2f} s when made)"]  # fmt: skip
    other = open_model(USER / "lstm.pt", inputshape="[1,12,16]")
    assert other.conversion.key != first.conversion.key and not other.conversion.cached
    level1 = open_model(USER / "lstm.pt", optlevel=1)
    assert level1.conversion.key not in (first.conversion.key, other.conversion.key)
    entries = [p.name for p in private_cache.joinpath("convert").iterdir() if not p.name.startswith(".")]  # (.lock)
    assert sorted(entries) == sorted(m.conversion.key for m in (first, other, level1))
    restored = kuiper_core.formats.open_cached(first.conversion.key)
    assert restored is not None and restored.format == "torchscript" and restored.conversion.cached
    assert kuiper_core.formats.open_cached("0" * 24) is None


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_cache_is_size_bounded(private_cache, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE_MAX_MB", "0.2")  # about one lstm conversion
    monkeypatch.setattr(convert_module, "EVICT_GRACE", 0.0)  # a just-used entry may go too
    a = open_model(USER / "lstm.pt")
    b = open_model(USER / "lstm.onnx")
    keys = {p.name for p in (private_cache / "convert").iterdir()}
    assert b.conversion.key in keys and a.conversion.key not in keys


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_torchscript_without_shapes_asks_for_inputshape():
    data = without_traced_inputs((USER / "lstm.pt").read_bytes())
    with pytest.raises(ConversionError, match=r"needs its input shape\(s\).*inputshape, e\.g\. \[1,3,224,224\]"):
        open_model(data, name="scripted.pt")
    model = open_model(data, name="scripted.pt", inputshape=[1, 12, 16])
    assert model.format == "torchscript" and model.conversion.inputshape == "[1,12,16]"


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_a_cut_onnx_is_refused_at_its_byte_before_the_converter(tmp_path):
    """An opset_import (field 8) that is no message: pnnx's protobuf refused it with
    'read_proto_from_binary failed'; the budgets' walk over every message of onnx.proto
    (budgets.py) now says where, before pnnx runs."""
    bad = tmp_path / "cut.onnx"
    bad.write_bytes((USER / "lstm.onnx").read_bytes() + b"\x42\x02\xff\xff")
    with pytest.raises(ConversionError) as info:
        open_model(bad)
    text = str(info.value)
    assert "not a readable ONNX model: byte " in text and "runs past the end of its message" in text
    assert "pnnx" not in text  # refused before the converter ran


def test_fake_converter_failure_quotes_its_last_lines(tmp_path, monkeypatch):
    script = 'for i in $(seq 1 30); do echo "step $i"; done\necho "fatal: unsupported op Foo" >&2\nexit 3\n'
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, script))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.onnx")
    assert info.value.exit_code == 3
    text = str(info.value)
    assert text.rstrip().endswith("fatal: unsupported op Foo") and "step 30" in text and "step 10\n" not in text


def test_a_crash_on_a_torchscript_model_suggests_tracing(tmp_path, monkeypatch):
    """pnnx 20261020 dies with SIGSEGV in pass_level1 on a torch.jit.script module (a small conv
    net, 27 Nov); the same module traced converts."""
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, 'echo "############# pass_level1"\nkill -11 $$\n'))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.pt", inputshape=[1, 12, 16])
    assert info.value.exit_code == -11 and "save it with torch.jit.trace" in str(info.value)
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.onnx")
    assert "torch.jit.trace" not in str(info.value)  # an ONNX model: no such advice


@pytest.mark.slow
def test_abort_after_valid_files_is_accepted(tmp_path, monkeypatch):
    param = "7767517\\n3 2\\npnnx.Input in0 0 1 0 #0=(1,4)f32\\nF.relu r 1 1 0 1 #0=(1,4)f32 #1=(1,4)f32\\npnnx.Output out0 1 0 1\\n"
    script = f'printf "{param}" > model.pnnx.param\n: > model.pnnx.bin\necho "writing ncnn"\nkill -6 $$\n'
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, script))
    model = open_model(USER / "lstm.onnx")
    assert model.conversion.exit_code == -6
    assert model.conversion.note == "pnnx exited with code -6 after writing a valid .pnnx.param/.bin: accepted"
    (y,) = model.build().forward(np.array([[-1, 2, -3, 4]], np.float32))
    np.testing.assert_array_equal(y, [[0, 2, 0, 4]])


def test_an_exception_from_on_log_leaves_no_converter_running(tmp_path, monkeypatch):
    """The app's log callback raises when the browser tab goes away mid-conversion."""
    pid_file = tmp_path / "pid"
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, f"echo $$ > {pid_file}\necho start\nexec sleep 30\n"))

    def closed(line: str) -> None:
        if line == "start":
            raise RuntimeError("the tab was closed")

    with pytest.raises(RuntimeError, match="the tab was closed"):
        open_model(USER / "lstm.onnx", on_log=closed)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.slow  # waits for the 1 s limit
def test_time_limit_stops_the_converter(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, 'echo "thinking"\nsleep 30\n'))
    started = time.perf_counter()
    with pytest.raises(ConversionError, match=r"ran past its time limit of 1 s.*\n  thinking"):
        open_model(USER / "lstm.onnx", timeout=1)
    assert time.perf_counter() - started < 10


def test_no_converter_one_clear_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_CONVERTER, str(tmp_path / "nowhere"))
    with pytest.raises(ConverterNotFoundError, match=r"pip install --no-deps pnnx"):
        find_converter()
    with pytest.raises(ConverterNotFoundError):
        kuiper_core.load(USER / "lstm.onnx")
    x = tmp_path / "x.npy"
    np.save(x, np.load(USER / "lstm.input.npy"))
    assert main(["run", str(USER / "lstm.onnx"), "--input", str(x)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps pnnx" in err and "Traceback" not in err
    # PNNX models open as ever without it
    assert main(["inspect", str(DATA.parent.parent / "sample_models" / "tiny_mlp.pnnx.param")]) == 0


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_cli_convert_writes_pnnx_files(tmp_path, capsys):
    assert main(["convert", str(USER / "lstm.onnx"), "-o", str(tmp_path / "out"), "-q"]) == 0
    out = capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    # pnnx's ncnn files of the same conversion too (docs/ncnn.md), and the command says where
    assert written == ["lstm.ncnn.bin", "lstm.ncnn.param", "lstm.pnnx.bin", "lstm.pnnx.param", "lstm_pnnx.py"]
    assert f"ncnn: {tmp_path / 'out' / 'lstm.ncnn.param'} and its .bin" in out
    assert "'lstm.pnnx.bin'" in (tmp_path / "out" / "lstm_pnnx.py").read_text()  # the script opens its own .bin
    assert "lstm.onnx: ONNX, " in out and "converted by pnnx" in out
    x = np.load(USER / "lstm.input.npy")
    (y,) = kuiper_core.load(tmp_path / "out" / "lstm.pnnx.param").forward(x)
    np.testing.assert_allclose(y, np.load(USER / "lstm.expected.npz")["out0"], atol=1e-5)
    # already PNNX: nothing to convert
    assert main(["convert", str(tmp_path / "out" / "lstm.pnnx.param")]) == 2
    assert "nothing to convert" in capsys.readouterr().err


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_every_command_opens_onnx_and_torchscript(tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.load(USER / "lstm.input.npy"))
    for model in (USER / "lstm.onnx", USER / "lstm.pt"):
        assert main(["run", str(model), "--input", str(x), "--output", str(tmp_path / "y.npy")]) == 0
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.load(USER / "lstm.expected.npz")["out0"], atol=1e-5)
        assert main(["inspect", str(model)]) == 0
        assert main(["print", str(model)]) == 0
        assert capsys.readouterr().out.count('"pnnx.Input"') == 1
        assert main(["opt", str(model), "-o", str(tmp_path / "o.pnnx.param")]) == 0
    assert main(["run", str(USER / "lstm.pt"), "--input", str(x), "--inputshape", "[1,12,x]"]) == 2
    assert "inputshape '[1,12,x]' is not a list of shapes" in capsys.readouterr().err


def test_converter_env_names_a_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CONVERTER, str(tmp_path))
    with pytest.raises(ConverterNotFoundError, match="is not an executable file"):
        find_converter()


def test_bad_optlevel(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, "exit 0\n"))
    with pytest.raises(InputError, match="optlevel must be 0, 1 or 2"):
        open_model(USER / "lstm.onnx", optlevel=5)


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_converted_files_are_private_while_converting(tmp_path, monkeypatch):
    script = "stat -c %a . > /dev/stderr; pwd; exit 1\n"
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, script))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.onnx")
    mode, folder = [line.strip() for line in info.value.log.splitlines()[-2:]]
    assert mode == "700" and not os.path.exists(folder)  # a private temporary folder, removed after


def test_the_converters_reason_comes_first_and_only_hints_that_apply(tmp_path, monkeypatch):
    """silero's scripted forward(x, sr: int) printed twelve C++ frames around its reason and every
    crash said "(it runs within 6,144 MiB…)", pointing at memory when the cause was elsewhere."""
    frames = "".join(
        f'echo "frame #{i}: c10::Error::Error(...) + 0x{i:04x} (0x7f00 in libc10.so)"\n' for i in range(12)
    )
    script = f'echo "############# pass_level1"\necho "forward() is missing value for argument \'sr.1\'"\n{frames}kill -11 $$\n'
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, script))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.pt", inputshape=[1, 12, 16])
    text = str(info.value)
    head = text.split("\n")[0]
    assert head.split(": ", 2)[2].startswith("forward() is missing value for argument 'sr.1'"), head
    assert "MiB" not in text and "12 frames of a C++ backtrace left out" in text and "frame #" not in text
    assert "torch.jit.trace" in head  # a TorchScript module crashed the converter: the advice applies


def test_a_nested_tensor_trace_says_torchs_reason_and_how_to_trace_it(tmp_path, monkeypatch):
    """nn.Transformer traced with a src_key_padding_mask (fresh export, torch 2.13): pnnx aborts
    with TorchScript's generic what(), then torch's reason, its dispatcher listing and "Exception
    raised from reportError …"."""
    script = (
        "echo \"terminate called after throwing an instance of 'c10::NotImplementedError'\"\n"
        'echo "  what():  The following operation failed in the TorchScript interpreter."\n'
        "echo \"RuntimeError: Could not run 'aten::_transformer_encoder_layer_fwd' with arguments from the "
        "'AutogradNestedTensor' backend. This could be because the operator doesn't exist\"\n"
        'echo "AutocastCPU: fallthrough registered at /p/aten/src/ATen/autocast_mode.cpp:322 [backend fallback]"\n'
        'echo "FuncTorchBatched: registered at /p/aten/src/ATen/functorch/Legacy.cpp:730 [backend fallback]"\n'
        'echo "Exception raised from reportError at /p/OperatorEntry.cpp:640 (most recent call first):"\n'
        'echo "frame #0: /x/pnnx() [0x37f69bd]"\nkill -6 $$\n'
    )
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, script))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.pt", inputshape=[1, 12, 16])
    head = str(info.value).split("\n")[0]
    assert head.split(": ", 2)[2].startswith("RuntimeError: Could not run 'aten::_transformer_encoder_layer_fwd'"), head
    assert "enable_nested_tensor=False" in head and "use_nested_tensor = False" in head
    assert "torch.jit.script" not in head  # not a scripted module: that hint does not apply


def test_memory_is_blamed_only_where_an_allocation_failed(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, 'echo "what():  std::bad_alloc"\nkill -6 $$\n'))
    with pytest.raises(ConversionError, match=r"what\(\):  std::bad_alloc; it ran out of memory: it runs within"):
        open_model(USER / "lstm.onnx")


def test_guessed_dynamic_dims_suggest_the_shape_the_model_runs_at(tmp_path, monkeypatch):
    log = (
        'echo "get inputshape from traced inputs"\necho "inputshape = [1,3,128,128]f32"\n'
        'echo "inputshape2 = [1,3,512,512]f32"\n'
        'echo "ort Run failed ... Input shape:{1,32,120}, requested shape:{1,1,16,120}"\nkill -11 $$\n'
    )
    monkeypatch.setenv(ENV_CONVERTER, _fake_converter(tmp_path, log))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.onnx")
    head = str(info.value).split("\n")[0]
    assert "ort Run failed" in head and "pnnx guessed [1,3,128,128]f32 and [1,3,512,512]f32" in head
    assert "--inputshape, or --input" in head and "MiB" not in head


@needs_pnnx
def test_a_bool_onnx_input_says_pnnx_cannot_take_one_and_what_to_export(tmp_path):
    """torch.onnx.export of x.masked_fill(mask, v) with the mask an input (fresh export
    ops_index_inputs.onnx): pnnx 20261020 dies (-11) on "ort CreateTensorAsOrtValue failed tensor
    type 0 is not supported"; the message now says it is the bool input and what to export."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Where", ["mask", "x", "half"], ["y"])],
        "bool_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    with pytest.raises(ConversionError) as info:
        open_model(tmp_path / "m.onnx")
    head = str(info.value).split("\n")[0]
    assert "pnnx cannot take a bool graph input" in head and "mask.bool()" in head, head


@needs_pnnx
def test_indices_given_as_an_onnx_input_say_pnnx_made_up_their_values(tmp_path):
    """torch.gather(x, -1, cols) with cols an input (fresh export ops_index_inputs_u8_mask.onnx):
    pnnx runs onnxruntime on values it makes up, the index falls out of range and it dies (-11)
    with onnxruntime's message; the error now says the values were pnnx's, and what to do."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("GatherElements", ["x", "cols"], ["y"], axis=1)],
        "index_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5]),
            helper.make_tensor_value_info("cols", TensorProto.INT64, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    with pytest.raises(ConversionError) as info:
        open_model(tmp_path / "m.onnx", inputs=[np.zeros((2, 5), np.float32), np.array([[0, 4, 1], [2, 2, 3]])])
    head = str(info.value).split("\n")[0]
    assert "input values it makes up" in head and "convert the traced .pt" in head, head
