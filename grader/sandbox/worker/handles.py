"""The student's objects a worker keeps between requests, by number, and a request's values decoded with them.

A reply never carries a student's object itself: a request that keeps its result gets a handle (a number
and the object's type name), and later requests name the object by that number. The request operations
(``ops_*.py``) all build on this one class.
"""

from __future__ import annotations

from typing import Any


class Handles:
    """The student's objects (anything at all), numbered from 1 in the order they were kept."""

    def __init__(self, protocol) -> None:
        self.protocol = protocol
        self.handles: dict[int, Any] = {}  # the student's objects: anything at all

    def handle(self, obj) -> dict:
        self.handles[len(self.handles) + 1] = obj
        kind = type(obj)
        return {"t": "handle", "id": len(self.handles), "type": f"{kind.__module__}.{kind.__qualname__}"}

    def value(self, enc, blobs):
        return self.protocol.decode(enc, blobs, lambda i, _t: self.handles[i], make_info=self.protocol.meta_tensor)
