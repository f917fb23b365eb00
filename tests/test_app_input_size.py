"""AppTest: a dynamic-shape export (`?` dims) runs at the size the user picks on Home."""

from __future__ import annotations

import pytest
from conftest import DATA, ROOT

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
import apptest_helpers  # noqa: E402, F401  (the AppTest set-up every app test file runs under: one manifest scan, app.py navigation)

DYN = DATA / "optlevel" / "resnet18" / "dyn"


def _upload(at: AppTest) -> AppTest:
    at.file_uploader(key="home_param").upload("resnet18_dyn.pnnx.param", (DYN / "model.pnnx.param").read_bytes())
    at.file_uploader(key="home_bin").upload("model.pnnx.bin", (DYN / "model.pnnx.bin").read_bytes())
    next(b for b in at.button if b.label == "Load uploaded model").click().run()
    return at


@pytest.mark.slow
def test_dynamic_model_runs_at_the_chosen_size() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    _upload(at)
    assert not at.exception, [e.value for e in at.exception]
    sizes = [n for n in at.number_input if n.key and n.key.startswith("home_size_")]
    assert [n.label for n in sizes] == ["`0` dim 2", "`0` dim 3"]
    sizes[0].set_value(40).run()
    [n for n in at.number_input if n.key and n.key.startswith("home_size_")][1].set_value(56).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("shape 1x3x40x56" in c.value for c in at.caption), [c.value for c in at.caption]
    at.switch_page("pages/6_profile.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_static_model_has_no_size_picker() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not [n for n in at.number_input if n.key and n.key.startswith("home_size_")]
