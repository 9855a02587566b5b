"""The dashboard: static files that read the query API from the browser. `blackbox serve` serves
them at `/`; in AWS they can be hosted as they are (the `api` query parameter names the API)."""

from __future__ import annotations

import mimetypes
from importlib import resources

_STATIC = resources.files(__package__) / "static"
_PREFIX = "/dashboard/"


def asset(path: str) -> tuple[bytes, str] | None:
    """The file behind a dashboard URL path and its content type, or None."""
    if path in ("/", "/dashboard", _PREFIX):
        name = "index.html"
    elif path.startswith(_PREFIX):
        name = path[len(_PREFIX):]
    else:
        return None
    # only plain names: nothing outside the static folder can be reached
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    file = _STATIC / name
    if not file.is_file():
        return None
    return file.read_bytes(), mimetypes.guess_type(name)[0] or "application/octet-stream"
