"""Parse Prometheus text exposition into the few SGLang gauges the canary and status read.

Uses prometheus_client's own parser (the real one), then folds SGLang's per-rank label sets:
`sglang:num_running_reqs` etc. carry `tp_rank`, `engine_type`, ... (reference sglang-0.5.23.md §4).
Running/queued counts and generation throughput are summed over label sets; only attention-TP rank
0 reports by default, so the sum is the server's value.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from dsv4ops.errors import DsOpsError

# The most of one /metrics body any reader takes (watch, status, the drain, runbook checks, the
# canary's sampler); a server that sends more is reported as unread, never parsed from a cut
# body. Uncapped, watch held each body whole: an exporter gone wild (issue 40: 10^6 series,
# 50 MB a port) cost 1.2 GB and 92 s. A real 0.5.23 decode's /metrics is 127 KB at TP1
# (tools/sglang-cpu/observed/pd-cpu/), ~0.5 MB if all four ranks of a TP4 unit report: 8 MiB is
# 16x that, and a round of 3 ports just under it peaks at ~130 MiB
# (benchmarks/watch_metrics_read.py).
METRICS_READ_CAP_BYTES = 8 << 20


def oversized_why(url: str) -> str:
    """The words for a /metrics body longer than METRICS_READ_CAP_BYTES (not read)."""
    return f"{url} sent more than {METRICS_READ_CAP_BYTES >> 20} MiB of /metrics: not read"


RUNNING = "sglang:num_running_reqs"
QUEUED = "sglang:num_queue_reqs"
GEN_THROUGHPUT = "sglang:gen_throughput"
ABORTED_TOTAL = "sglang:num_aborted_requests_total"
GEN_TOKENS_TOTAL = "sglang:generation_tokens_total"
# Progress counter: bumped by every decode iteration in 0.5.23 (metrics_reporter.py L909-916);
# the family is declared before its first increment, its `mode` children appear on first use.
REALTIME_TOKENS = "sglang:realtime_tokens"
REALTIME_TOKENS_TOTAL = "sglang:realtime_tokens_total"
# Set once at start-up per phase (emit_constants, metrics_collector.py L1313/L1787): the TOTAL memory
# of the phase's captured graphs on one GPU, not per bucket; 0.0 for a phase that captured none.
GRAPH_MEMORY_GB = "sglang:graph_memory_usage_gb"


class MetricsParseError(DsOpsError):
    """A /metrics body is not valid Prometheus text."""


@dataclass(frozen=True)
class Samples:
    """name → list of (labels, value), exactly as exposed (counters keep their `_total` name)."""

    series: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    families: frozenset[str] = frozenset()  # every declared family, with or without samples

    def total(self, name: str, **match: str) -> float | None:
        """Sum of the samples of `name` whose labels include `match`; None when absent."""
        values = [
            v
            for labels, v in self.series.get(name, ())
            if all(labels.get(k) == want for k, want in match.items()) and not math.isnan(v)
        ]
        return sum(values) if values else None

    def label_values(self, name: str, label: str) -> set[str]:
        return {labels[label] for labels, _ in self.series.get(name, ()) if label in labels}


# The suffixes a sample's name adds to its family's (counters, histograms, summaries, info).
_SUFFIXES = ("_total", "_created", "_bucket", "_sum", "_count", "_info")


@functools.lru_cache(maxsize=16)
def _kept_line(keep: frozenset[str]) -> re.Pattern[str]:
    """A line about one of `keep`: its sample (the family's name, maybe a suffix, then labels
    or the value) or its `# TYPE`/`# HELP`. One regex over the body: the scan runs in C, so
    8 MiB of other series cost ~0.1 s, not a Python step per line (issue 40)."""
    names = "|".join(re.escape(f) for f in sorted(keep, key=len, reverse=True))
    suffixes = "|".join(_SUFFIXES)
    return re.compile(
        rf"^(?:#[ \t]+(?:TYPE|HELP)[ \t]+)?(?:{names})(?:{suffixes})?(?=[{{ \t\n]|$)[^\n]*\n?",
        re.MULTILINE,
    )


def kept_lines(text: str, keep: frozenset[str]) -> str:
    """The lines of `text` about the families in `keep` (a counter's without `_total`): a body
    of 10^6 series of other families costs a scan, never an object per series."""
    return "".join(m.group() for m in _kept_line(keep).finditer(text))


def parse_text(text: str, keep: frozenset[str] | None = None) -> Samples:
    """Parse a Prometheus text body. Raises MetricsParseError on malformed input.

    `keep`: the family names the caller reads (a counter's without `_total`); every other line
    is skipped before parsing, so neither its series nor its mistakes reach the result. None
    parses everything."""
    series: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    families: set[str] = set()
    if keep is not None:
        text = kept_lines(text, keep)
    try:
        for family in text_string_to_metric_families(text):
            families.add(family.name)
            for sample in family.samples:
                series[sample.name].append((dict(sample.labels), float(sample.value)))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsParseError(f"invalid Prometheus text: {exc}") from None
    return Samples(dict(series), frozenset(families))


@dataclass(frozen=True)
class ServerGauges:
    """The load state of one SGLang server (None where the metric is not exposed)."""

    running: float | None
    queued: float | None
    gen_throughput: float | None
    aborted_total: float | None
    engine_types: tuple[str, ...]
    # realtime_tokens_total{mode="decode"}: 0 while declared but never bumped, None when absent
    decode_tokens: float | None = None
    # graph_memory_usage_gb{phase="decode"}, the largest over ranks (each GPU holds its own graphs)
    decode_graph_memory_gb: float | None = None

    @property
    def has_load_gauges(self) -> bool:
        return self.running is not None

    @property
    def in_system(self) -> float:
        return (self.running or 0.0) + (self.queued or 0.0)


def server_gauges(samples: Samples) -> ServerGauges:
    return ServerGauges(
        running=samples.total(RUNNING),
        queued=samples.total(QUEUED),
        gen_throughput=samples.total(GEN_THROUGHPUT),
        aborted_total=samples.total(ABORTED_TOTAL),
        engine_types=tuple(sorted(samples.label_values(RUNNING, "engine_type"))),
        decode_tokens=_decode_tokens(samples),
        decode_graph_memory_gb=_graph_memory(samples, "decode"),
    )


def _graph_memory(samples: Samples, phase: str) -> float | None:
    values = [
        v
        for labels, v in samples.series.get(GRAPH_MEMORY_GB, ())
        if labels.get("phase") == phase and not math.isnan(v)
    ]
    return max(values) if values else None


def _decode_tokens(samples: Samples) -> float | None:
    value = samples.total(REALTIME_TOKENS_TOTAL, mode="decode")
    if value is None and REALTIME_TOKENS in samples.families:
        return 0.0
    return value
