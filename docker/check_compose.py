#!/usr/bin/env python3
"""docker/docker-compose.yml and docker/Dockerfile agree with each other and
with kcache-server's option table.

  docker/check_compose.py [--server build/dev/server/kcache-server] [--control]

Checks, for every service built from the Dockerfile (its environment is the
image's ENV overlaid with the service's own):
- every KCACHE_* name (image and compose) is an option of kcache-server
  (`kcache-server --options-markdown`, the table docs/operations.md shows);
- the ports it listens on (KCACHE_LISTEN, KCACHE_RESP_LISTEN) are EXPOSEd
  and are the container side of its `ports`, and every published port is
  one of them;
- its volumes mount on the image's VOLUME, and disk storage lives on it;
- the image's HEALTHCHECK asks /readyz on KCACHE_LISTEN's port, with curl
  installed in the image, and no service replaces it with another;
- every /run/secrets/NAME its environment names is one of its secrets and
  declared at the top level;
- and the wiring docker/smoke.sh relies on (services, profiles, Redis AOF,
  the cluster profile).
--control plants one mistake of each kind in copies of the two files and
fails unless each is reported.
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dockerfile  # noqa: E402

HERE = Path(__file__).resolve().parent


def option_names(server: Path | None) -> set[str]:
    """KCACHE_* names of the server's option table: the binary's own, else
    docs/operations.md's copy of it (server_config_test keeps the two equal)."""
    if server is not None:
        table = subprocess.run([str(server), "--options-markdown"], check=True, capture_output=True,
                               text=True).stdout
    else:
        page = (HERE.parent / "docs" / "operations.md").read_text()
        table = page.split("<!-- options: begin", 1)[1].split("<!-- options: end -->", 1)[0]
    names = set(re.findall(r"`(KCACHE_[A-Z0-9_]+)`", table))
    if len(names) < 10:
        raise SystemExit(f"{server} --options-markdown: no option table ({len(names)} names)")
    return names


def port_of(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


def image_services(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items()
            if s.get("build", {}).get("dockerfile") == "docker/Dockerfile"}


def agreement(image: dockerfile.Stage, compose: dict, options: set[str]) -> list[str]:
    errors = []
    image_env = image.env()
    exposed, volumes = image.exposed_ports(), image.volumes()
    for name in image_env:
        if name.startswith("KCACHE_") and name not in options:
            errors.append(f"Dockerfile ENV {name}: not an option of kcache-server")
    if port_of(image_env["KCACHE_LISTEN"]) not in exposed:
        errors.append(f"Dockerfile: KCACHE_LISTEN's port is not EXPOSEd ({sorted(exposed)})")
    storage = image_env.get("KCACHE_STORAGE", "")
    if storage.startswith("disk:") and storage[5:] not in volumes:
        errors.append(f"Dockerfile: KCACHE_STORAGE {storage} is not on a VOLUME ({sorted(volumes)})")
    health = image.healthcheck_command() or ""
    if "/readyz" not in health or "${KCACHE_LISTEN" not in health:
        errors.append(f"Dockerfile HEALTHCHECK does not ask /readyz on KCACHE_LISTEN's port: {health!r}")
    if "curl" in health and not any(re.search(r"\bcurl\b", r) for r in image.args("RUN")):
        errors.append("Dockerfile HEALTHCHECK uses curl, which the image does not install")
    services = image_services(compose)
    if not services:
        errors.append("compose: no service builds docker/Dockerfile")
    declared_secrets = set(compose.get("secrets", {}))
    for name, s in services.items():
        env = {**image_env, **{k: str(v) for k, v in s.get("environment", {}).items()}}
        for k in s.get("environment", {}):
            if k.startswith("KCACHE_") and k not in options:
                errors.append(f"compose {name}: environment {k} is not an option of kcache-server")
        listens = {port_of(env[k]) for k in ("KCACHE_LISTEN", "KCACHE_RESP_LISTEN") if env.get(k)}
        published = {int(str(p).rsplit(":", 1)[1].split("/")[0]) for p in s.get("ports", [])}
        for p in sorted(listens - exposed):
            errors.append(f"compose {name}: listens on {p}, which the Dockerfile does not EXPOSE")
        for p in sorted(published - listens):
            errors.append(f"compose {name}: publishes container port {p}, where the server does not listen")
        if port_of(env["KCACHE_LISTEN"]) not in published:
            errors.append(f"compose {name}: the HTTP port {port_of(env['KCACHE_LISTEN'])} is not published")
        mounts = {str(v).split(":")[1] for v in s.get("volumes", []) if ":" in str(v)}
        for m in sorted(mounts - volumes):
            errors.append(f"compose {name}: mounts {m}, which is not the image's VOLUME {sorted(volumes)}")
        st = env.get("KCACHE_STORAGE", "")
        if st.startswith("disk:") and st[5:] not in mounts:
            errors.append(f"compose {name}: disk storage {st[5:]} is not on a mounted volume")
        hc = s.get("healthcheck")
        if hc and "/readyz" not in " ".join(map(str, hc.get("test", []))):
            errors.append(f"compose {name}: its healthcheck replaces the image's /readyz check")
        secrets = {x if isinstance(x, str) else x["source"] for x in s.get("secrets", [])}
        for k, v in env.items():
            for secret in re.findall(r"/run/secrets/([\w.-]+)", v):
                if secret not in secrets:
                    errors.append(f"compose {name}: {k} reads secret {secret}, not one of its secrets")
                if secret not in declared_secrets:
                    errors.append(f"compose {name}: secret {secret} is not declared at the top level")
    return errors


def smoke_wiring(c: dict) -> list[str]:
    """What docker/smoke.sh starts and relies on."""
    errors = []

    def need(cond: bool, what: str) -> None:
        if not cond:
            errors.append(f"compose: {what}")

    s = c["services"]
    nodes = {f"redis-c{i}" for i in range(1, 7)}
    need(set(s) == {"redis", "kcache-redis", "kcache-disk", "cluster-create", "kcache-cluster"} | nodes,
         f"services {sorted(s)}")
    if errors:
        return errors
    need("--appendonly" in s["redis"]["command"] and s["redis"]["healthcheck"]["test"][-1] == "ping",
         "redis: AOF and a ping health check")
    need(s["kcache-redis"]["depends_on"]["redis"]["condition"] == "service_healthy",
         "kcache-redis starts once redis is healthy")
    need(s["kcache-redis"]["environment"]["KCACHE_STORAGE"] == "redis://redis:6379/0", "kcache-redis on redis")
    need(s["kcache-disk"]["environment"]["KCACHE_STORAGE"] == "disk:/var/lib/kcache", "kcache-disk on disk")
    for name in ("kcache-redis", "kcache-disk"):
        env = s[name]["environment"]
        need(env["KCACHE_LISTEN"].startswith("0.0.0.0:"), f"{name} listens on 0.0.0.0")
        need(env["KCACHE_TOKENS"] == "/run/secrets/kcache_tokens" and "kcache_tokens" in s[name]["secrets"],
             f"{name} reads its tokens from the secret")
    need("kcache-data:/var/lib/kcache" in s["kcache-disk"]["volumes"], "kcache-disk's named volume")
    need(set(c["volumes"]) == {"redis-data", "kcache-data"} | {f"{n}-data" for n in nodes}, "volumes")
    # The cluster profile (not started by docker/smoke.sh): six cluster-enabled
    # nodes with their own volumes, a one-shot create after all are healthy,
    # and kcache-server on a redis-cluster:// URL once the create succeeded.
    for n in sorted(nodes):
        node = s[n]
        need(node["profiles"] == ["cluster"] and "--cluster-enabled" in node["command"], f"{n} in the cluster")
        need("--appendonly" in node["command"] and node["volumes"] == [f"{n}-data:/data"], f"{n}'s AOF volume")
    need(s["cluster-create"]["depends_on"] == {n: {"condition": "service_healthy"} for n in nodes},
         "cluster-create waits for every node")
    need("--cluster-replicas 1" in s["cluster-create"]["command"][0], "cluster-create with one replica each")
    kc = s["kcache-cluster"]
    need(kc["depends_on"]["cluster-create"]["condition"] == "service_completed_successfully",
         "kcache-cluster after cluster-create")
    need(kc["environment"]["KCACHE_STORAGE"].startswith("redis-cluster://redis-c1:7000,"), "kcache-cluster URL")
    need(set(c["secrets"]) == {"kcache_tokens", "kcache_tls_cert", "kcache_tls_key"}, "secrets")
    return errors


def plants(image: dockerfile.Stage, compose: dict):
    """(what, image, compose): one planted disagreement each."""
    def with_env(name, value):
        im = copy.deepcopy(image)
        im.instructions.append(("ENV", f"{name}={value}"))
        return im

    def service_edit(fn):
        c = copy.deepcopy(compose)
        fn(c["services"]["kcache-disk"])
        return c

    no_expose = copy.deepcopy(image)
    no_expose.instructions = [(k, a) for k, a in no_expose.instructions if k != "EXPOSE"]
    no_health = copy.deepcopy(image)
    no_health.instructions = [(k, a) for k, a in no_health.instructions if k != "HEALTHCHECK"]
    yield "an unknown KCACHE_ name in ENV", with_env("KCACHE_LISTN", "0.0.0.0:1"), compose
    yield "an unknown KCACHE_ name in compose", image, service_edit(
        lambda s: s["environment"].__setitem__("KCACHE_MAX_BYTE", "1G"))
    yield "no EXPOSE", no_expose, compose
    yield "a published port nobody listens on", image, service_edit(lambda s: s["ports"].append("9999:9999"))
    yield "a volume off the image's VOLUME", image, service_edit(
        lambda s: s.__setitem__("volumes", ["kcache-data:/data"]))
    yield "no HEALTHCHECK", no_health, compose
    yield "a secret the service lacks", image, service_edit(lambda s: s.__setitem__("secrets", []))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", type=Path, help="a kcache-server binary (default: docs/operations.md's table)")
    ap.add_argument("--dockerfile", type=Path, default=HERE / "Dockerfile")
    ap.add_argument("--compose", type=Path, default=HERE / "docker-compose.yml")
    ap.add_argument("--control", action="store_true")
    a = ap.parse_args()
    image = dockerfile.stage(dockerfile.parse(a.dockerfile), None)
    compose = yaml.safe_load(a.compose.read_text())
    options = option_names(a.server)
    errors = agreement(image, compose, options) + smoke_wiring(compose)
    for e in errors:
        print(f"docker compose check: FAIL: {e}")
    if errors:
        return 1
    print(f"docker compose check: compose ({len(image_services(compose))} image services) and Dockerfile agree; "
          f"{len(options)} options known")
    if a.control:
        for what, im, c in plants(image, compose):
            found = agreement(im, c, options)
            if not found:
                print(f"docker compose check: FAIL (control): {what} went unnoticed")
                return 1
            print(f"docker compose check: control: {what}: {found[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
