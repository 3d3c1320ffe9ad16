"""Joining a cluster fails fast and says why: a refused connection at once, a listener that is not Ray
named as such, a cluster that wants a token (or another one) told apart from one that is not there, a
Ray or Python version mismatch as one line naming both sides, a private Ray that cannot start as one
line; and the Ray the plugin pins is the Ray it runs with.

Every listener here is one the test opens on 127.0.0.1 itself; ``ray.init`` is replaced by a stub that
fails the test where the check should have answered first (Ray alone retries for a minute or more)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import tomllib
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from rlf_plugin_ray import RayCollectorConfig
from rlf_plugin_ray import collector as collector_module
from rlf_plugin_ray.collector import CLIENT_SERVER_TRIES, connect
from rlf_plugin_ray.config import PINNED_RAY
from rlf_plugin_ray.probe import CLIENT_METHOD, GCS_METHOD

from rlf import ConfigError

RLF = str(Path(sys.executable).parent / "rlf")
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.fixture(autouse=True)
def no_ray_init(monkeypatch):
    import ray

    def reached(*args, **kwargs):
        raise AssertionError("ray.init was reached: the address check should have answered")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", reached)
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_USE_TLS"):
        monkeypatch.delenv(name, raising=False)


def closed_port() -> int:
    with socket.socket() as probe:  # nothing listens there once the probe is closed
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def join(address: str, **settings) -> str:
    with pytest.raises(ConfigError) as caught:
        connect(RayCollectorConfig(address=address, **settings), 1)
    return str(caught.value)


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_refused_connection_is_one_line_at_once_not_after_the_connect_timeout(scheme):
    address = f"{scheme}127.0.0.1:{closed_port()}"
    started = time.monotonic()
    message = join(address, connect_timeout_s=30)
    assert time.monotonic() - started < 5
    assert message == (
        f"collector.address={address}: nothing listens there (Connection refused); start the cluster's head there "
        "(`ray start --head`), point collector.address or RAY_ADDRESS at a running one, or use collector.address=local")


class Listener:
    """A TCP listener on 127.0.0.1 that answers each connection with ``reply`` (None: says nothing)."""

    def __init__(self, reply: bytes | None):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.recv(1024)
                if self.reply is None:
                    self.stop.wait(8)
                else:
                    conn.sendall(self.reply)

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize(("reply", "what"), [
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", " (it answered 'HTTP/1.1 400 Bad Request', not gRPC)"),
    (b"-ERR unknown command 'PRI'\r\n", " (it answered \"-ERR unknown command 'PRI'\", not gRPC)"),
    (b"", " (it closed the connection, not gRPC)"),
    (None, ": it sent nothing for 5 s where a Ray GCS or Ray Client server answers at once"),
])
def test_a_listener_that_is_not_ray_is_named_as_such_not_blamed_on_token_auth(reply, what):
    listener = Listener(reply)
    try:
        for address in (f"127.0.0.1:{listener.port}", f"ray://127.0.0.1:{listener.port}"):
            started = time.monotonic()
            message = join(address)
            assert time.monotonic() - started < 12
            assert message == (
                f"collector.address={address}: something accepts TCP connections there but is not Ray{what}; "
                "check the host and port (the GCS listens on `ray start --port` (6379 by default) and Ray Client on "
                "`--ray-client-server-port` (10001, with ray://))")
            assert "token" not in message
    finally:
        listener.close()


def test_a_tls_listener_is_named_as_such_and_left_to_ray_where_this_process_uses_tls(monkeypatch):
    listener = Listener(b"\x15\x03\x01\x00\x02\x02\x32")  # a TLS alert: what a TLS server says to plain text
    try:
        address = f"127.0.0.1:{listener.port}"
        assert join(address) == (
            f"collector.address={address}: the listener there speaks TLS: a cluster started with RAY_USE_TLS=1 needs "
            "RAY_USE_TLS=1, RAY_TLS_SERVER_CERT, RAY_TLS_SERVER_KEY and RAY_TLS_CA_CERT here too (docs/SCALE.md)")
        monkeypatch.setenv("RAY_USE_TLS", "1")
        with pytest.raises(AssertionError, match="ray.init was reached"):  # Ray, with the certificates, judges
            connect(RayCollectorConfig(address=address), 1)
    finally:
        listener.close()


class FakeRay:
    """A gRPC server on 127.0.0.1 implementing ``methods`` (answered with empty messages), refusing calls
    without ``token`` as Ray's token authentication does (UNAUTHENTICATED before the service)."""

    def __init__(self, methods: tuple[str, ...], token: str | None = None):
        self.calls: list[str] = []
        outer = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details):
                if details.method not in methods:
                    return None  # grpc answers UNIMPLEMENTED

                def answer(request, context):
                    outer.calls.append(details.method)
                    given = dict(context.invocation_metadata()).get("authorization")
                    if token is not None and given != f"Bearer {token}":
                        context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken: missing or incorrect")
                    return b""

                return grpc.unary_unary_rpc_method_handler(answer, lambda data: data, lambda data: data)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[Handler()])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def close(self):
        self.server.stop(None)


def test_a_grpc_server_that_is_not_ray_is_named_as_such():
    other = FakeRay(())
    try:
        message = join(f"127.0.0.1:{other.port}")
        assert message.startswith(f"collector.address=127.0.0.1:{other.port}: a gRPC server answers there but it "
                                  "is not Ray; check the host and port")
    finally:
        other.close()


def test_the_client_port_given_as_a_gcs_address_and_the_other_way_round_say_which_port_it_is():
    client, gcs = FakeRay((CLIENT_METHOD,)), FakeRay((GCS_METHOD,))
    try:
        assert join(f"127.0.0.1:{client.port}") == (
            f"collector.address=127.0.0.1:{client.port}: that is Ray Client's port, not the GCS: use "
            f"ray://127.0.0.1:{client.port}, or the GCS port (`ray start --port`, 6379 by default) where this "
            "process runs on a node of the cluster")
        assert join(f"ray://127.0.0.1:{gcs.port}").startswith(
            f"collector.address=ray://127.0.0.1:{gcs.port}: that is a Ray GCS port, not Ray Client's")
    finally:
        client.close()
        gcs.close()


@pytest.mark.parametrize("method", [GCS_METHOD, CLIENT_METHOD])
def test_a_cluster_that_wants_a_token_says_so_at_once_and_which_token_was_refused(method, monkeypatch, tmp_path):
    server = FakeRay((method,), token="right-token")
    scheme = "ray://" if method == CLIENT_METHOD else ""
    address = f"{scheme}127.0.0.1:{server.port}"
    try:
        started = time.monotonic()
        assert join(address) == (
            f"collector.address={address}: the cluster requires token authentication and this process sends no "
            "token: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file) to the cluster's "
            "token here (docs/SCALE.md)")
        assert time.monotonic() - started < 5  # Ray alone: a timeout after 37-60 s that names no token
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", "wrong-token")
        assert join(address) == (
            f"collector.address={address}: the cluster refused this process's token (from RAY_AUTH_TOKEN): give it "
            "the token the cluster was started with (after a rotation, the new one)")
        monkeypatch.delenv("RAY_AUTH_TOKEN")
        token_file = tmp_path / "token"
        token_file.write_text("right-token\n")
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token_file))
        # the right token passes the check: what follows is Ray's (here the stub, which says it was reached)
        with pytest.raises(AssertionError, match="ray.init was reached"):
            connect(RayCollectorConfig(address=address), 1)
    finally:
        server.close()


CLUSTER_VERSIONS = ("Version mismatch: The cluster was started with:\n    Ray: 2.60.0\n    Python: 3.11.7\n"
                    "This process on {where} was started with:\n    Ray: {ray}\n    Python: {python}\n")


@pytest.mark.parametrize(("where", "ray_version", "python", "expected"), [
    ("node 10.0.0.5", "2.59.0", "3.11.7",
     "version mismatch: the cluster runs Ray 2.60.0 on Python 3.11.7, this process Ray 2.59.0 on Python 3.11.7; "
     f"run the trainer with Ray 2.60.0 (rlf-plugin-ray pins ray=={PINNED_RAY}, as the rlf image has it), or start "
     "the cluster from the rlf image"),
    ("Ray Client", "2.60.0", "3.12.3",
     "version mismatch: the cluster runs Ray 2.60.0 on Python 3.11.7, this process Ray 2.60.0 on Python 3.12.3; "
     "run the trainer on Python 3.11.7, as the cluster's nodes are"),
    ("node 10.0.0.5", "2.60.0", "3.11.9",
     "version mismatch: the cluster runs Ray 2.60.0 on Python 3.11.7, this process Ray 2.60.0 on Python 3.11.9; "
     "run the trainer on Python 3.11.7, as the cluster's nodes are (only the patch level differs: "
     "RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor on both sides accepts it)"),
])
def test_a_version_mismatch_is_one_line_naming_both_versions(where, ray_version, python, expected, monkeypatch):
    import ray

    gcs = FakeRay((GCS_METHOD,))

    def mismatch(*args, **kwargs):  # Ray 2.60's own text (ray._private.utils.check_version_info), measured
        raise RuntimeError(CLUSTER_VERSIONS.format(where=where, ray=ray_version, python=python))

    monkeypatch.setattr(ray, "init", mismatch)
    try:
        assert join(f"127.0.0.1:{gcs.port}") == f"collector.address=127.0.0.1:{gcs.port}: {expected}"
    finally:
        gcs.close()


def slow_head(failures: int):
    """ray.init as Ray 2.60's client meets a head whose proxy fails to start its per-client server
    ``failures`` times, then connects."""
    calls = []

    def init(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) <= failures:
            raise ConnectionAbortedError("Initialization failure from server:\n")  # Ray's own type and text
    return init, calls


def test_ray_clients_server_that_fails_to_start_a_client_server_says_what_to_raise(monkeypatch):
    import ray

    client = FakeRay((CLIENT_METHOD,))
    init, calls = slow_head(failures=99)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(collector_module, "CLIENT_SERVER_PAUSE_S", 0.0)
    try:
        message = join(f"ray://127.0.0.1:{client.port}")
        assert message.startswith(
            f"collector.address=ray://127.0.0.1:{client.port}: the head's Ray Client server could not start a "
            f"server for this client in {CLIENT_SERVER_TRIES} tries (Initialization failure from server); on a "
            "busy head give it longer (RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S=120 in the head's environment")
        assert "token" not in message
        assert len(calls) == CLIENT_SERVER_TRIES > 1
    finally:
        client.close()


def test_a_client_server_that_fails_to_start_once_is_tried_again_and_the_run_joins(monkeypatch, caplog):
    import ray

    client = FakeRay((CLIENT_METHOD,))
    init, calls = slow_head(failures=CLIENT_SERVER_TRIES - 1)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(collector_module, "CLIENT_SERVER_PAUSE_S", 0.0)
    try:
        assert connect(RayCollectorConfig(address=f"ray://127.0.0.1:{client.port}"), 1) is False  # joined
        assert len(calls) == CLIENT_SERVER_TRIES
        assert [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()] == [
            f"collector.address=ray://127.0.0.1:{client.port}: the head's Ray Client server could not start a "
            f"server for this client (try {n} of {CLIENT_SERVER_TRIES}); trying again in 0 s"
            for n in range(1, CLIENT_SERVER_TRIES)]
    finally:
        client.close()


def test_other_connection_errors_are_not_tried_again(monkeypatch):
    import ray

    client = FakeRay((CLIENT_METHOD,))
    calls = []

    def refused(*args, **kwargs):
        calls.append(kwargs)
        raise ConnectionError("ray client connection timeout")

    monkeypatch.setattr(ray, "init", refused)
    try:
        assert "cannot join the Ray cluster (ray client connection timeout)" in join(f"ray://127.0.0.1:{client.port}")
        assert len(calls) == 1
    finally:
        client.close()


def test_the_ray_extra_is_pinned_to_the_ray_the_image_and_this_env_hold():
    import ray

    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    pins = [d for d in dependencies if d.replace(" ", "").startswith("ray[")]
    assert pins == [f"ray[client]=={PINNED_RAY}"], dependencies
    assert ray.__version__ == PINNED_RAY


def test_a_private_ray_that_cannot_start_is_one_line_without_a_traceback(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    environment = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RLF_LOAD_PLUGINS")}
    started = time.monotonic()
    done = subprocess.run(
        [RLF, "train", "ppo", "--env", "gym:CartPole-v1", "--steps", "64", "--no-progress", "--set", "vector=ray",
         "--set", "num_envs=2", "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, env={**environment, "RAY_TMPDIR": str(blocker / "tmp")})
    assert time.monotonic() - started < 120
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "rlf: error: the private Ray instance of this run (collector.address=local) could not start: "
        f"NotADirectoryError: [Errno 20] Not a directory: '{blocker}"), last
    assert last.endswith("or join a running cluster with collector.address, or train with vector=async")
    assert "fix or remove the plugin" not in last
