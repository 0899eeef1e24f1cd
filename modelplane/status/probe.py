"""The front door's health check of a replica, made from here: `GET /health` on the replica's workload
gateway with the replica's virtual host as `Host`, 200 expected (the way the front door's Envoy probes it)."""
from __future__ import annotations

import http.client
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..render.types import HEALTH_PATH
from .observations import Probe

PROBE_TIMEOUT = 2.0  # seconds per replica
MAX_PARALLEL_PROBES = 32


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
    host, port = split_address(target.address, target.port)
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", HEALTH_PATH, headers={"Host": target.host, "User-Agent": "modelplane-status"})
        response = connection.getresponse()
        response.read()
    except (TimeoutError, socket.timeout):
        return Probe("unreachable", detail=f"no answer within {timeout:g} s")
    except ConnectionRefusedError:
        return Probe("unreachable", detail=f"connection refused by {host}:{port}")
    except socket.gaierror:
        return Probe("unreachable", detail=f"cannot resolve {host}")
    except OSError as error:
        return Probe("unreachable", detail=error.strerror or type(error).__name__)
    except http.client.HTTPException as error:
        return Probe("unreachable", detail=f"broken answer ({type(error).__name__})")
    finally:
        connection.close()
    if response.status == 200:
        return Probe("healthy", 200)
    return Probe("unhealthy", response.status)


def probe_all(targets: list[ProbeTarget], timeout: float = PROBE_TIMEOUT) -> dict[tuple[str, str], Probe]:
    """Every target at once (threads): the slowest probe, not their sum, is what it costs."""
    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_PROBES, len(targets))) as pool:
        results = list(pool.map(lambda t: probe(t, timeout), targets))
    return {t.key: r for t, r in zip(targets, results)}
