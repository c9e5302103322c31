"""The one exit-code table of every dsv4ops command (issue 20). Nothing else picks a number.

A script (cron, a runbook, CI) branches on the code, so each code means one thing everywhere:

    0    OK           done / HEALTHY / PASS / no finding. The only "all is well".
    1    REFUSED      a user mistake or a refusal: bad input, a held lock, nothing to roll back
                      to, a preflight that says no. Nothing was changed, so fixing the input and
                      running again is safe. (click's usage errors are mapped here too.)
    2    FAILED       something was observed to be wrong, or an operation failed and was
                      handled: a deploy rolled back, a canary FAIL, NOT HEALTHY, a unit
                      STOPPED (not serving, as the journal records it was stopped), a CRITICAL
                      finding, an experiment that stopped early. Act on it.
    3    BUG          an unexpected error in dsv4ops itself (a crash report is written).
                      Never used for a state of the target: a script can tell "dsv4ops broke"
                      from "the box is bad".
    4    UNDECIDED    there was not enough positive evidence to say OK or FAILED: a canary
                      INCONCLUSIVE, a WARNING finding, UNKNOWN (target unreachable, nothing
                      answered, timed out). Never read as OK: look, or try again.
    130  INTERRUPTED  Ctrl-C / SIGTERM (128 + SIGINT, the shell's convention); the operation
                      journaled where it stopped and how to resume or recover.

Why this split: 0/1/2 is what a pager script needs first (fine / my mistake / act); 3 keeps bugs
out of the target's story; 4 is separate from 0 and 2 because "could not tell" is neither, and
folding it into either is how a monitor says OK about a box nobody could reach.
"""

from __future__ import annotations

OK = 0
REFUSED = 1
FAILED = 2
BUG = 3
UNDECIDED = 4
INTERRUPTED = 130

# (code, name, meaning) in the order README and `--help` print them.
TABLE: tuple[tuple[int, str, str], ...] = (
    (OK, "OK", "done, HEALTHY, PASS, no finding"),
    (REFUSED, "REFUSED", "user mistake or refused; nothing was changed"),
    (
        FAILED,
        "FAILED",
        "handled failure (rolled back), canary FAIL, NOT HEALTHY, STOPPED, CRITICAL",
    ),
    (BUG, "BUG", "unexpected error in dsv4ops (crash report written)"),
    (UNDECIDED, "UNDECIDED", "INCONCLUSIVE, WARNING, UNKNOWN (unreachable, nothing answered)"),
    (INTERRUPTED, "INTERRUPTED", "Ctrl-C / SIGTERM; resume or recover as printed"),
)


def table_lines() -> list[str]:
    """The table as `--help` and README print it, one code a line."""
    return [f"{code:>3}  {name:<11}  {meaning}" for code, name, meaning in TABLE]


def for_verdict(verdict: str) -> int:
    """A canary verdict's code: PASS 0, FAIL 2, anything else (INCONCLUSIVE) 4."""
    return {"PASS": OK, "FAIL": FAILED}.get(verdict, UNDECIDED)


def for_health(word: str) -> int:
    """A status word's code: HEALTHY 0, NOT HEALTHY and STOPPED 2 (not serving: a script that
    pages on a box that does not serve must not be told "all is well" nor "could not tell"),
    anything else (UNKNOWN, UNMANAGED) 4."""
    return {"HEALTHY": OK, "NOT HEALTHY": FAILED, "STOPPED": FAILED}.get(word, UNDECIDED)


def for_status(word: str, *, damaged: bool) -> int:
    """`status`'s code: for_health's, except that a damaged recorded setting (deploy, rollback
    and stop refuse until it is mended) is a problem found: FAILED, whatever the word."""
    return FAILED if damaged else for_health(word)


def for_severity(name: str) -> int:
    """A watch round's worst finding: ok 0, critical 2, anything else (warning, unknown) 4."""
    return {"ok": OK, "critical": FAILED}.get(name.lower(), UNDECIDED)
