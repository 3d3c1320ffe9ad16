"""What answers at a Ray address, asked before ``ray.init`` is, so that a wrong address is one line at once.

Ray on its own retries an address for a minute or more whatever the reason it cannot join (nothing
listening, a listener that is not Ray, a token it does not send), then reports a timeout that names
none of them. The answers it needs are cheap to get first: a TCP connection, then the HTTP/2 preface
every gRPC server answers with a SETTINGS frame, then one unary call that only a Ray GCS (or only a
Ray Client server) implements; token authentication refuses that call with UNAUTHENTICATED before
it reaches the service. Whatever this cannot decide (an overloaded head, TLS) is left to Ray.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
CLIENT_METHOD = "/ray.rpc.RayletDriver/ClusterInfo"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + an empty SETTINGS frame
SETTINGS = 0x04
ANSWER_S = 5.0
"""How long a listener has to answer the preface or the call: a GCS answers in milliseconds even on a
loaded machine; a listener that says nothing for this long is not one."""

START = ("start the cluster's head there (`ray start --head`), point collector.address or RAY_ADDRESS at a "
         "running one, or use collector.address=local")
PORTS = ("the GCS listens on `ray start --port` (6379 by default) and Ray Client on `--ray-client-server-port` "
         "(10001, with ray://)")


def check(address: str, connect_timeout: float) -> str | None:
    """Why ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) cannot be a Ray cluster this process may
    join, as the text after ``collector.address=ADDRESS: ``; None when it looks like one (or when only
    Ray can tell)."""
    client = address.startswith("ray://")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    sock = _connect(host, int(port), connect_timeout)
    if isinstance(sock, str):
        return sock
    with sock:
        if _truthy(os.environ.get("RAY_USE_TLS")):
            return None  # a TLS channel needs the certificates Ray reads itself: let it judge
        kind = _http2(sock)
    return kind if kind is not None else _grpc(f"{host}:{port}", client)


def _connect(host: str, port: int, timeout: float) -> socket.socket | str:
    """A connected socket, or why there is none. A refusal, an unknown host or no route is final at
    once; only silence (a firewall that drops, a host still booting) is waited out, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            return socket.create_connection((host, port), timeout=max(min(remaining, 5.0), 0.1))
        except socket.gaierror as exc:
            return f"the host name {host!r} is unknown ({exc.strerror or exc}); check it, or {START}"
        except TimeoutError:
            if time.monotonic() + 0.5 >= deadline:
                return (f"nothing answers there within {timeout:g} s (connection timed out): a firewall or "
                        "security group may drop it (docs/SCALE.md lists the ports a cluster needs open); raise "
                        f"collector.connect_timeout_s for a head still booting, or {START}")
            time.sleep(0.5)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return f"nothing listens there ({reason}); {START}"


def _http2(sock: socket.socket) -> str | None:
    """None when the listener answers as a gRPC (HTTP/2) server; otherwise what it is instead."""
    sock.settimeout(ANSWER_S)
    reply = b""
    try:
        sock.sendall(PREFACE)
        while len(reply) < 9:
            more = sock.recv(9 - len(reply))
            if not more:
                break
            reply += more
    except TimeoutError:
        return (f"something accepts TCP connections there but is not Ray: it sent nothing for {ANSWER_S:g} s where a "
                f"Ray GCS or Ray Client server answers at once; check the host and port ({PORTS})")
    except OSError as exc:
        if not reply:
            return (f"something accepts TCP connections there but is not Ray: it dropped the connection "
                    f"({exc.strerror or type(exc).__name__}); check the host and port ({PORTS})")
    if len(reply) >= 4 and reply[3] == SETTINGS:
        return None
    if reply[:1] in (b"\x15", b"\x16"):  # a TLS record: alert or handshake
        return ("the listener there speaks TLS: a cluster started with RAY_USE_TLS=1 needs RAY_USE_TLS=1, "
                "RAY_TLS_SERVER_CERT, RAY_TLS_SERVER_KEY and RAY_TLS_CA_CERT here too (docs/SCALE.md)")
    reply += _rest_of_line(sock)
    shown = reply.decode("ascii", "replace").split("\r\n")[0].split("\n")[0].strip()[:80]
    answer = f"it answered {shown!r}" if shown.isprintable() and shown else (
        "it closed the connection" if not reply else "it answered something that is not HTTP/2")
    return (f"something accepts TCP connections there but is not Ray ({answer}, not gRPC); check the host and "
            f"port ({PORTS})")


def _rest_of_line(sock: socket.socket) -> bytes:
    """What more the listener sent, up to its first line's end, to name it by."""
    sock.settimeout(1.0)
    more = b""
    try:
        while b"\n" not in more and len(more) < 200:
            chunk = sock.recv(200)
            if not chunk:
                break
            more += chunk
    except OSError:
        pass
    return more


def _grpc(target: str, client: bool) -> str | None:
    try:
        import grpc  # Ray's own dependency
    except ImportError:
        return None
    mine, other = (CLIENT_METHOD, GCS_METHOD) if client else (GCS_METHOD, CLIENT_METHOD)
    # straight to the address, as the socket above went: a proxy from http_proxy would answer instead
    channel = grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)])
    try:
        code = _call(grpc, channel, mine)
        if code is None or code not in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAUTHENTICATED):
            return None  # Ray answered (or could not be asked in time: Ray will tell)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return _token_refused()
        if _call(grpc, channel, other) not in (None, grpc.StatusCode.UNIMPLEMENTED):
            if client:
                return ("that is a Ray GCS port, not Ray Client's: use the head's client port with ray:// "
                        "(`ray start --ray-client-server-port`, 10001 by default), or drop ray:// where this "
                        "process runs on a node of the cluster")
            return (f"that is Ray Client's port, not the GCS: use ray://{target}, or the GCS port "
                    "(`ray start --port`, 6379 by default) where this process runs on a node of the cluster")
        return f"a gRPC server answers there but it is not Ray; check the host and port ({PORTS})"
    finally:
        channel.close()


def _call(grpc, channel, method: str):
    """The status code of one call to ``method``, or None when the server did not answer in time."""
    request = _PING if method == CLIENT_METHOD else b""
    call = channel.unary_unary(method, request_serializer=lambda data: data, response_deserializer=lambda data: data)
    try:
        call(request, timeout=ANSWER_S, metadata=_token_metadata())
    except grpc.RpcError as exc:
        code = exc.code()
        return None if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE) else code
    return grpc.StatusCode.OK


_PING = b"\x08\x06"
"""ClusterInfoRequest(type=PING) as protobuf bytes: the one request Ray Client's proxy answers itself,
without starting a server for a client that never comes."""


def _token_source() -> tuple[str, str] | None:
    """(where the token comes from, the token) as a Ray driver of this process would send it: only
    with RAY_AUTH_MODE=token, from RAY_AUTH_TOKEN, else RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token."""
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return None
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN", os.environ["RAY_AUTH_TOKEN"].strip()
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    try:
        token = path.read_text().strip()
    except OSError:
        return None
    return (str(path), token) if token else None


def _token_metadata() -> tuple[tuple[str, str], ...]:
    source = _token_source()
    return (("authorization", f"Bearer {source[1]}"),) if source else ()


def _token_refused() -> str:
    source = _token_source()
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return ("the cluster requires token authentication and this process sends no token: set RAY_AUTH_MODE=token "
                "and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file) to the cluster's token here (docs/SCALE.md)")
    if source is None:
        return ("the cluster requires token authentication and RAY_AUTH_MODE=token here finds no token: set "
                "RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH (a file) to the cluster's token")
    return (f"the cluster refused this process's token (from {source[0]}): give it the token the cluster was "
            "started with (after a rotation, the new one)")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes")
