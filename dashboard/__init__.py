"""The dashboard: static files that read the query API from the browser. `blackbox serve` serves
them at `/`. They talk only to the origin that serves them, so the read key never leaves it."""

from __future__ import annotations

import mimetypes
from importlib import resources

_STATIC = resources.files(__package__) / "static"
_PREFIX = "/dashboard/"
_FILES = frozenset(item.name for item in _STATIC.iterdir() if item.is_file() and not item.name.startswith("."))

# what the dashboard's own files need, nothing more: its script and style, its origin's API, images
# from blob: (fetched attachments) and data: (the empty favicon). No inline script, so a value from a
# crash report that reached the page as markup still could not run; no framing (clickjacking).
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
          "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": POLICY, "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}


def asset(path: str) -> tuple[bytes, str] | None:
    """The file behind a dashboard URL path and its content type, or None."""
    if path in ("/", "/dashboard", _PREFIX):
        name = "index.html"
    elif path.startswith(_PREFIX):
        name = path[len(_PREFIX):]
    else:
        return None
    # only the folder's own files: nothing outside it is named, and no name reaches the file system
    if name not in _FILES:
        return None
    return (_STATIC / name).read_bytes(), mimetypes.guess_type(name)[0] or "application/octet-stream"
