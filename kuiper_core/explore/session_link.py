"""A session's link: the model and input a URL names, read as untrusted text (a link's text is
never shown as written), and the URL a session writes so a reload or a shared link opens the
same model, input and page position.

    ?model=NAME      a bundled model          ?upload=DIGEST  an upload the server keeps by content
    ?input=DIGEST    an uploaded input        + each page's own keys (step=, q=, ...)

A session's model choice is a plain dict kept in its state:
{"source": "bundled", "name": NAME}, {"source": "upload", "name": FILE, "digest": HEX}, or
{"source": "lost", "name": "", "digest": HEX} (the URL named an upload the server no longer has).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .upload_store import DIGEST_CHARS, StoredModel

DIGEST = re.compile(rf"[0-9a-f]{{{DIGEST_CHARS}}}")  # what upload_store.content_digest writes into a link
MODEL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")  # a bundled model's name as a link may carry it
BAD_UPLOAD_NOTE = "The link's `upload=` is not a model this app made a link for: ignored."
INPUT_LOST_NOTE = (
    "The link's input (an uploaded array, picture or drawing) is no longer on this server (it restarted, or "
    "dropped it for newer uploads): the pages use the default input instead (the sidebar says which), and "
    "references computed for that input are gone. Upload the input again on the Home page."
)
REFS_LOST_NOTE = (
    "The link's reference file (an uploaded .npz) is no longer on this server (it restarted, or dropped it for "
    "newer uploads): nothing is compared with it. Upload it again under **Compare with** on the Forward page."
)


def bundled_choice(name: str) -> dict[str, str]:
    return {"source": "bundled", "name": name}


def upload_choice(stored: StoredModel) -> dict[str, str]:
    return {"source": "upload", "name": stored.name, "digest": stored.digest}


def lost_choice(digest: str) -> dict[str, str]:
    return {"source": "lost", "name": "", "digest": digest[:64]}


def is_digest(text: str | None) -> bool:
    return text is not None and DIGEST.fullmatch(text) is not None


@dataclass
class LinkedModel:
    """What a new session's URL opens: `choice` (None: no model at all), the stored upload it
    names when the server still has it, and `note`, what the link asked for and did not get."""

    choice: dict[str, str] | None
    stored: StoredModel | None = None
    note: str | None = None


def model_from_link(
    upload: str | None, model: str | None, bundled: Collection[str], find: Callable[[str], StoredModel | None]
) -> LinkedModel:
    """The model of a URL with `upload=` and `model=` (None when absent): an upload comes back
    from the store (`find`), else it is 'lost' (pages say so) instead of quietly another model;
    a bundled name the app does not have opens the default (the first of `bundled`) and says so."""
    note = None
    if upload is not None and not is_digest(upload):
        note, upload = BAD_UPLOAD_NOTE, None
    if upload is not None:
        stored = find(upload)
        if stored is not None:
            return LinkedModel(upload_choice(stored), stored)
        return LinkedModel(lost_choice(upload))
    name = model if model in bundled else next(iter(bundled), None)
    if name is None:
        return LinkedModel(None, note=note)
    if model is not None and model != name:
        named = f" `{model}`" if MODEL_NAME.fullmatch(model) else ""  # else not repeated (a link's Markdown)
        wrong = f"The link names a bundled model{named} that this app does not have: opened `{name}` instead."
        note = f"{note}\n\n{wrong}" if note else wrong
    return LinkedModel(bundled_choice(name), note=note)


def link_params(
    choice: Mapping[str, Any] | None, input_digest: str | None, page: Mapping[str, str | None]
) -> dict[str, str]:
    """The URL's parameters: the model (a lost model's link stays: re-uploading restores it),
    an uploaded input kept by content, and the page's position (None leaves a key out)."""
    choice = choice or {}
    params: dict[str, str] = {}
    if choice.get("source") == "bundled":
        params["model"] = str(choice["name"])
    elif choice.get("source") in ("upload", "lost"):
        params["upload"] = str(choice["digest"])
    if input_digest is not None:
        params["input"] = input_digest
    params.update({k: v for k, v in page.items() if v is not None})
    return params


def lost_model_message(digest: str) -> str:
    """Why the session has no model although its URL named the upload `digest`."""
    return (
        f"The link names an uploaded model (content digest `{digest}`) that this server no longer has: the server "
        "restarted, or it dropped the model to make room for newer uploads. Upload the model again (the same file "
        "gets the same link), or pick a bundled model on the Home page."
    )


def unkept_note(nbytes: int, store_bytes: int) -> str:
    """That a reload will not find an upload of `nbytes`, too big for the store."""
    return (
        f"This upload ({nbytes / 2**20:.0f} MB) is larger than the {store_bytes / 2**30:.0f} GB this "
        "server keeps for reloads and links: a reload will not find it."
    )
