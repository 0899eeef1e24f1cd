"""The front door's health check of a replica, made from here: `GET /health` on the replica's workload
gateway with the replica's virtual host as `Host`, 200 expected (the way the front door's Envoy probes it)."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..render.types import HEALTH_PATH
from .deadline import Watchdog, gather
from .observations import Probe

PROBE_TIMEOUT = 2.0  # seconds per replica
MAX_PARALLEL_PROBES = 64
MAX_BODY_READ = 4096


@dataclass(frozen=True)
class ProbeTarget:
    key: tuple[str, str]  # (namespace, replica)
    address: str  # the workload gateway's address: a host name or IP, optionally with :port
    port: int  # the gateway's HTTP listener port, used when the address carries none
    host: str  # replica_host(namespace, replica)


def split_address(address: str, default_port: int) -> tuple[str, int]:
    """`10.0.0.1` / `gw.example.com:8080` / `[::1]:8080` / `::1` -> (host, port)."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else default_port
    if address.count(":") == 1:
        host, _, port = address.partition(":")
        if port.isdigit():
            return host, int(port)
    return address, default_port


def probe(target: ProbeTarget, timeout: float = PROBE_TIMEOUT) -> Probe:
    """The answer's status line is all that counts: at most `MAX_BODY_READ` bytes of its body are read, and the whole exchange (connection,
    status line, headers) must finish within `timeout`, even from a gateway that trickles its answer."""
    host, port = split_address(target.address, target.port)
    if not 0 < port < 65536:
        return Probe("unreachable", detail=f"the gateway address has an invalid port {port}")
    watchdog = Watchdog(time.monotonic() + timeout)
    connection = _GuardedConnection(host, port, timeout, watchdog)
    try:
        connection.request("GET", HEALTH_PATH, headers={"Host": target.host, "User-Agent": "modelplane-status"})
        response = connection.getresponse()
        status = response.status
        response.read(MAX_BODY_READ)  # a little, so a short answer is consumed; an endless one is cut off
        if watchdog.expired:  # cut off mid-answer: the status line alone proves nothing
            return Probe("unreachable", detail=f"no complete answer within {timeout:g} s")
    except TimeoutError:
        return Probe("unreachable", detail=f"no answer within {timeout:g} s")
    except ConnectionRefusedError:
        return Probe("unreachable", detail=f"connection refused by {host}:{port}")
    except socket.gaierror:
        return Probe("unreachable", detail=f"cannot resolve {host}")
    except UnicodeError:  # a host name IDNA cannot encode
        return Probe("unreachable", detail=f"the gateway address {host!a} is not a host name that can be encoded")
    except (OSError, http.client.HTTPException) as error:
        if watchdog.expired:
            return Probe("unreachable", detail=f"no complete answer within {timeout:g} s")
        if isinstance(error, OSError):
            return Probe("unreachable", detail=error.strerror or type(error).__name__)
        return Probe("unreachable", detail=f"broken answer ({type(error).__name__})")
    finally:
        watchdog.cancel()
        connection.close()
    if status == 200:
        return Probe("healthy", 200)
    return Probe("unhealthy", status)


class _GuardedConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, timeout: float, watchdog: Watchdog):
        super().__init__(host, port, timeout=timeout)
        self._watchdog = watchdog

    def connect(self) -> None:
        super().connect()
        self._watchdog.guard(self.sock)


def probe_all(
    targets: list[ProbeTarget], timeout: float = PROBE_TIMEOUT, on_done: Callable[[int], None] = lambda done: None
) -> dict[tuple[str, str], Probe]:
    """Every target at once (threads): the slowest probe, not their sum, is what it costs, and never more than
    `timeout` plus a second. `on_done(n)` as each answers."""
    results = gather(
        lambda t: probe(t, timeout),
        targets,
        MAX_PARALLEL_PROBES,
        timeout + 1.0,
        late=lambda t: Probe("unreachable", detail=f"no answer within {timeout:g} s"),
        failed=lambda t, e: Probe("unreachable", detail=f"probe failed ({type(e).__name__})"),
        on_done=on_done,
    )
    return {t.key: r for t, r in zip(targets, results, strict=True)}
