"""Runbooks: incident procedures in markdown that a person reads and `dsv4ops runbook run` executes.

parse.py turns a runbook file into steps (pure); run.py executes them through an injected command
executor (run order, expectations, confirmations); execute.py is the real executor (a child
`python -m dsv4ops` process, no shell). Format: docs/runbooks.md.
"""
