"""Issue 35: the converter and the reference children under the caller's limits
(kuiper_core/children.py), and the conversion cache kept whole, bounded and this user's own
(formats/convert.py). A fake converter (a shell script) stands in for pnnx except where a
real conversion is the point."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kuiper_core import children, limits
from kuiper_core.errors import LimitError
from kuiper_core.explore.model_files import WAITING
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats import convert as convert_module
from kuiper_core.formats.convert import ENV_CONVERTER, cached_conversion

ROOT = Path(__file__).resolve().parent.parent
USER = ROOT / "tests" / "data" / "user_models"
RELU = "7767517\\n3 2\\npnnx.Input in0 0 1 0 #0=(1,4)f32\\nF.relu r 1 1 0 1 #0=(1,4)f32 #1=(1,4)f32\\npnnx.Output out0 1 0 1\\n"
BIG = "7767517\\n3 2\\npnnx.Input in0 0 1 0 #0=(4)f32\\npnnx.Attribute a 0 1 1 @data=(134217728)f32 #1=(134217728)f32\\npnnx.Output out0 1 0 1\\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """The cache, the children's folders and their slot locks in this test's folder (other
    processes on the machine have their own)."""
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake(tmp_path: Path, monkeypatch, param: str = RELU, extra: str = "", name: str = "fake_pnnx") -> None:
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\n{extra}printf "{param}" > model.pnnx.param\n: > model.pnnx.bin\necho done\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(ENV_CONVERTER, str(path))


def _entries(cache: Path) -> list[str]:
    folder = cache / "convert"
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []


# -- limits ---------------------------------------------------------------------------------------------
def test_a_child_asks_for_no_more_than_the_hard_limit() -> None:
    """Under `ulimit -v` (a container), asking for max_planned_bytes + 2 GiB failed every
    conversion with "not allowed to raise maximum limit"; the child takes the smaller."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        f"exec({children.rlimit_code(6 << 30, 5)!r})\n"
        "print(resource.getrlimit(resource.RLIMIT_AS)[1], resource.getrlimit(resource.RLIMIT_CPU)[1])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(3 << 30), "5"]


@pytest.mark.slow  # a child process: seconds on a loaded machine
@pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
def test_a_real_conversion_runs_under_a_hard_address_space_limit(tmp_path) -> None:
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from kuiper_core.formats import open_model\n"
        f"m = open_model({str(USER / 'lstm.onnx')!r}, cache_dir={str(tmp_path / 'c')!r})\n"
        "print(m.conversion.exit_code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "0", run.stderr[-2000:]


def test_the_converter_takes_the_callers_time_and_memory(monkeypatch) -> None:
    monkeypatch.delenv("KUIPER_CONVERT_TIMEOUT", raising=False)
    with limits.use(max_child_seconds=42, max_planned_bytes=1 << 30):
        assert convert_module.converter_timeout() == 42.0
        assert convert_module.converter_memory() == 3 << 30
        from kuiper_core.references.isolated import child_timeout, memory_limit

        assert child_timeout() == 42.0 and memory_limit() == 3 << 30
    assert convert_module.converter_timeout(7) == 7.0


# -- how many at once -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_conversion_waits_for_a_free_slot_and_says_so(tmp_path, monkeypatch) -> None:
    """With every slot taken (another process's conversion), a conversion is queued, not
    refused: its log says it waits, and it runs once the slot is free."""
    monkeypatch.setenv(children.ENV_CHILDREN, "1")
    monkeypatch.setattr(children, "WAIT_NOTE_EVERY", 0.0)
    _fake(tmp_path, monkeypatch)
    lines: list[str] = []
    waiting = threading.Event()
    result: list[object] = []

    def on_log(line: str) -> None:
        lines.append(line)
        if line.startswith(WAITING):  # what the app's status box shows as "Waiting for the converter"
            waiting.set()

    with children.slot("the test"):
        worker = threading.Thread(
            target=lambda: result.append(open_model(USER / "lstm.onnx", on_log=on_log)), daemon=True
        )
        worker.start()
        assert waiting.wait(30), lines
        assert not result  # still queued while the slot is held
    worker.join(60)
    assert result and result[0].conversion.exit_code == 0  # type: ignore[attr-defined]
    assert any(line.startswith("the converter starts after waiting") for line in lines)
    assert "done" in lines


@pytest.mark.slow  # a wait, and a conversion
def test_a_conversions_steps_share_its_one_slot(tmp_path, monkeypatch) -> None:
    """convert() holds one slot through the normalisation's child and pnnx: a step inside it
    takes no second slot (with one slot it would wait for itself), another thread waits."""
    monkeypatch.setenv(children.ENV_CHILDREN, "1")
    _fake(tmp_path, monkeypatch)
    got = threading.Event()

    def another_upload() -> None:
        with children.slot("another upload"):
            got.set()

    with children.slot("a conversion"):
        with children.slot("its normalisation"):  # the same thread: at once
            worker = threading.Thread(target=another_upload, daemon=True)
            worker.start()
            assert not got.wait(0.5)  # another thread waits
    assert got.wait(10)
    worker.join(10)
    assert open_model(USER / "lstm.onnx").conversion.exit_code == 0  # type: ignore[union-attr]


def test_a_closed_tab_ends_the_wait(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(children.ENV_CHILDREN, "1")
    monkeypatch.setattr(children, "WAIT_NOTE_EVERY", 0.0)
    _fake(tmp_path, monkeypatch)

    def closed(line: str) -> None:
        if line.startswith("waiting"):
            raise RuntimeError("the tab was closed")

    with _slot_held_elsewhere(), pytest.raises(RuntimeError, match="tab was closed"):
        open_model(USER / "lstm.onnx", on_log=closed)


@contextlib.contextmanager
def _slot_held_elsewhere() -> Iterator[None]:
    """The one slot held by another job (a thread of its own: this thread's own conversion
    would go on in the slot it holds)."""
    held, done = threading.Event(), threading.Event()

    def job() -> None:
        with children.slot("another job"):
            held.set()
            done.wait(60)

    worker = threading.Thread(target=job, daemon=True)
    worker.start()
    assert held.wait(10)
    try:
        yield
    finally:
        done.set()
        worker.join(10)


# -- leftovers ------------------------------------------------------------------------------------------
def test_folders_of_killed_conversions_are_swept_and_living_ones_kept(tmp_path, monkeypatch) -> None:
    import tempfile

    dead = Path(tempfile.gettempdir()) / "kuiper-convert-dead"
    dead.mkdir()
    (dead / "model.onnx").write_bytes(b"an upload")
    old = time.time() - 3600
    os.utime(dead, (old, old))
    with children.private_folder("kuiper-convert-") as alive:  # a new conversion sweeps first
        assert not dead.exists()
        os.utime(alive, (old, old))
        assert children.sweep() == [] and alive.exists()  # in use: kept however old
    assert not alive.exists()


@pytest.mark.slow  # a child process: seconds on a loaded machine
def test_a_killed_server_leaves_nothing_the_next_conversion_keeps(tmp_path, monkeypatch) -> None:
    """A process killed (SIGKILL) while its converter runs leaves its folder, holding the
    upload; the next conversion's sweep removes it once no process holds its lock."""
    import tempfile

    script = (
        "import os, signal, tempfile\n"
        f"tempfile.tempdir = {tempfile.gettempdir()!r}\n"
        "from kuiper_core.children import private_folder\n"
        "with private_folder('kuiper-convert-') as f:\n"
        "    (f / 'model.onnx').write_bytes(b'upload')\n"
        "    print(f, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    left = Path(run.stdout.strip())
    assert run.returncode == -9 and (left / "model.onnx").exists()
    assert left in children.sweep(older_than=0)


# -- the cache ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_cache_entry_that_lost_its_bin_is_rebuilt_and_the_log_says_so(tmp_path, monkeypatch, private_cache) -> None:
    _fake(tmp_path, monkeypatch)
    first = open_model(USER / "lstm.onnx")
    assert first.files.bin is not None
    first.files.bin.unlink()
    lines: list[str] = []
    again = open_model(USER / "lstm.onnx", on_log=lines.append)
    assert not again.conversion.cached and again.files.bin.exists()
    assert any("conversion cache's entry" in line and "model.pnnx.bin is missing" in line for line in lines)
    (y,) = again.build().forward(np.array([[-1, 2, -3, 4]], np.float32))
    np.testing.assert_array_equal(y, [[0, 2, 0, 4]])


@pytest.mark.slow
def test_a_cache_entry_whose_file_changed_size_is_not_used(tmp_path, monkeypatch) -> None:
    _fake(tmp_path, monkeypatch)
    first = open_model(USER / "lstm.onnx")
    record = json.loads((first.conversion.directory / "record.json").read_text())
    assert record["files"]["model.pnnx.param"] == first.files.param.stat().st_size
    with open(first.files.param, "a") as f:
        f.write("F.relu extra 1 1 1 2\n")
    assert cached_conversion(first.conversion.key) is None
    assert not first.conversion.directory.exists()


@pytest.mark.slow
def test_a_model_over_the_limits_is_refused_before_it_is_cached(tmp_path, monkeypatch, private_cache) -> None:
    """pnnx folded a 146-byte ConstantOfShape([2^27]) into a 512 MiB weight the app then
    refused, and the entry stayed: now the LimitError comes first and nothing is stored."""
    _fake(tmp_path, monkeypatch, param=BIG)
    with limits.use(max_tensor_elements=1 << 26), pytest.raises(LimitError, match="134,217,728 elements"):
        open_model(USER / "lstm.onnx")
    assert _entries(private_cache) == []


@pytest.mark.slow
def test_an_entry_larger_than_the_cache_is_not_kept(tmp_path, monkeypatch, private_cache) -> None:
    _fake(tmp_path, monkeypatch)
    monkeypatch.setenv("KUIPER_CACHE_MAX_MB", "0.0001")  # 100 bytes
    m = open_model(USER / "lstm.onnx")
    assert "larger than the conversion cache" in (m.conversion.note or "")
    assert _entries(private_cache) == [] and m.files.param.exists()


@pytest.mark.slow
def test_the_cache_never_grows_past_its_limit(tmp_path, monkeypatch, private_cache) -> None:
    """Entries used a moment ago go too when the cache is over (three small uploads made
    12 MiB at a 1 MiB limit): each store leaves the cache within KUIPER_CACHE_MAX_MB."""
    _fake(tmp_path, monkeypatch)
    size = None
    for i in range(4):
        source = tmp_path / f"m{i}.onnx"
        source.write_bytes((USER / "lstm.onnx").read_bytes() + b"\x42\x00" * (i + 1))  # another digest each
        m = open_model(source)
        if size is None:
            size = convert_module._entry_size(m.conversion.directory)
            monkeypatch.setenv("KUIPER_CACHE_MAX_MB", str(2.5 * size / 2**20))  # two entries
        total = sum(convert_module._entry_size(private_cache / "convert" / e) for e in _entries(private_cache))
        assert total <= 2.5 * size
    assert len(_entries(private_cache)) == 2


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="modes are POSIX's")
def test_a_cache_others_may_write_is_not_used(tmp_path, monkeypatch, private_cache) -> None:
    _fake(tmp_path, monkeypatch)
    first = open_model(USER / "lstm.onnx")
    assert _entries(private_cache) == [first.conversion.key]
    private_cache.chmod(0o777)  # a shared KUIPER_CACHE: anyone could plant an entry
    assert cached_conversion(first.conversion.key) is None
    again = open_model(USER / "lstm.onnx")
    assert not again.conversion.cached and "not this user's alone" in (again.conversion.note or "")


@pytest.mark.slow
def test_a_cache_that_is_a_symlink_is_not_used(tmp_path, monkeypatch) -> None:
    _fake(tmp_path, monkeypatch)
    real = tmp_path / "real"
    first = open_model(USER / "lstm.onnx", cache_dir=real)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert cached_conversion(first.conversion.key, real) is not None
    assert cached_conversion(first.conversion.key, link) is None


def test_the_umask_is_read_without_being_changed() -> None:
    from kuiper_core.output_files import _umask

    before = os.umask(0o027)
    try:
        assert _umask() == 0o027
        assert os.umask(0o027) == 0o027  # unchanged by the read
    finally:
        os.umask(before)


@pytest.mark.skipif(os.name != "posix", reason="modes are POSIX's")
def test_a_cache_writable_by_the_users_own_group_is_still_used(tmp_path) -> None:
    """A umask of 002 (user private groups) makes folders group-writable for the user's own
    group: trusted; writable by others: not."""
    from kuiper_core.cache_dir import trusted_folder

    folder = tmp_path / "c"
    folder.mkdir()
    folder.chmod(0o775)
    assert os.stat(folder).st_gid == os.getegid() and trusted_folder(folder)
    folder.chmod(0o757)
    assert not trusted_folder(folder)


@pytest.mark.slow
def test_uncached_conversions_go_after_a_day(tmp_path, monkeypatch) -> None:
    """Conversions no cache could keep live in kuiper-converted-* folders the model reads later
    (no lock): the sweep removes them a day later, not before."""
    import tempfile

    _fake(tmp_path, monkeypatch)
    monkeypatch.setenv("KUIPER_CACHE_MAX_MB", "0.0001")  # nothing fits: a private folder
    folder = open_model(USER / "lstm.onnx").conversion.directory
    assert folder.name.startswith(children.UNLOCKED) and Path(tempfile.gettempdir()) in folder.parents
    assert children.sweep(older_than=0) == [] and folder.exists()
    day = time.time() - children.UNLOCKED_AGE - 60
    os.utime(folder, (day, day))
    assert children.sweep() == [folder] and not folder.exists()


@pytest.mark.skipif(os.name != "posix", reason="modes are POSIX's")
def test_a_planted_slot_folder_does_not_lift_the_bound(private_cache) -> None:
    """Another user's (or a world-writable) kuiper-locks folder in /tmp: the slots live in the
    cache instead, still bounding the children."""
    import tempfile

    planted = Path(tempfile.gettempdir()) / f"kuiper-locks-{os.geteuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    assert children._lock_folder() == private_cache / "locks"
    with children.slot("one"):
        assert (private_cache / "locks" / "slot-0").exists()


@pytest.mark.slow
def test_a_backtrace_does_not_push_pnnxs_message_out_of_the_error(tmp_path, monkeypatch) -> None:
    """libtorch's c10::Error prints its message, then a dozen `frame #N:` lines with install
    paths: the error quotes the message and counts the frames."""
    from kuiper_core.errors import ConversionError

    frames = "".join(
        f'echo "frame #{i}: f{i} + 0x1 (0x7f in /opt/site-packages/pnnx/libtorch.so)"\n' for i in range(20)
    )
    script = tmp_path / "fake_pnnx"
    script.write_text(
        '#!/bin/sh\necho "Load torchscript failed: Only Pickle protocol 2 is supported"\n' + frames + "exit 255\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv(ENV_CONVERTER, str(script))
    with pytest.raises(ConversionError) as info:
        open_model(USER / "lstm.onnx")
    text = str(info.value)
    assert "Only Pickle protocol 2 is supported" in text and "frame #" not in text
    assert "(20 frames of a C++ backtrace left out: the whole log is kept)" in text
    assert info.value.log.count("frame #") == 20
