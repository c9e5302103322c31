"""One module per suite; `dsv4ops.canary.runner` dispatches by name."""
