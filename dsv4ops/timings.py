"""Every timing default of a deployment's lifecycle, declared once: the stop grace, the readiness
waits, the drain bound and the probe's request limit, on the box and on the twin.

Each value says here why it is what it is; every user imports it (tests/architecture/
timings_test.py fails on a literal that repeats one of these elsewhere). A profile may set the
stop grace per component (`prefill.stop_grace_s`, ...; bounds below), recorded in the deployment
so a stop gives each process the grace it was deployed with. Leaf module: imports nothing.
Seconds throughout.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# -- stop ---------------------------------------------------------------------------------------

# Between SIGTERM to the server process and SIGKILL of what is left of its group. SGLang 0.5.23's
# graceful path takes up to ~20 s: the SIGTERM watchdog's 5 s tick, then 15 s for the schedulers
# to answer ShutdownReq (tokenizer_manager.py:456); 30 s leaves room for the drain of what is
# still in flight. The default of a profile's `<component>.stop_grace_s`.
STOP_GRACE_S = 30.0
# The bounds a profile's stop_grace_s is held to: under 1 s no server even sees its SIGTERM
# before the SIGKILL; over 10 minutes a wedged process holds a stop (and its deploy lock) for
# longer than any graceful exit takes.
STOP_GRACE_MIN_S = 1.0
STOP_GRACE_MAX_S = 600.0
# The cap on the twin's grace, above its worst graceful exit, as 0.5.23's: the 5 s watchdog tick,
# then 15 s for the schedulers (a wedged decode never answers and is killed then), in model
# seconds at the twin's default scale (twin/shutdown.py; tests/twin/lifecycle_test.py). A
# profile's longer grace is cut to it on twin targets: a wedged twin is not waited on longer.
TWIN_STOP_GRACE_S = 25.0
# A router stopped after its drain has had its drain since its SIGTERM already (the bound, or less
# when what it holds cannot finish): it gets only this, then SIGKILL.
AFTER_DRAIN_GRACE_S = 1.0

# -- calls to the target ------------------------------------------------------------------------

# What a call that waits on the target (a stop's grace, a readiness wait, HTTP requests) waits for
# the agent's answer beyond that wait: after a stop's grace the SIGKILL of what is left (up to
# 5 s for the group to be gone) and the port check (1 s), then the transport's own latency (an
# SSH round trip, an agent that starts).
CALL_MARGIN_S = 30.0

# -- readiness ----------------------------------------------------------------------------------

# Per component, from its start to its ready answer. A real DSV4 prefill or decode loads its
# weights and captures CUDA graphs before its HTTP port opens, for minutes: 20 leaves room for a
# cold page cache without hiding a server that will never come up for an hour. The router starts
# in seconds but is ready only once its health checks (interval 10 s, 2 successes) pass.
READY_S: Mapping[str, float] = MappingProxyType(
    {"prefill": 1200.0, "decode": 1200.0, "router": 180.0}
)
# The twin loads nothing: two minutes is a twin that will not start.
TWIN_READY_S: Mapping[str, float] = MappingProxyType(
    {"prefill": 120.0, "decode": 120.0, "router": 60.0}
)
# A component none of those name (a test's toy process).
READY_OTHER_S = 300.0

# -- drain --------------------------------------------------------------------------------------

# How long the router's drain may take before it is SIGKILLed: the longest stream a client
# would still wait for (sglang-router's own --shutdown-grace-period-secs is 180 s, above it).
DRAIN_S = 60.0
# The twin's streams are short and its time runs scaled.
TWIN_DRAIN_S = 15.0

# -- probe --------------------------------------------------------------------------------------

# One probe request through the router after a deploy: a first request on a real decode can
# wait behind a CUDA-graph warmup; on the twin it is answered in model time.
PROBE_REQUEST_S = 60.0
TWIN_PROBE_REQUEST_S = 30.0

# -- requests made from the target ---------------------------------------------------------------

# One HTTP request the agent makes on the target (a /metrics scrape, a health check): a server
# that does not answer a GET in 10 s is not answering.
TARGET_HTTP_S = 10.0
