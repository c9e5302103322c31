"""`dsv4ops export rbg`: a profile rendered as the box would run it, then as a RoleBasedGroup
(v1alpha2), validated offline against the vendored schema before anything is printed."""

from __future__ import annotations

from dataclasses import dataclass

# The manifest's first words: `export rbg -o FILE` replaces only a file that begins so.
RBG_MARK = "# dsv4ops export rbg "


@dataclass(frozen=True)
class RbgExport:
    """What `export rbg` prints or writes: the manifest text and what it holds."""

    text: str  # the YAML documents, with the header line that says how to apply them
    group: str  # the RoleBasedGroup's metadata.name
    with_policy: bool  # a CoordinatedPolicy comes with it (more than one document)


def export_rbg(
    profile_ref: str,
    *,
    image: str | None,
    router_image: str | None,
    namespace: str | None,
    replicas: int,
    name: str | None,
    python: str,
    gpus_per_node: int | None,
    kernel_image: str | None,
) -> RbgExport:
    """The profile's export. Raises ProfileError or DsOpsError (a profile or an option it
    cannot export, documents that fail the schema)."""
    from dsv4ops import _yaml
    from dsv4ops.export import rbg as R
    from dsv4ops.export.validate import check_documents
    from dsv4ops.profiles import get_target, load_profile, render

    p = load_profile(profile_ref)
    deployment = render(p, get_target("box"))
    opts = R.ExportOptions(
        image=image or R.DEFAULT_IMAGE,
        router_image=router_image,
        namespace=namespace,
        replicas=replicas,
        python=python,
        name=name,
        gpus_per_node=gpus_per_node,
        kernel_image=kernel_image,
    )
    docs = R.documents(p, deployment, opts)
    check_documents(docs)
    manifest = docs[-1]
    group = str(manifest["metadata"]["name"])
    text = RBG_MARK + p.name + ": apply with kubectl apply -f; the Secret "
    text += f"{group}-env holds any secret env/flag values (not printed)\n"
    text += "---\n".join(_yaml.dump(d) for d in docs)
    return RbgExport(text, group, len(docs) > 1)
