"""The Pulumi program served to a `pulumi` CLI that this process starts (`modelplane up`), as the Automation API
serves an inline program: a language runtime on a local port, which `pulumi up --client=<address>` runs the program
through. No Python language host is needed, and the CLI keeps its own output and prompts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent import futures

import grpc  # type: ignore[import-untyped]
from pulumi.automation._server import LanguageServer
from pulumi.runtime.proto import language_pb2_grpc

from .program import run


def _program() -> None:
    run()


@contextlib.contextmanager
def program_server() -> Iterator[str]:
    """`127.0.0.1:<port>`, serving the program until the block ends (after the CLI has exited)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[("grpc.max_receive_message_length", -1)])
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(_program), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)
