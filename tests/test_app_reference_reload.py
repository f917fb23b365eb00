"""AppTest, issue 38: an uploaded reference .npz survives a reload and a shared link (the URL's
`refs=`, kept by content on the server as an uploaded input is), and a link whose file the
server no longer has says so instead of comparing with nothing."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import SAMPLES

pytest.importorskip("streamlit")
from apptest_helpers import FORWARD, app, forward_go, no_exception, texts  # noqa: E402


def _query(at) -> dict[str, str]:
    return {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}


@pytest.mark.slow
def test_an_uploaded_reference_file_survives_a_reload() -> None:
    at = app("digits_cnn", FORWARD)
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays[next(iter(arrays))] = arrays[next(iter(arrays))] + 1.0  # one wrong: not PyTorch's bundled values
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    at.file_uploader(key="forward_refs").upload("mine.npz", buf.getvalue()).run()
    no_exception(at)
    forward_go(at, 10**6)
    before = " ".join(texts(at.error) + texts(at.success))
    assert "the uploaded mine.npz" in before, before
    query = _query(at)
    assert query.get("refs"), query

    reloaded = app(None, FORWARD, query=query)
    assert reloaded.radio(key="fw_ref_choice").value == "upload"
    after = " ".join(texts(reloaded.error) + texts(reloaded.success))
    assert "the uploaded mine.npz" in after and "over tolerance" in after, after  # the file's own (wrong) value
    assert any(f"All {len(arrays)} arrays matched" in c.value for c in reloaded.caption), texts(reloaded.caption)
    assert not reloaded.warning, texts(reloaded.warning)
    assert _query(reloaded).get("refs") == query["refs"]  # the link stays a link to it

    gone = app(None, FORWARD, query={**query, "refs": "0123456789abcdef"})
    warned = " ".join(texts(gone.warning))
    assert "The link's reference file" in warned and "no longer on this server" in warned, warned
    assert "the uploaded mine.npz" not in " ".join(texts(gone.error) + texts(gone.success))
