"""Prompt-cache warming: request traces, the replay of a trace under a warming policy through
the one cache model, the policies themselves, the offline optimum they are measured against,
and the keeper that keeps live Sessions warm through `session.generate(warming=True)`.

The names below are the public surface (docs/warming.md); the submodules say how each works.
"""

from .keeper import (
    Clock,
    EmulatorClock,
    FromPolicy,
    IdleSession,
    KeeperPolicy,
    LedgerEntry,
    MonotonicClock,
    SettableClock,
    TtlSkiRental,
    WarmingKeeper,
    WarmingLedger,
    default_policy,
)
from .policies import (
    DEFAULT_POLICY,
    Decision,
    History,
    Learned,
    Policy,
    Tracking,
    default_experts,
    reference_policies,
)
from .policies.saved import PolicyFileError, load_policy, save_policy
from .policies.trace_replay import ReplayResult, prepare, replay
from .study.experiment import ExperimentResult, run_warming_experiment
from .study.offline_optimum import Optimum, lower_bound, optimum
from .study.report import (
    PolicyRow,
    PolicyTable,
    compare_held_back,
    compare_policies,
    fit_policies,
    sweep_interval_grid,
    sweep_intervals,
)
from .study.shards import LARGE_TRACE, replay_policies, split_trace
from .traces import RecordedUsage, Trace, TraceFormatError, TraceRequest
from .traces.events import ParquetUnavailable, write_events_jsonl, write_events_parquet
from .traces.formats import FORMATS, load_trace
from .traces.generator import SessionMix, generate_sessions

__all__ = [
    "Clock",
    "EmulatorClock",
    "SettableClock",
    "ParquetUnavailable",
    "write_events_jsonl",
    "write_events_parquet",
    "DEFAULT_POLICY",
    "PolicyFileError",
    "Tracking",
    "compare_held_back",
    "default_experts",
    "fit_policies",
    "load_policy",
    "save_policy",
    "Decision",
    "ExperimentResult",
    "FromPolicy",
    "History",
    "IdleSession",
    "KeeperPolicy",
    "Learned",
    "LedgerEntry",
    "MonotonicClock",
    "Optimum",
    "Policy",
    "PolicyRow",
    "PolicyTable",
    "ReplayResult",
    "SessionMix",
    "Trace",
    "TraceFormatError",
    "RecordedUsage",
    "TraceRequest",
    "TtlSkiRental",
    "WarmingKeeper",
    "WarmingLedger",
    "FORMATS",
    "LARGE_TRACE",
    "compare_policies",
    "default_policy",
    "generate_sessions",
    "load_trace",
    "lower_bound",
    "optimum",
    "prepare",
    "reference_policies",
    "run_warming_experiment",
    "replay",
    "replay_policies",
    "split_trace",
    "sweep_interval_grid",
    "sweep_intervals",
]
