"""The front door's Lua model router: CPU per request on the bodies that cost it most, in LuaJIT 2.1 as Envoy runs it.

    venv/bin/python benchmarks/bench_router.py [--limit 4Mi] [--runs 5]

Every body is as large as the request-body limit allows (a larger one is answered 413 from its declared
length, before a byte is read). Prints, per body shape, the median milliseconds of the JSON scan alone (in
Lua, timed by Lua: the whole body is scanned, as it is to find every top-level `model`) and of one whole
`envoy_on_request` against the tests' fake handle (which adds copying the body between Python and Lua both
ways, more than Envoy's buffer access costs), with the scan's MB/s.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lupa import luajit21  # noqa: E402

from modelplane.api.inference_gateway import body_limit_bytes  # noqa: E402
from modelplane.render.model_router import model_router_lua, scan_timer_lua  # noqa: E402
from envoy_lua import FakeHandle  # noqa: E402

MODELS = {f"team-{i}/model-{i}": f"team-{i}/model-{i}" for i in range(2000)} | {"chat": "team-1/model-1"}


def bodies(size: int) -> dict[str, bytes]:
    """Bodies of about `size` bytes, each ending with a top-level model the router must reach."""
    tail = b',"model":"chat"}'
    room = size - len(tail) - 16

    def fill(prefix: bytes, unit: bytes, close: bytes = b"") -> bytes:
        return prefix + unit * ((room - len(prefix) - len(close)) // len(unit)) + close + tail

    return {
        "one long prompt": fill(b'{"messages":[{"role":"user","content":"', b"lorem ipsum ", b'"}]'),
        "every character escaped": fill(b'{"p":"', b'\\"', b'"'),
        "tiny top-level members": b"{" + b'"k":1,' * ((room - 2) // 6) + tail[1:],
        "deep nesting": fill(b'{"n":', b"[", b"") + b"]" * 0,
        "many small arrays": fill(b'{"a":[', b"[],", b"[]]"),
        "a base64 image": fill(b'{"messages":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,',
                               b"iVBORw0KGgo", b'"}}]}]'),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", default="4Mi", help="the request-body limit (inferenceGateway.envoyGateway."
                                                       "requestBodyLimit), e.g. 4Mi")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    size = body_limit_bytes(args.limit)
    lua = luajit21.LuaRuntime(encoding=None, unpack_returned_tuples=True)
    lua.execute(model_router_lua(MODELS, {"team-1/model-1": "Qwen/Qwen3-8B"}, size).encode())
    on_request = lua.globals().envoy_on_request
    scan = lua.execute(scan_timer_lua(size).encode())
    print(f"router: {len(MODELS):,} names, body limit {args.limit} ({size:,} bytes), median of {args.runs} runs")
    print(f"{'BODY':26} {'BYTES':>10} {'SCAN MS':>8} {'MB/S':>8} {'CALL MS':>8}  OUTCOME")
    for name, body in bodies(size).items():
        scan_ms = statistics.median(scan(body) for _ in range(args.runs)) * 1000
        times = []
        for _ in range(args.runs):
            handle = FakeHandle("/v1/chat/completions", body=body, headers={"content-length": str(len(body))})
            start = time.perf_counter()
            on_request(handle)
            times.append(time.perf_counter() - start)
        result = (f"answered {json.loads(handle.response[1])['error']['code']}" if handle.response
                  else "routed, model rewritten" if handle.route_cleared else "untouched")
        ms = statistics.median(times) * 1000
        print(f"{name:26} {len(body):>10,} {scan_ms:>8.1f} {len(body) / 1e6 / (scan_ms / 1000):>8.0f} {ms:>8.1f}  "
              f"{result}")
    over = FakeHandle("/v1/chat/completions", body=b"{}", headers={"content-length": str(size + 1)})
    start = time.perf_counter()
    on_request(over)
    print(f"{'declared over the limit':26} {size + 1:>10,} {'-':>8} {'-':>8} "
          f"{(time.perf_counter() - start) * 1000:>8.3f}  "
          f"answered {over.response[0][':status']} before reading (body read: {over.body_read})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
