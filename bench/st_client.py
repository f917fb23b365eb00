"""A minimal Streamlit client over the app's websocket (`/_stcore/stream`), for bench_load.py.

It speaks the protocol the browser speaks: it sends a `BackMsg.rerun_script` (the page, the
URL's query string, the widget values that changed, the fragment a widget lives in) and reads
the `ForwardMsg`s back until `script_finished`, keeping the page's elements by their delta
path, as the frontend would draw them. It draws nothing and runs no JavaScript, so thirty of
them cost the client machine little: what they measure is the server.

Loopback or a given URL only; nothing here opens a browser.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import Any

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

# script_finished statuses that end a run the client asked for
_DONE = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)


class ProtocolError(RuntimeError):
    """The page did not show what the client looked for (a widget, a text)."""


@dataclass
class Element:
    kind: str  # the Element oneof: "button", "markdown", "dataframe", ...
    proto: Any
    fragment_id: str

    @property
    def text(self) -> str:
        return str(getattr(self.proto, "body", ""))

    @property
    def label(self) -> str:
        return str(getattr(self.proto, "label", ""))

    @property
    def id(self) -> str:
        return str(getattr(self.proto, "id", ""))

    def table(self) -> list[dict[str, Any]]:
        """A dataframe element's rows (Arrow IPC in the proto)."""
        import pyarrow as pa

        data = self.proto.arrow_data.data
        return pa.ipc.open_stream(io.BytesIO(data)).read_all().to_pylist()


@dataclass
class Run:
    seconds: float  # from sending the request to script_finished
    received: int  # bytes of ForwardMsgs
    messages: int


@dataclass
class Session:
    """One browser tab's worth of state: the pages, the elements on screen, the URL."""

    url: str  # ws://host:port (the stream path is added)
    query: str = ""
    ws: Any = None
    pages: dict[str, str] = field(default_factory=dict)  # url path -> page_script_hash
    page_hash: str = ""
    elements: dict[tuple[int, ...], Element] = field(default_factory=dict)
    cookies: str = ""

    @property
    def http_url(self) -> str:
        return "http" + self.url.rstrip("/")[2:]  # ws://h:p -> http://h:p

    async def fetch(self, path: str) -> int:
        """GET a path of the server as this tab's browser would (its cookies; a Set-Cookie kept):
        the HTTP status."""
        import asyncio
        import urllib.error
        import urllib.request

        def get() -> int:
            req = urllib.request.Request(self.http_url + path, headers={"Cookie": self.cookies} if self.cookies else {})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.read()
                    for c in r.headers.get_all("Set-Cookie") or []:
                        self.cookies = c.split(";", 1)[0]
                    return int(r.status)
            except urllib.error.HTTPError as e:
                return int(e.code)

        return await asyncio.to_thread(get)

    async def connect(self, page: str = "") -> Run:
        """Load the page (HTML: cookies, as a browser does first), then open the websocket."""
        status = await self.fetch("/" + page)
        if status != 200:
            raise ProtocolError(f"GET /{page}: HTTP {status}")
        headers = {"Cookie": self.cookies} if self.cookies else None
        self.ws = await websockets.connect(
            self.url.rstrip("/") + "/_stcore/stream",
            subprotocols=["streamlit"],  # type: ignore[list-item]
            max_size=None,
            additional_headers=headers,
            open_timeout=30,
            ping_interval=None,
        )
        return await self.rerun(ClientState(query_string=self.query, page_name=page))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def rerun(self, state: ClientState, timeout: float = 60.0) -> Run:
        msg = BackMsg()
        msg.rerun_script.CopyFrom(state)
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        received = messages = 0
        # What the run redraws replaces what was there: the whole page, or the fragment's part.
        if state.fragment_id:
            self.elements = {k: e for k, e in self.elements.items() if e.fragment_id != state.fragment_id}
        else:
            self.elements.clear()
        while True:
            left = timeout - (time.perf_counter() - t0)
            if left <= 0:
                raise TimeoutError(f"no script_finished within {timeout:.0f} s")
            data = await _recv(self.ws, left)
            received += len(data)
            messages += 1
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            kind = fwd.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
                self.page_hash = fwd.navigation.page_script_hash or self.page_hash
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                which = el.WhichOneof("type")
                self.elements[tuple(fwd.metadata.delta_path)] = Element(
                    str(which), getattr(el, str(which)), fwd.delta.fragment_id
                )
            elif kind == "script_finished" and fwd.script_finished in _DONE:
                return Run(time.perf_counter() - t0, received, messages)

    # -- what is on screen -----------------------------------------------------------------
    def find(self, kind: str, label: str | None = None, contains: str | None = None) -> Element:
        for el in self._in_order():
            if el.kind != kind:
                continue
            if label is not None and el.label != label:
                continue
            if contains is not None and contains not in el.text:
                continue
            return el
        raise ProtocolError(f"no {kind} {label or contains or ''!r} on the page")

    def find_all(self, kind: str) -> list[Element]:
        return [el for el in self._in_order() if el.kind == kind]

    def texts(self) -> list[str]:
        return [el.text for el in self._in_order() if el.text]

    def _in_order(self) -> list[Element]:
        return [self.elements[k] for k in sorted(self.elements)]

    # -- acting like a user ----------------------------------------------------------------------
    async def goto(self, path: str) -> Run:
        """Open another page of the app (the sidebar's link)."""
        if path not in self.pages:
            raise ProtocolError(f"no page {path!r} (pages: {sorted(self.pages)})")
        self.page_hash = self.pages[path]
        # A page link drops the URL's query parameters (the page writes its own back).
        return await self.rerun(ClientState(query_string="", page_script_hash=self.page_hash))

    async def click(self, label: str) -> Run:
        button = self.find("button", label=label)
        if button.proto.disabled:
            raise ProtocolError(f"button {label!r} is disabled")
        return await self._send(button, trigger_value=True)

    async def choose(self, label: str, option_contains: str) -> Run:
        """Pick the option of a radio or selectbox whose text contains `option_contains`."""
        widget = next((el for el in self._in_order() if el.label == label and el.kind in ("radio", "selectbox")), None)
        if widget is None:
            raise ProtocolError(f"no radio or selectbox {label!r} on the page")
        options = list(widget.proto.options)
        picked = next((o for o in options if option_contains in o), None)
        if picked is None:
            raise ProtocolError(f"{label!r} has no option containing {option_contains!r}: {options}")
        return await self._send(widget, string_value=picked)

    def current_option(self, label: str) -> str | None:
        """The value a selectbox or radio shows."""
        el = next((e for e in self._in_order() if e.label == label and e.kind in ("radio", "selectbox")), None)
        if el is None:
            return None
        p = el.proto
        if getattr(p, "set_value", False) and p.HasField("raw_value"):
            return str(p.raw_value)
        return str(p.options[p.default]) if p.HasField("default") and p.default < len(p.options) else None

    def image_urls(self) -> list[str]:
        return [img.url for el in self.find_all("imgs") for img in el.proto.imgs]

    def component(self, name: str) -> dict[str, Any]:
        """The data a custom component (st.components.v2) `name` was given."""
        import json

        for el in self.find_all("bidi_component"):
            if el.proto.component_name == name:
                return json.loads(el.proto.json)
        raise ProtocolError(f"no component {name!r} on the page")

    async def set_component_state(self, name: str, **state: Any) -> Run:
        """What the browser does when component `name` reports `state` (e.g. a walk's step)."""
        import json

        el = next((e for e in self.find_all("bidi_component") if e.proto.component_name == name), None)
        if el is None:
            raise ProtocolError(f"no component {name!r} on the page")
        return await self._send(el, json_value=json.dumps(state))

    async def set_number(self, label: str, value: int) -> Run:
        widget = self.find("number_input", label=label)
        return await self._send(widget, int_value=value)

    async def _send(self, widget: Element, **value: Any) -> Run:
        state = ClientState(query_string=self.query, page_script_hash=self.page_hash, fragment_id=widget.fragment_id)
        w = state.widget_states.widgets.add()
        w.id = widget.id
        for k, v in value.items():
            setattr(w, k, v)
        return await self.rerun(state)


async def _recv(ws: Any, timeout: float) -> bytes:
    import asyncio

    data = await asyncio.wait_for(ws.recv(), timeout)
    if isinstance(data, str):
        raise ProtocolError("a text frame from the server")
    return data
