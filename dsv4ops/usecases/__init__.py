"""Use cases: what one CLI verb does, end to end, composed from the layers below.

Each module takes plain values (a target name, a profile reference, flags) and a `TargetSession`
(executor, supervisor, journal, clock, built by `cli/_context.py`), and returns a value the CLI
prints (`Outcome`, a plan, a kernel switch's result). Refusals raise DsOpsError; the CLI's one
error boundary turns them into exit codes. Nothing here prints or exits.

- `deploy.py`, `rollback.py`, `stop.py`: the PD unit's operations (through `ops.Operator` and
  the journaled-operation context, `orchestrate/operation.py`);
- `gate.py`: the canary a deploy runs after its end-to-end probe, typed on `Thresholds`;
- `kernels.py`: `kernels build|verify|list`, and `kernels deploy|rollback` under the same
  operation context;
- `hazard.py`: `twin hazard`'s switch under the same operation context (`twin.py` checks the
  target and plans it);
- `canary.py`: where `dsv4ops canary` sends its load and which thresholds judge it;
- `session.py`: the `TargetSession`, and `reachable(session)`: a target's router, server and
  metrics URLs (an endpoint target's, the unit the session's journal records, or a profile's
  render);
- `endpoint.py`: endpoint targets (a cluster): the process verbs refuse with the kubectl line,
  `status` reads the router;
- `ab.py` (`ab_plan.py`, `ab_switch.py`, `ab_blocks.py`, `ab_outcome.py`): `dsv4ops ab`, an A/B experiment
  whose blocks deploy through `deploy.py` nested in it, measured by the canary, judged by
  `dsv4ops.ab`;
- `status.py`: the report of `dsv4ops status`, also the runbook engine's preconditions;
- `journal.py`: the `journal` listing (each operation's true state, also `status`'s open
  operations) and `journal --merge`;
- `watch.py`: `dsv4ops watch`, a Watcher bound to the session, and its findings exporter;
- `runbook.py`: `runbook list|show`, and `runbook run`, the engine bound to the session
  (journal, world, executor);
- `profile.py`: `profile list|show|validate|render|diff` (redacted for printing) and
  `profile set` (the toggles written and committed, naming the command);
- `buckets_plan.py` (`buckets.py`: a live decode sampled): `buckets plan`;
- `twin.py`: `twin hazard`, a twin's hazard switched, journaled;
- `export.py`, `monitoring.py`: `export rbg` and `monitoring render` (pure: no target touched);
- `compose.py` / `render.py`: readiness timeouts, the operator, kernel support, and profiles
  rendered into Deployments (with their git provenance) for a target.

This sub-package is the one part of `orchestrate` that imports `dsv4ops.kernels` and
`dsv4ops.canary` (lazily): it binds them to the engine, which knows neither. (`dsv4ops.ab`
too, lazily: the A/B statistics, decision and report.)
"""
