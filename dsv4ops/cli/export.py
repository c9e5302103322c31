"""`dsv4ops export rbg`: a profile as an SGLang RoleBasedGroup, validated offline before printing."""

from __future__ import annotations

from pathlib import Path

import click

from dsv4ops.cli._output import NAMED, output_option, write_or_echo


@click.group()
def export() -> None:
    """Export a profile to another orchestrator (Kubernetes)."""


@export.command("rbg")
@click.argument("profile")
@click.option("--image", type=NAMED, default=None, help="SGLang image for prefill and decode.")
@click.option(
    "--router-image",
    type=NAMED,
    default=None,
    help="The router's image (default for sglang-router: lmsysorg/sglang-router:v0.3.2; "
    "required for router.kind: smg).",
)
@click.option(
    "--namespace", type=NAMED, default=None, help="metadata.namespace of the RoleBasedGroup."
)
@click.option(
    "--replicas",
    type=int,
    default=1,
    show_default=True,
    help="Prefill:decode pairs (N:N); the router stays one.",
)
@click.option(
    "--name", type=NAMED, default=None, help="RoleBasedGroup name (default: the profile's)."
)
@click.option(
    "--python",
    "python",
    default="python3",
    show_default=True,
    help="The interpreter inside the images.",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1, max=64),
    default=None,
    help="GPUs a node offers: a TP larger than this is refused.",
)
@click.option(
    "--kernel-image",
    default=None,
    help="Image holding the profile's kernel package under /package.",
)
@output_option("the manifest")
def rbg(
    profile: str,
    image: str | None,
    router_image: str | None,
    namespace: str | None,
    replicas: int,
    name: str | None,
    python: str,
    gpus_per_node: int | None,
    kernel_image: str | None,
    output: Path | None,
) -> None:
    """Render PROFILE as the box would run it, then as a RoleBasedGroup (v1alpha2)."""
    from dsv4ops.usecases.export import RBG_MARK, export_rbg

    export = export_rbg(
        profile,
        image=image,
        router_image=router_image,
        namespace=namespace,
        replicas=replicas,
        name=name,
        python=python,
        gpus_per_node=gpus_per_node,
        kernel_image=kernel_image,
    )
    if not write_or_echo(export.text, output, mark=RBG_MARK):
        return
    policy = " and its CoordinatedPolicy" if export.with_policy else ""
    click.echo(
        f"wrote {output} (RoleBasedGroup {export.group}{policy}, "
        "validated against the vendored v1alpha2 schema)"
    )
