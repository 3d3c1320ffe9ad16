"""The cluster files the project ships (docker/compose*.yaml), read offline: keys that docker-compose 1.29
and `docker compose` v2 both understand, every Ray port pinned and listed in docs/SCALE.md's table, the
port blocks of head, worker and trainer apart (so host networking puts them on one machine), token
authentication on by default with the token from a secret, never written in a file, a head healthcheck,
workers and the trainer that wait for it and retry joining, and /dev/shm larger than the object store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from compose_files import COMPOSE, HEAD_PORTS, NODE_PORTS, ROOT, fill, start_flags

HOST = ROOT / "docker" / "compose.host.yaml"
SCALE = ROOT / "docs" / "SCALE.md"

# Keys both docker-compose 1.29 (the Compose Specification it reads since 1.27) and v2 accept; `version`
# is left out on purpose (v2 calls it obsolete; without it 1.29 reads the specification too).
SERVICE_KEYS = {"image", "entrypoint", "command", "shm_size", "environment", "secrets", "healthcheck", "restart",
                "depends_on", "profiles", "volumes", "network_mode"}
TOP_KEYS = {"services", "secrets", "volumes"}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def port_set(flags: dict[str, str]) -> set[int]:
    ports = {int(flags[name]) for name in (*NODE_PORTS, *HEAD_PORTS) if name in flags and "worker" not in name}
    return ports | set(range(int(flags["min-worker-port"]), int(flags["max-worker-port"]) + 1))


def documented_ports() -> dict[str, dict[str, str]]:
    """docs/SCALE.md's port table: {what: {role: cell}} from the table under "### Ports"."""
    lines = SCALE.read_text().split("### Ports", 1)[1].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:  # the first table of the section, to its end
        if not line.startswith("|"):
            break
        rows.append(line)
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table = {}
    for line in rows[2:]:
        cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        table[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return table


def test_the_compose_files_use_keys_both_compose_versions_read():
    for path in (COMPOSE, HOST):
        document = load(path)
        assert set(document) - TOP_KEYS <= {key for key in document if key.startswith("x-")}, path
        assert "version" not in document
        for name, service in document["services"].items():
            assert set(service) <= SERVICE_KEYS, (path.name, name, set(service) - SERVICE_KEYS)


def test_every_ray_port_is_pinned_and_the_roles_blocks_do_not_overlap():
    flags = {name: start_flags(name) for name in ("head", "worker", "train")}
    for name, given in flags.items():
        wanted = NODE_PORTS + (HEAD_PORTS if name == "head" else ())
        assert set(wanted) <= set(given), (name, set(wanted) - set(given))
    sets = {name: port_set(given) for name, given in flags.items()}
    assert not sets["head"] & sets["worker"] and not sets["head"] & sets["train"] and not sets["worker"] & sets["train"]
    # the one firewall rule docs/SCALE.md gives covers every port a node listens on for other nodes
    opened = set(range(6379, 6406)) | {10001} | set(range(11000, 14000))
    local_only = {int(flags["head"]["dashboard-port"])}
    for name, ports in sets.items():
        assert ports - local_only <= opened, (name, sorted(ports - local_only - opened)[:5])


def test_the_port_table_in_scale_md_lists_exactly_the_pinned_ports():
    table = documented_ports()
    for role in ("head", "worker", "train"):
        flags = start_flags(role)
        for name in (*NODE_PORTS[:6], *(HEAD_PORTS if role == "head" else ())):
            assert table[f"--{name}"][role] == flags[name], (role, name)
        assert table["--min-worker-port / --max-worker-port"][role] == (
            f"{flags['min-worker-port']}-{flags['max-worker-port']}")


def test_token_authentication_is_on_by_default_from_a_secret_never_from_a_file_in_the_repo():
    document = load(COMPOSE)
    secret_file = document["secrets"]["ray_auth_token"]["file"]
    assert fill(secret_file) == "./ray_auth_token" and "docker/ray_auth_token" in (ROOT / ".gitignore").read_text()
    for name, service in document["services"].items():
        environment = service["environment"]
        assert fill(environment["RAY_AUTH_MODE"]) == "token", name
        assert environment["RAY_AUTH_TOKEN_PATH"] == "/run/secrets/ray_auth_token", name
        assert "ray_auth_token" in service["secrets"] and "RAY_AUTH_TOKEN" not in environment, name
    for path in [COMPOSE, HOST, *(ROOT / "docker").glob("k8s/*.yaml")]:
        assert not re.search(r"\b[0-9a-f]{64}\b", path.read_text()), f"{path.name} holds what looks like a token"


def test_the_head_is_health_checked_and_the_others_wait_for_it_and_retry_joining():
    services = load(COMPOSE)["services"]
    check = services["head"]["healthcheck"]
    assert check["test"][:3] == ["CMD", "ray", "health-check"] and fill(check["test"][3]) == "--address=127.0.0.1:6379"
    for name in ("worker", "train"):
        service = services[name]
        assert service["depends_on"] == {"head": {"condition": "service_healthy"}}, name
        script = fill(service["entrypoint"][2])
        assert script.startswith("tries=0; until ray start ") and "sleep 5; done" in script, name
        assert "-ge 60 ]; then" in script and "exit 1" in script, name  # RAY_JOIN_TRIES, then one line
    assert services["worker"]["restart"] == "on-failure" and services["head"]["restart"] == "on-failure"


def size_bytes(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)b?", text.lower()).groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]


@pytest.mark.parametrize("role", ["head", "worker", "train"])
def test_shm_holds_the_object_store_so_ray_keeps_it_in_memory(role):
    service = load(COMPOSE)["services"][role]
    store = int(start_flags(role)["object-store-memory"])
    # Ray puts the store on disk ("This will harm performance!") where /dev/shm is smaller than it
    assert size_bytes(fill(service["shm_size"])) >= 1.5 * store


K8S = ROOT / "docker" / "k8s"


def manifests(name: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all((K8S / name).read_text())}


def cluster_specs() -> list[tuple[str, dict]]:
    return [("raycluster.yaml", manifests("raycluster.yaml")["RayCluster"]["spec"]),
            ("rayjob.yaml", manifests("rayjob.yaml")["RayJob"]["spec"]["rayClusterSpec"])]


def pods(spec: dict) -> list[tuple[str, dict, dict]]:
    """(compose role, rayStartParams, pod spec) of the head group and each worker group."""
    head = spec["headGroupSpec"]
    return [("head", head["rayStartParams"], head["template"]["spec"]),
            *(("worker", group["rayStartParams"], group["template"]["spec"]) for group in spec["workerGroupSpecs"])]


@pytest.mark.parametrize("name", ["raycluster.yaml", "rayjob.yaml"])
def test_kuberay_manifests_run_ray_not_the_images_rlf_entrypoint_and_pin_the_version(name):
    from rlf_plugin_ray.config import PINNED_RAY

    kind = "RayCluster" if name == "raycluster.yaml" else "RayJob"
    document = manifests(name)[kind]
    assert document["apiVersion"] == "ray.io/v1"
    # KubeRay keeps the command as written (the image's ENTRYPOINT is ["rlf"]) and hands it its `ray start`
    assert document["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] == "true"
    spec = document["spec"] if kind == "RayCluster" else document["spec"]["rayClusterSpec"]
    assert spec["rayVersion"] == PINNED_RAY
    for _, _, pod in pods(spec):
        container = pod["containers"][0]
        assert container["command"] == ["/bin/bash", "-lc", "--"]
        assert container["args"] == ["ulimit -n 65536; exec $KUBERAY_GEN_RAY_START_CMD"]


@pytest.mark.parametrize(("name", "spec"), cluster_specs())
def test_kuberay_pods_pin_composes_ports_use_the_token_secret_and_size_resources_and_shm(name, spec):
    for role, params, pod in pods(spec):
        flags = start_flags(role)
        for flag in (*NODE_PORTS, *(("port", "ray-client-server-port", "dashboard-port") if role == "head" else ())):
            assert params[flag] == flags[flag], (name, role, flag)
        container = pod["containers"][0]
        env = {item["name"]: item for item in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "rlf-ray-token", "key": "auth_token"}
        assert "value" not in env["RAY_AUTH_TOKEN"]  # from the Secret only, never written here
        resources = container["resources"]
        assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}, (name, role)
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        shm = volumes[mounts["/dev/shm"]]["emptyDir"]
        assert shm["medium"] == "Memory"
        assert size_bytes(shm["sizeLimit"].replace("Gi", "g").replace("Mi", "m")) >= 1.5 * int(
            params["object-store-memory"])
        if role == "head":  # the trainer runs on the head: its runs land on the volume
            assert volumes[mounts["/runs"]]["persistentVolumeClaim"]["claimName"] == "rlf-runs"
    assert manifests("raycluster.yaml")["PersistentVolumeClaim"]["metadata"]["name"] == "rlf-runs"


def test_the_rayjob_trains_with_rlf_on_its_cluster_and_the_network_policy_opens_the_documented_ports():
    job = manifests("rayjob.yaml")["RayJob"]["spec"]
    assert job["entrypoint"].startswith("rlf train ") and "--set collector.address=auto" in job["entrypoint"]
    assert "--run-dir /runs/" in job["entrypoint"]
    submitter = {item["name"]: item for item in job["submitterPodTemplate"]["spec"]["containers"][0]["env"]}
    assert submitter["RAY_AUTH_MODE"]["value"] == "token" and "valueFrom" in submitter["RAY_AUTH_TOKEN"]
    rules = manifests("raycluster.yaml")["NetworkPolicy"]["spec"]["ingress"]
    between = {(port["port"], port.get("endPort", port["port"])) for port in rules[0]["ports"]}
    assert between == {(6379, 6405), (11000, 13999)} and rules[1]["ports"] == [{"protocol": "TCP", "port": 10001}]
