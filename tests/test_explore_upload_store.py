"""kuiper_core.explore.upload_store: uploads kept by content for reloads, bounded by bytes."""

from __future__ import annotations

import threading

from kuiper_core.explore.upload_store import StoredModel, UploadStore, content_digest


def _model(tag: str, n: int) -> StoredModel:
    files = {"param": tag.encode() * n, "bin": None}
    return StoredModel(content_digest(files), f"{tag}.pnnx.param", files)


def test_the_digest_is_of_the_content_by_role_and_options() -> None:
    a = content_digest({"param": b"x", "bin": b"y"})
    assert a == content_digest({"bin": b"y", "param": b"x"}) and len(a) == 16
    assert a != content_digest({"param": b"xy", "bin": b""})  # where one file ends matters
    assert a != content_digest({"param": b"x", "bin": b"y"}, {"inputshape": "[1,3,8,8]"})


def test_least_recently_used_models_go_first_within_the_byte_budget() -> None:
    store = UploadStore(max_bytes=100)
    a, b, c = _model("a", 40), _model("b", 40), _model("c", 40)
    assert store.put(a) and store.put(b)
    assert store.get(a.digest) is a  # a is now the most recently used
    assert store.put(c)
    assert a.digest in store and c.digest in store and b.digest not in store
    assert store.nbytes == 80 and len(store) == 2


def test_a_model_larger_than_the_budget_is_not_kept_and_evicts_nothing() -> None:
    store = UploadStore(max_bytes=100)
    small = _model("s", 10)
    store.put(small)
    assert not store.put(_model("big", 101))
    assert small.digest in store and store.get("0" * 16) is None


def test_concurrent_sessions_keep_it_within_budget() -> None:
    store = UploadStore(max_bytes=1000)

    def work(i: int) -> None:
        for j in range(50):
            store.put(_model(f"{i}-{j}", 30))
            store.get(_model(f"{i}-{j // 2}", 30).digest)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.nbytes <= 1000


def test_kept_inputs_and_references_share_one_byte_budget() -> None:
    """An uploaded input and computed references are kept like models (issue 38: a reload
    lost both): by their digest, least recently used first, none over the budget."""
    from kuiper_core.explore.upload_store import Kept

    store: UploadStore[Kept] = UploadStore(max_bytes=100)
    x, refs = Kept("input:aa", ("npy", b"x", "x.npy"), 60), Kept("refs:m:aa", {"a": 1}, 30)
    assert store.put(x) and store.put(refs) and store.get("input:aa") is x
    assert store.put(Kept("input:bb", None, 40))  # 130 > 100: the least recently used (refs) goes
    assert "refs:m:aa" not in store and "input:aa" in store
    assert not store.put(Kept("refs:huge", None, 101)) and "input:bb" in store
