"""The dsv4ops target-side agent: a stdlib-only package that runs ON THE TARGET.

The supervisor (`dsv4ops/remote/supervisor.py`) ships this package, with the real
`dsv4ops/secrets.py` it uses for redaction, as one zip (`dsv4ops/remote/agent_zip.py`) to
`<workdir>/.dsv4ops/agent.zip` and runs it as `python3 -I -S agent.zip`: one JSON request on
stdin ({"op": ..., "workdir": ..., "agent_sha256": ..., "id": ...}), one JSON reply on stdout
({"ok": true, "result": ..., "id": ...} or {"ok": false, "kind": ..., "error": ..., "id": ...}),
carrying the request's id: the operator uses a reply only when it answers its request
(`dsv4ops/remote/wire.py`). For a local target
the supervisor keeps one `agent.zip --serve` instead: the same requests and replies, one a line
(`main.serve`; the operator's side is `dsv4ops/remote/agent_session.py`).

It must run with a plain python3 and no dsv4ops installed, so its modules import nothing but
the standard library, each other, `dsv4ops.secrets` and `dsv4ops.journal.recordfile`
(tests/remote/agent_test.py runs the zip isolated to prove it). Modules: `common` (errors, work-dir layout, JSON files), `procfs`
(/proc reads), `processes` (start/stop/status/kill/log_tail), `httpwait` (requests and
readiness waits made from the target), `preflight`, `lock` (the deploy lock), `state`,
`journal` (the journal of record, with the file rules of `dsv4ops/journal/recordfile.py`),
`kernel_archive` (the kernel-package archive rules, also used by `dsv4ops kernels verify`),
`kernels` (install/switch/list/present/probe of kernel packages) and `main` (dispatch).

Layout under the work directory: logs/<name>.log (previous one rotated to .1), run/<name>.json
(pid, pgid, argv, redacted env, started_at, ports), run/<name>.exit.json (written by the
monitor when the component exits), state/<name>.json, deploy.lock, journal.jsonl,
kernels/<name>/<version>/.
"""
