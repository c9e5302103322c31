"""The layer table and the one-home rules of docs/architecture.md, enforced on the source.

Each exception is written here with its reason, and the same list is in docs/architecture.md:
a new one is a decision to make in both places, not a drift that passes unnoticed.
"""

from __future__ import annotations

import ast

import pytest

from dsv4ops.remote.agent_zip import members
from testing.package_ast import Module, imports, modules

# Layer of each area of the package (docs/architecture.md): a module imports only from lower
# layers (higher numbers); areas of one layer are independent of each other.
LAYERS: dict[str, float] = {
    # The programs that start the CLI: `python -m dsv4ops` and `python -m dsv4ops.demo`.
    "__main__": 0,
    "demo": 0,
    "cli": 1,
    # the verbs' use cases (one module a verb, over the PD engine in orchestrate/): the layer
    # that composes the engine with kernels, canary, watch and the A/B
    "usecases": 2,
    "orchestrate": 3,
    "kernels": 3,
    "runbooks": 3,
    # between orchestrate and the canary: watch reuses the canary's tool-call checks for its probe
    "watch": 3.5,
    "canary": 4,
    "monitoring": 4,
    "export": 4,
    "buckets": 4,
    "ab": 4,
    "remote": 5,
    "journal": 5,
    "profiles": 5,
    "metrics": 5,
    "": 6,  # dsv4ops/__init__.py (the version)
    "errors": 6,
    "exitcodes": 7,  # the one exit-code table: below errors, which names its codes
    "clock": 6,
    "_yaml": 6,
    "jsontypes": 7,  # the one alias of untyped JSON (JSONValue, JSONObject): every layer annotates with it
    "constants": 7,  # stdlib only; settings bounds the canary's concurrency with it
    "timings": 6,  # every timing default of the lifecycle (stop grace, ready, drain), once
    "secrets": 6,
    "whoami": 6,
    "localfiles": 6,  # a file an operator named, read as a regular file to a bound
    "plaintext": 6,  # what is no plain text: the CLI escapes it, a --reason refuses it
    "urls": 6,  # what makes a string a server's http(s) URL: targets.yaml and the CLI's options
    "waits": 6,  # the wait seam: long steps report to an observer the CLI draws (cli/_live.py)
    "sglang_paths": 6,  # what SGLang 0.5.23 reads per MoE path (kernels, profiles, the twin)
    # the declared settings and the declared sections (canary, probe): the profile builds them,
    # the deployment carries them, the journal's record is read back through them
    "settings": 6,
    "routerkind": 6,  # which router fronts the pair (issue 43): profiles and deployment name it
    "deployment": 5.5,
    # a deployment's component (one process: argv, env, ports, grace) and its record
    "component": 5.55,
    # the one reader of a recorded profile's sections, through their declarations (settings)
    "recorded": 5.6,  # the one model of a deployment: above the leaves it imports (errors, secrets)
    # the router's API key by reference (read on this machine, sent as a bearer): below the
    # deployment that names it, above the leaves it imports (errors, secrets)
    "apikey": 5.75,
}
LEAF = 6
TWIN = "twin"  # its own program (the SGLang stand-in): imported by no layer


def area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


AGENT_PACKAGE = "dsv4ops.remote.agent"
# The package modules the agent zip carries beside the agent, read from what the zip packs
# (remote/agent_zip.py members): the agent may import these whatever their layer.
AGENT_SHIPS = frozenset(
    name.removesuffix(".py").replace("/", ".")
    for name in members()
    if name.startswith("dsv4ops/") and not name.endswith("__init__.py")
)


def _own(mod: Module) -> list[tuple[str, int]]:
    """The dsv4ops modules `mod` imports, as (area, line), other areas only."""
    out = []
    for imp in imports(mod):
        if imp.module.split(".")[0] != "dsv4ops" or area(imp.module) == area(mod.name):
            continue
        if area(imp.module) not in LAYERS and area(imp.module) != TWIN:
            continue  # `from dsv4ops import __version__` also yields "dsv4ops.__version__"
        if mod.name.startswith(AGENT_PACKAGE) and imp.module in AGENT_SHIPS:
            continue  # the agent is its own program: what it imports ships in its zip
        out.append((area(imp.module), imp.lineno))
    return out


def test_every_area_has_a_layer() -> None:
    unknown = {area(m.name) for m in modules()} - set(LAYERS) - {TWIN}
    assert not unknown, f"give these a layer in LAYERS and docs/architecture.md: {sorted(unknown)}"


def test_modules_import_only_from_lower_layers() -> None:
    bad = []
    for mod in modules():
        mine = area(mod.name)
        for target, line in _own(mod):
            if mine == TWIN:
                ok = LAYERS.get(target, 0) >= LEAF  # the twin uses nothing above the leaf modules
            elif target == TWIN:
                ok = False
            else:
                ok = LAYERS[target] > LAYERS[mine]
            if not ok:
                bad.append(f"{mod.path}:{line} ({mine}) imports {target}")
    assert not bad, "imports against the layer table of docs/architecture.md:\n" + "\n".join(bad)


def test_nothing_imports_cli_but_the_programs_that_start_it() -> None:
    bad = [
        f"{mod.path}:{line}"
        for mod in modules()
        if LAYERS.get(area(mod.name)) != 0 and area(mod.name) != "cli"
        for target, line in _own(mod)
        if target == "cli"
    ]
    assert not bad


# What cli/ may import of the package (docs/architecture.md, layer 1): the use cases, and the
# leaf modules a command's parsing and printing need (the error boundary's errors and exit
# codes, the wait seam's values the live line draws, the YAML printer, constants, the clock, the
# JSON value aliases, the URL check its options share with targets.yaml, the plain-text rule `profile set` shares).
# The composition root, cli/_context.py, also builds a target's executor, supervisor and
# journal. Anything else is an import a use case should make for the command.
CLI_MAY_IMPORT = (
    "usecases",
    "urls",
    "plaintext",
    "errors",
    "exitcodes",
    "waits",
    "_yaml",
    "constants",
    "clock",
    "jsontypes",
)
CLI_ROOT = (
    "cli/_context.py",
    (
        "profiles",
        "profiles.model",
        "remote",
        "remote.connect",
        "journal.store",
        "journal.target",
    ),
)
# Issue 24: the lower modules a verb still imported itself, to route through its use case.
# Exact, and it only shrinks: empty since every verb goes through its use case (42 pairs and 35
# modules when it came in, 49 modules the day before). A new entry is a decision to make here
# and in docs/architecture.md, not a drift.
CLI_NOT_YET: dict[str, frozenset[str]] = {}


def _module_of(imported: str) -> str:
    """The package module an import names (`dsv4ops.profiles.get_target` -> `profiles`)."""
    names = {m.name for m in modules()}
    parts = imported.split(".")
    while parts and ".".join(parts) not in names:
        parts.pop()
    return ".".join(parts[1:])


def _cli_imports() -> dict[str, set[str]]:
    """What each module of cli/ imports of the package below it, as module names."""
    found: dict[str, set[str]] = {}
    for mod in modules():
        if area(mod.name) != "cli":
            continue
        path = str(mod.path).removeprefix("dsv4ops/")
        for imp in imports(mod):
            target = _module_of(imp.module) if imp.module.startswith("dsv4ops.") else "cli"
            if target and area(f"dsv4ops.{target}") != "cli":
                found.setdefault(path, set()).add(target)
    return found


def test_cli_imports_only_the_use_cases_and_what_prints() -> None:
    bad, stale = [], []
    for path, targets in sorted(_cli_imports().items()):
        allowed = set(CLI_NOT_YET.get(path, ())) | set(CLI_ROOT[1] if path == CLI_ROOT[0] else ())
        for target in sorted(targets - allowed):
            if not any(_matches(target, ok) for ok in CLI_MAY_IMPORT):
                bad.append(f"dsv4ops/{path} imports dsv4ops.{target}")
        stale += [f"{path}: {t}" for t in sorted(set(CLI_NOT_YET.get(path, ())) - targets)]
    stale += [p for p in CLI_NOT_YET if p not in _cli_imports()]
    assert not bad, "the CLI calls a use case for this (usecases/):\n" + "\n".join(bad)
    assert not stale, "no longer imported: strike off CLI_NOT_YET:\n" + "\n".join(stale)


def test_the_cli_rule_sees_a_lazy_import_of_a_lower_module() -> None:
    found = _cli_imports()
    assert "usecases.runbook" in found["cli/runbook.py"]  # inside a function
    assert "usecases.status" in found["cli/status.py"]


# What each external module (or module prefix) may be imported by: path prefixes relative to
# the repository root, each with the reason it is a home. "dsv4ops/twin/" is the twin's own
# program throughout; "dsv4ops/remote/agent/" is the target agent, a stdlib-only program
# uploaded to the target and run there in its own process.
TWIN_PROGRAM = ("dsv4ops/twin/", "the twin is its own program (an SGLang stand-in)")
AGENT_PROGRAM = ("dsv4ops/remote/agent/", "the target agent: its own stdlib-only process")
HOMES: dict[str, tuple[tuple[str, str], ...]] = {
    "subprocess": (
        ("dsv4ops/remote/local.py", "the Executor seam on this machine"),
        (
            "dsv4ops/remote/agent_session.py",
            "a local target's long-lived agent: one child spoken to a line at a time, which "
            "`Executor.run` (one buffered command) cannot be",
        ),
        AGENT_PROGRAM,
        TWIN_PROGRAM,
        ("dsv4ops/kernels/aot_worker.py", "runs in the AOT venv (.venv-aot), without dsv4ops"),
        (
            "dsv4ops/runbooks/execute.py",
            "children are `dsv4ops` commands with output streamed through; an Executor buffers",
        ),
        (
            "dsv4ops/profiles/git.py",
            "git on the operator's own checkout; profiles may not import remote (same layer)",
        ),
    ),
    "time": (
        ("dsv4ops/clock.py", "the clock seam: every clock read and sleep of the layers"),
        AGENT_PROGRAM,
        TWIN_PROGRAM,
        ("dsv4ops/kernels/aot_worker.py", "runs in the AOT venv (.venv-aot), without dsv4ops"),
    ),
    "datetime": (("dsv4ops/clock.py", "the clock seam"), TWIN_PROGRAM),
    "yaml": (("dsv4ops/_yaml.py", "one loader (safe, duplicate keys refused) for every file"),),
    "aiohttp": (
        ("dsv4ops/canary/loadgen.py", "the canary's streaming HTTP client"),
        TWIN_PROGRAM,
    ),
    "httpx": (),  # test clients and benchmarks only: a dev dependency
    "requests": (),
    "urllib.request": (AGENT_PROGRAM,),  # the target side's HTTP waits (stdlib only)
    "urllib.error": (AGENT_PROGRAM,),
    "http.client": (AGENT_PROGRAM,),
    "getpass": (("dsv4ops/whoami.py", "who runs the CLI: journal `who`, lock holders"),),
    "click": (("dsv4ops/cli/", "the CLI"),),
    "tabulate": (("dsv4ops/cli/", "the CLI's tables"),),
    "fabric": (("dsv4ops/remote/ssh.py", "the SSH executor"),),
    "paramiko": (
        ("dsv4ops/remote/ssh.py", "the SSH executor"),
        ("dsv4ops/remote/ssh_trust.py", "the executor's known_hosts and host-key policy"),
    ),
    "uvloop": (("dsv4ops/canary/eventloop.py", "the canary's event loop, optional"),),
    "torch": (("dsv4ops/kernels/", "kernel sources and checks, imported lazily"),),
    "triton": (("dsv4ops/kernels/", "kernel sources and builders, imported lazily"),),
    "rich": (("dsv4ops/cli/_live.py", "the live progress line of long steps, imported lazily"),),
    "matplotlib": (
        ("dsv4ops/canary/plots.py", "PNG plots in canary reports (report extra)"),
        ("dsv4ops/ab/report.py", "PNG plots in A/B reports (report extra)"),
    ),
}


def _matches(imported: str, rule: str) -> bool:
    return imported == rule or imported.startswith(rule + ".")


def _outside_home(rule: str) -> list[str]:
    homes = tuple(path for path, _why in HOMES[rule])
    return [
        f"{mod.path}:{imp.lineno} imports {imp.module}"
        for mod in modules()
        if not str(mod.path).startswith(homes) or not homes
        for imp in imports(mod)
        if _matches(imp.module, rule)
    ]


@pytest.mark.parametrize("rule", sorted(HOMES))
def test_one_home_per_external_module(rule: str) -> None:
    bad = sorted(set(_outside_home(rule)))
    homes = ", ".join(path for path, _ in HOMES[rule]) or "nowhere in the package"
    assert not bad, f"{rule} belongs in {homes} (docs/architecture.md):\n" + "\n".join(bad)


def test_user_and_host_name_are_read_in_one_place() -> None:
    homes = ("dsv4ops/whoami.py", AGENT_PROGRAM[0], TWIN_PROGRAM[0])
    bad = [
        f"{mod.path}:{node.lineno}"
        for mod in modules()
        if not str(mod.path).startswith(homes)
        for node in ast.walk(mod.tree)
        if (isinstance(node, ast.Attribute) and node.attr in ("gethostname", "getuser"))
        or (isinstance(node, ast.alias) and node.name in ("gethostname", "getuser"))
    ]
    assert not bad, "use dsv4ops.whoami (local_host, local_user):\n" + "\n".join(bad)


def test_the_rules_see_the_imports_they_police() -> None:
    # The walker finds lazy imports inside functions and `from x import y` submodules; were it
    # blind to them the rules above would pass vacuously.
    found = {
        (str(m.path), i.module)
        for m in modules()
        for i in imports(m)
        if i.module in ("subprocess", "urllib.request", "time", "dsv4ops.clock")
    }
    assert ("dsv4ops/remote/agent/httpwait.py", "urllib.request") in found  # a lazy import
    assert ("dsv4ops/remote/local.py", "subprocess") in found
    assert ("dsv4ops/canary/loadgen.py", "dsv4ops.clock") in found
