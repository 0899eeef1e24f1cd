"""A fake of Envoy's Lua stream handle, and the front door's scripts run in a real LuaJIT 2.1 (as Envoy runs them)."""
from __future__ import annotations

from lupa import luajit21

# --- a fake of Envoy's stream handle (lupa drops the Lua `self` that `handle:f()` passes) -------------

class FakeBuffer:
    def __init__(self, data: bytes):
        self.data = data

    def length(self):
        return len(self.data)

    def setBytes(self, data):
        self.data = bytes(data)

    def getBytes(self, index, length):
        index, length = int(index), int(length)
        if index < 0 or index + length > len(self.data):
            raise IndexError("index + length must not exceed the buffer")  # Envoy raises a Lua error too
        return self.data[index:index + length]


class FakeHeaders:
    def __init__(self, headers: dict[str, str]):
        self.values = {k.encode(): v.encode() for k, v in headers.items()}

    def get(self, key):
        return self.values.get(key)

    def getNumValues(self, key):
        return int(key in self.values)

    def replace(self, key, value):
        self.values[key] = value

    def remove(self, key):
        self.values.pop(key, None)

    def text(self, key: str) -> str | None:
        value = self.values.get(key.encode())
        return None if value is None else value.decode()


class FakeHandle:
    def __init__(self, path: str, method: str = "POST", body: bytes | None = None, headers=None):
        self.headers_ = FakeHeaders({":path": path, ":method": method, **(headers or {})})
        self.buffer = None if body is None else FakeBuffer(body)
        self.body_read = False
        self.route_cleared = False
        self.response = None  # (headers, body) once the script answered

    def headers(self):
        return self.headers_

    def body(self):
        self.body_read = True
        return self.buffer

    def respond(self, headers, body):
        assert self.response is None, "respond called twice"
        self.response = ({k.decode(): v.decode() for k, v in headers.items()}, body)

    def clearRouteCache(self):
        self.route_cleared = True

    def logDebug(self, _msg):
        pass

    logInfo = logWarn = logDebug


LIMIT = 4 * 1024 * 1024


def on_request(script: str) -> object:
    """`envoy_on_request` of a fresh LuaJIT running `script`; strings cross as bytes, as in Envoy."""
    lua = luajit21.LuaRuntime(encoding=None, unpack_returned_tuples=True)
    lua.execute(script.encode())
    return lua.globals().envoy_on_request
