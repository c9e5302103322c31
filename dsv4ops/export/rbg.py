"""A profile as an SGLang RoleBasedGroup (`workloads.x-k8s.io/v1alpha2`) for Kubernetes.

Built from the same render as the box's commands (`profiles.render(profile, box target)`), so
each container runs that component's argv and env. Only what a pod changes is adapted, and
`adaptations()` lists each one (the test holds the manifest to "box argv + these, nothing else"):

* argv[0], the box's interpreter path, becomes the image's (`--python`, default `python3`);
* `--base-gpu-id N` becomes 0: a pod sees only the GPUs the device plugin gave it;
* the router's `--prefill URL BOOTSTRAP_PORT` / `--decode URL` point at the roles' per-pod
  Service names (`<group>-<role>-<i>.s-<group>-<role>`, RBG's headless services), one per replica.

Order: decode depends on prefill and the router on both (RBG `dependencies`: a role is created
only when its dependencies are Ready), the safe start order the box gets. No CoordinatedPolicy
with maxSkew for 1:1 (it stalls: sgl-project/rbg#307). With N:N pairs (N > 1), `documents()`
adds a CoordinatedPolicy (v1alpha2, named like the group) whose rolling-update maxSkew is one
pair's share, and each worker role rolls one replica at a time (maxUnavailable 1, maxSurge 0):
neither role's new revision gets more than one replica ahead of the other's.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import TypedDict

from dsv4ops.deployment import Deployment
from dsv4ops.deployment import argv_value as flag_value
from dsv4ops.errors import DsOpsError
from dsv4ops.export import values as V
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.model import Profile
from dsv4ops.routerkind import SMG_VERSION, RouterKind
from dsv4ops.secrets import is_secret_flag, is_secret_key
from dsv4ops.sglang_paths import plugin_env

API_VERSION = "workloads.x-k8s.io/v1alpha2"
DEFAULT_IMAGE = "lmsysorg/sglang:v0.5.23"
KERNELS_MOUNT = "/opt/dsv4ops/kernels"


class Mount(TypedDict):
    """A container's volumeMount of the kernel package (_pod_env reads its mountPath)."""

    name: str
    mountPath: str
    readOnly: bool


_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class ExportOptions:
    image: str = DEFAULT_IMAGE
    router_image: str | None = None  # default: the profile's router kind's (routerkind.py)
    namespace: str | None = None
    replicas: int = 1
    python: str = "python3"
    name: str | None = None  # the RoleBasedGroup's name (default: the profile's, DNS-1123)
    gpus_per_node: int | None = None  # refuse a TP that no node could hold
    kernel_image: str | None = None  # image holding the kernel package (default: named after it)


def adaptations() -> list[str]:
    return [
        "argv[0]: the box's interpreter -> the image's (--python)",
        "--base-gpu-id N -> 0 (a pod sees only its own GPUs)",
        "router --prefill/--decode: the box addresses -> the roles' per-pod Service names",
        "a secret flag's value (--api-key ...) -> $(DSV4_ARG_<FLAG>), read from the Secret",
    ]


def check_options(opts: ExportOptions, kernel_package: str | None) -> None:
    """Every option value by Kubernetes' own rules (export/values.py). Raises DsOpsError."""
    V.check_namespace(opts.namespace)
    V.check_image("--image", opts.image)
    if opts.router_image is not None:
        V.check_image("--router-image", opts.router_image)
    V.check_program(opts.python)
    if opts.kernel_image is not None and not kernel_package:  # was ignored without a word
        raise DsOpsError(
            "--kernel-image: the profile has no kernel_package, so no container would use "
            "the image; nothing was exported",
            hint="drop --kernel-image, or export a profile with a kernel_package (kernels-attn)",
        )
    if kernel_package:
        V.check_package(kernel_package)
        name, _, version = kernel_package.partition("@")
        V.check_image("--kernel-image", opts.kernel_image or f"{name}:{version}")


def router_image(kind: RouterKind, override: str | None) -> str:
    """The image the router container runs: --router-image, else the router kind's own.
    Raises DsOpsError for a kind with no verified image (SMG), naming the option to pass."""
    image = override or kind.image
    if image is None:
        raise DsOpsError(
            f"--router-image is required for a router.kind: {kind} profile: no {kind.label} "
            "image is pinned (none could be verified for that version); nothing was exported",
            hint=f"pass --router-image: an image whose python3 runs {kind.module} from "
            f"smg=={SMG_VERSION} (SMG's project publishes lightseekorg/smg:<version>; check "
            "that your registry has that tag and that the image runs it)",
        )
    return image


def group_name(profile_name: str, override: str | None) -> str:
    name = override or re.sub(r"[^a-z0-9-]+", "-", profile_name.lower()).strip("-")
    if not _DNS1123.fullmatch(name) or len(name) > 40:
        raise DsOpsError(
            f"--name {name!r}: a RoleBasedGroup name must be a DNS-1123 label of at "
            "most 40 characters (its role Services append to it)",
            hint="pass --name with lowercase letters, digits and '-'",
        )
    return name


def pod_host(group: str, role: str, index: int) -> str:
    return f"{group}-{role}-{index}.s-{group}-{role}"


def secret_arg_env(flag: str) -> str:
    return "DSV4_ARG_" + re.sub(r"[^A-Z0-9]+", "_", flag.lstrip("-").upper())


def hide_secret_args(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Secret flag values become `$(VAR)` (Kubernetes expands them from the container env),
    in both shapes `--flag V` and `--flag=V`; returns the argv and {VAR: value} for the Secret."""
    out, secrets, i = list(argv), {}, 0
    while i < len(out):
        flag, eq, value = out[i].partition("=")
        if eq and is_secret_flag(flag):
            var = secret_arg_env(flag)
            secrets[var] = value
            out[i] = f"{flag}=$({var})"
        elif is_secret_flag(flag) and i + 1 < len(out):
            var = secret_arg_env(flag)
            secrets[var] = out[i + 1]
            out[i + 1] = f"$({var})"
            i += 1
        i += 1
    return out, secrets


def server_argv(box_argv: list[str], python: str) -> list[str]:
    argv = [python, *box_argv[1:]]
    if "--base-gpu-id" in argv:
        argv[argv.index("--base-gpu-id") + 1] = "0"
    return argv


def router_argv(
    box_argv: list[str],
    python: str,
    group: str,
    replicas: int,
    prefill_port: int,
    decode_port: int,
    bootstrap_port: int,
) -> list[str]:
    """The box router argv with its --prefill/--decode groups replaced by one per replica."""
    out, i = [python], 1
    while i < len(box_argv):
        a = box_argv[i]
        if a == "--prefill":
            i += 3  # --prefill URL BOOTSTRAP_PORT
            continue
        if a == "--decode":
            i += 2
            continue
        out.append(a)
        if a == "--pd-disaggregation":
            for r in range(replicas):
                out += [
                    "--prefill",
                    f"http://{pod_host(group, 'prefill', r)}:{prefill_port}",
                    str(bootstrap_port),
                ]
            for r in range(replicas):
                out += ["--decode", f"http://{pod_host(group, 'decode', r)}:{decode_port}"]
        i += 1
    return out


def _env(env: dict[str, str], secret_name: str) -> list[dict[str, object]]:
    """Container env; a secret never enters the manifest: it is read from a Secret by key."""
    out: list[dict[str, object]] = []
    for k, v in sorted(env.items()):
        if is_secret_key(k) or k.startswith("DSV4_ARG_"):
            out.append({"name": k, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": k}}})
        else:
            out.append({"name": k, "value": v})
    return out


def _probe(port: int, path: str) -> dict[str, object]:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": 10, "failureThreshold": 3}


def _container(
    name: str,
    image: str,
    argv: list[str],
    env: list[dict[str, object]],
    ports: list[tuple[str, int]],
    probe: dict[str, object],
) -> dict[str, object]:
    c: dict[str, object] = {
        "name": name,
        "image": image,
        "command": argv,
        "ports": [{"name": n, "containerPort": p} for n, p in ports],
        "readinessProbe": probe,
    }
    if env:
        c["env"] = env
    return c


def _role(
    name: str,
    replicas: int,
    container: dict[str, object],
    deps: list[str],
    volumes: list[dict[str, object]] | None = None,
    init: list[dict[str, object]] | None = None,
) -> dict[str, object]:
    spec: dict[str, object] = {"containers": [container]}
    if volumes:
        spec["volumes"] = volumes
    if init:
        spec["initContainers"] = init
    role: dict[str, object] = {
        "name": name,
        "replicas": replicas,
        "standalonePattern": {
            "template": {
                "metadata": {
                    "labels": {"app.kubernetes.io/part-of": "dsv4ops", "dsv4ops/role": name}
                },
                "spec": spec,
            }
        },
    }
    if deps:
        role["dependencies"] = deps
    return role


def build_manifest(profile: Profile, deployment: Deployment, opts: ExportOptions) -> JSONObject:
    """The RoleBasedGroup for `profile` rendered for the box (`deployment`). Raises DsOpsError."""
    if not 1 <= opts.replicas <= 64:
        raise DsOpsError(f"--replicas {opts.replicas}: expected 1 to 64 prefill:decode pairs")
    check_options(opts, profile.kernel_package)
    r_image = router_image(deployment.router_kind, opts.router_image)
    group = group_name(profile.name, opts.name)
    secret_name = f"{group}-env"
    pre, dec, rtr = (deployment.component(n) for n in ("prefill", "decode", "router"))
    pre_argv, dec_argv = list(pre.argv), list(dec.argv)
    tp = {
        n: int(flag_value(a, "--tp-size") or 1)
        for n, a in (("prefill", pre_argv), ("decode", dec_argv))
    }
    if opts.gpus_per_node is not None:
        for n, size in tp.items():
            if size > opts.gpus_per_node:
                raise DsOpsError(
                    f"--gpus-per-node {opts.gpus_per_node}: {n} runs TP {size}, "
                    "which needs that many GPUs in one pod",
                    hint="multi-node TP needs RBG's leaderWorkerPattern (not exported)",
                )
    boot = int(flag_value(pre_argv, "--disaggregation-bootstrap-port") or 8998)
    volumes, init, mounts = _kernel_parts(profile, opts)
    roles: list[dict[str, object]] = []
    for name, comp, argv in (("prefill", pre, pre_argv), ("decode", dec, dec_argv)):
        ports = [("http", comp.port)] + ([("bootstrap", boot)] if name == "prefill" else [])
        command, hidden = hide_secret_args(server_argv(argv, opts.python))
        c = _container(
            name,
            opts.image,
            command,
            _env({**_pod_env(dict(comp.env), mounts), **hidden}, secret_name),
            ports,
            _probe(comp.port, "/health"),
        )
        c["resources"] = {"limits": {"nvidia.com/gpu": tp[name]}}
        if mounts:
            c["volumeMounts"] = mounts
        role = _role(name, opts.replicas, c, ["prefill"] if name == "decode" else [], volumes, init)
        if opts.replicas > 1:  # one replica at a time; the CoordinatedPolicy pairs the roles
            role["rolloutStrategy"] = {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            }
        roles.append(role)
    r_argv = router_argv(
        list(rtr.argv), opts.python, group, opts.replicas, pre.port, dec.port, boot
    )
    prom = int(flag_value(r_argv, "--prometheus-port") or 29000)
    r_argv, hidden = hide_secret_args(r_argv)
    rc = _container(
        "router",
        r_image,
        r_argv,
        _env({**dict(rtr.env), **hidden}, secret_name),
        [("http", rtr.port), ("metrics", prom)],
        _probe(rtr.port, "/readiness"),
    )
    roles.append(_role("router", 1, rc, ["prefill", "decode"]))
    meta: dict[str, object] = {
        "name": group,
        "labels": {"app.kubernetes.io/managed-by": "dsv4ops", "dsv4ops/profile": group},
    }
    if opts.namespace:
        meta["namespace"] = opts.namespace
    return {
        "apiVersion": API_VERSION,
        "kind": "RoleBasedGroup",
        "metadata": meta,
        "spec": {"roles": roles},
    }


def documents(profile: Profile, deployment: Deployment, opts: ExportOptions) -> list[JSONObject]:
    """What `export rbg` prints: (N:N only) the CoordinatedPolicy, then the RoleBasedGroup. The
    policy comes first: the controller reads it when it reconciles the group and does not watch
    policies, so one applied after the group would wait for the group's next change."""
    manifest = build_manifest(profile, deployment, opts)
    policy = coordinated_policy(manifest)
    return [manifest] if policy is None else [policy, manifest]


def coordinated_policy(manifest: JSONObject) -> JSONObject | None:
    """The CoordinatedPolicy that keeps prefill and decode of one revision together, for N > 1
    pairs; None for 1:1, where any maxSkew stalls the rollout (sgl-project/rbg#307).

    maxSkew is a percentage (RBG compares the roles' updated fractions): ceil(100/N)% lets a
    role's new revision lead the other's by one replica and never by two. The controller looks
    the policy up by the group's name and namespace, so it carries both."""
    replicas = {r["name"]: r["replicas"] for r in manifest["spec"]["roles"]}
    n = replicas["prefill"]
    if n <= 1 or replicas["decode"] != n:
        return None
    meta = {k: v for k, v in manifest["metadata"].items() if k in ("name", "namespace", "labels")}
    return {
        "apiVersion": API_VERSION,
        "kind": "CoordinatedPolicy",
        "metadata": meta,
        "spec": {
            "policies": [
                {
                    "roles": ["prefill", "decode"],
                    "strategy": {"rollingUpdate": {"maxSkew": pair_share(n)}},
                }
            ]
        },
    }


def pair_share(replicas: int) -> str:
    """One pair's share of N as a maxSkew percentage: 50% for 2, 34% for 3, 25% for 4."""
    return f"{math.ceil(100 / replicas)}%"


def _pod_env(env: dict[str, str], mounts: list[Mount]) -> dict[str, str]:
    """The box env plus what loads the kernel package from the pod's copy (as deploy adds on the
    box, orchestrate/kernelpkg.py): its config dir, its plugin, its site on PYTHONPATH. A value
    the profile sets itself wins, as on the box."""
    if not mounts:
        return env
    root = mounts[0]["mountPath"]
    package = root.rstrip("/").split("/")[-2]  # KERNELS_MOUNT/<name>/<version>
    return {**plugin_env(package, root), **env}


def _kernel_parts(
    profile: Profile, opts: ExportOptions
) -> tuple[list[dict[str, object]], list[dict[str, object]], list[Mount]]:
    """The kernel package as an init container copying it from an image into a shared volume."""
    ref = profile.kernel_package
    if not ref:
        return [], [], []
    name, _, version = ref.partition("@")
    image = opts.kernel_image or f"{name}:{version}"
    path = f"{KERNELS_MOUNT}/{name}/{version}"
    volume: dict[str, object] = {"name": "dsv4-kernels", "emptyDir": {}}
    init: dict[str, object] = {
        "name": "dsv4-kernels",
        "image": image,
        "command": ["sh", "-c", f"cp -a /package/. {shlex.quote(path + '/')}"],
        "volumeMounts": [{"name": "dsv4-kernels", "mountPath": path}],
    }
    mount: Mount = {"name": "dsv4-kernels", "mountPath": path, "readOnly": True}
    return [volume], [init], [mount]
