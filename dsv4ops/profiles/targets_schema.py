"""targets.yaml's declaration, as profiles/schema.py declares a profile's: every key of a target,
its type, default, bounds and doc. The file's top level is `schema_version` and `targets`, a
mapping of names to TARGET_SCHEMA (or ENDPOINT_TARGET_SCHEMA), checked by the targets loader."""

from __future__ import annotations

from dsv4ops.constants import SSH_RECONNECT_S
from dsv4ops.profiles.schema import MAX_GPU_ID, Field, Schema

TARGET_SCHEMA: Schema = {
    "description": Field("str", default="", text="free", help="what the target is"),
    "transport": Field(
        "str",
        required=True,
        choices=("local", "ssh", "endpoint"),
        help="this machine, a machine over SSH, or a cluster's router over HTTP",
    ),
    "ssh": {
        "host": Field("str", nullable=True, help="the host to connect to (transport: ssh)"),
        "port": Field("int", default=22, minimum=1, maximum=65535, help="the SSH port"),
        "user": Field("str", nullable=True, help="the login; null: SSH's default"),
        "key": Field("str", nullable=True, help="a private key file; null: SSH's defaults"),
        "known_hosts": Field("str", nullable=True, help="the known_hosts file host keys are in"),
        "trust_on_first_use": Field(
            "bool", default=False, help="accept an unknown host key once and record it"
        ),
        "reconnect_s": Field(
            "float",
            default=SSH_RECONNECT_S,
            minimum=0,
            maximum=600,
            help="seconds a call rides out a dropped connection (0: fail at once)",
        ),
    },
    "gpus": Field(
        "int_list",
        required=True,
        minimum=0,
        maximum=MAX_GPU_ID,
        max_items=64,
        help="the GPU ids the target has",
    ),
    "workdir": Field("str", required=True, help="where the components run and log"),
    "python": Field("str", nullable=True, help="interpreter on the target"),
    # The interpreter that runs a `router.kind: smg` router (SMG has its own venv, Makefile
    # SMG_VENV); null: this machine's SMG venv for a local target, `python` over SSH.
    "smg_python": Field("str", nullable=True, help="interpreter with smg installed"),
    "launcher": Field(
        "str", default="sglang", choices=("sglang", "twin"), help="real SGLang or the twin"
    ),
    "bind_host": Field("str", default="127.0.0.1", help="the address the servers listen on"),
    "connect_host": Field(
        "str", nullable=True, help="the address this machine calls; null: from bind_host"
    ),
    "port_offset": Field(
        "int", default=0, minimum=0, maximum=65535, help="added to every port of the profile"
    ),
    "twin_env": Field("str_map", default={}, help="environment of the twin's processes"),
}

# `transport: endpoint`: a cluster (RBG) reached only over HTTP; dsv4ops starts nothing there.
ENDPOINT_TARGET_SCHEMA: Schema = {
    "description": Field("str", default="", text="free", help="what the target is"),
    "transport": Field(
        "str", required=True, choices=("endpoint",), help="a cluster's router over HTTP"
    ),
    "router_url": Field("str", required=True, text="name", help="http(s)://host[:port]"),
    "metrics": {
        "prefill": Field("str_list", default=[], max_items=64, help="prefill server URLs"),
        "decode": Field("str_list", default=[], max_items=64, help="decode server URLs"),
        "router": Field("str", nullable=True, text="name", help="the router's Prometheus URL"),
    },
    "profile": Field("str", nullable=True, text="name", help="the profile the cluster runs"),
    "namespace": Field("str", nullable=True, text="name", help="the cluster's namespace"),
    "replicas": Field("int", nullable=True, minimum=1, maximum=64, help="prefill:decode pairs"),
}
