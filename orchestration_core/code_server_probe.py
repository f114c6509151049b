"""The code servers' container healthcheck: the gRPC health check `dagster api grpc-health-check` makes, without
importing Dagster.

`dagster api grpc-health-check` loads all of Dagster first: about 1.3 s of CPU per check, every 15 s in each code
server's container, and over the check's 10 s timeout on a loaded 2-core host, where it marked healthy code servers
unhealthy and so kept the webserver and the daemon (which wait for them to be healthy) from starting. This asks the
same question (the standard `grpc.health.v1.Health/Check` for the service "DagsterApi", answered by Dagster's code
server and its proxy) with grpcio alone: about 0.13 s of CPU (bench/healthcheck_probe.py).

Usage: `python -m orchestration_core.code_server_probe PORT [HOST]`; exit 0 when the server answers SERVING, 1 with a
reason otherwise. Only grpcio and its health-checking package are imported, both already dependencies of Dagster.
"""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# The service name Dagster's code servers register their health status under (dagster._grpc.server).
DAGSTER_SERVICE = "DagsterApi"
TIMEOUT_SECONDS = 5.0


def code_server_status(host: str, port: int, timeout_seconds: float = TIMEOUT_SECONDS) -> str:
    """The serving status the code server at host:port reports ("SERVING", "NOT_SERVING", ...), or
    "UNREACHABLE (<gRPC status code>)" when it does not answer within the timeout."""
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=DAGSTER_SERVICE), timeout=timeout_seconds)
        except grpc.RpcError as error:
            return f"UNREACHABLE ({error.code().name})"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2 or not argv[0].isdigit():
        print("usage: python -m orchestration_core.code_server_probe PORT [HOST]", file=sys.stderr)
        return 2
    host = argv[1] if len(argv) == 2 else "127.0.0.1"
    status = code_server_status(host, int(argv[0]))
    if status != "SERVING":
        print(f"code server at {host}:{argv[0]} is not serving: {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
