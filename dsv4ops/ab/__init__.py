"""A/B of two profiles on one box, time-multiplexed: schedule, statistics, decision, report.

Pure: no SSH, no HTTP, no subprocess; only report.py writes files. The orchestration that deploys
the blocks lives in dsv4ops/usecases/ab.py and dsv4ops/cli/ab.py.
"""
