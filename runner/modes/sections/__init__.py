"""Typed, frozen report sections: each reads its JSON with ``from_json`` (strictly, naming a missing key) and writes
it back with ``to_json`` (the same keys, order and values). See runner.modes.record."""

from runner.modes.record import Record, ReportFormatError
from runner.modes.sections.agreement import (
    Bootstrap,
    BothOrders,
    Confusion,
    GoldAgreement,
    HumanCeiling,
    InterJudge,
    Interval,
    JudgePair,
    PairAgreement,
    TrustSection,
    WinRate,
)
from runner.modes.sections.bias import BiasReport, LengthBias, LengthScoreBias, PositionBias, ScoreBias, SelfPreference
from runner.modes.sections.documents import (
    EndedReport,
    Gate,
    PairwiseReport,
    PointwiseReport,
    RunEnd,
    run_end_missing,
    with_run_end,
)
from runner.modes.sections.ensembles import (
    CombineStats,
    DawidSkeneReport,
    MemberAgreement,
    MemberHeadline,
    PairwiseEnsemble,
    PassVoteRow,
    PassVotes,
    PointwiseEnsemble,
    ScoreAgreement,
    ScorePair,
    VersusGold,
    VersusMembers,
)
from runner.modes.sections.scores import (
    CheckSection,
    Consistency,
    DetailedResult,
    FailedExample,
    HumanAgreement,
    Pearson,
    PointwiseSummary,
    ScoreSection,
    Spearman,
    UnscoredItem,
)
from runner.modes.sections.verdicts import AggregatedResult, GoldAccuracy, PairErrors, VerdictSummary

__all__ = [
    "AggregatedResult", "BiasReport", "Bootstrap", "CheckSection", "CombineStats", "Confusion", "Consistency",
    "BothOrders", "DawidSkeneReport", "DetailedResult", "EndedReport", "FailedExample", "Gate", "GoldAccuracy",
    "GoldAgreement", "HumanAgreement",
    "HumanCeiling", "InterJudge", "Interval", "JudgePair", "LengthBias", "LengthScoreBias", "MemberAgreement",
    "MemberHeadline", "PairAgreement", "PairErrors", "PairwiseEnsemble", "PairwiseReport", "PassVoteRow", "PassVotes",
    "Pearson",
    "PointwiseEnsemble", "PointwiseReport", "PointwiseSummary", "PositionBias", "Record", "ReportFormatError", "RunEnd",
    "ScoreAgreement", "ScoreBias", "ScorePair", "ScoreSection", "SelfPreference", "Spearman",
    "TrustSection", "UnscoredItem", "VerdictSummary", "VersusGold", "VersusMembers", "WinRate", "run_end_missing",
    "with_run_end",
]
