"""Independent checks of results. A verifier may lower a verdict, never raise one."""

from cda.verifiers.agreement import AgreementReport, cross_check
from cda.verifiers.agreement_outcome import agreement_outcome
from cda.verifiers.arithmetic import verify_arithmetic
from cda.verifiers.function_eval import run_function_check
from cda.verifiers.ken_evidence import ken_evidence
from cda.verifiers.llm_gate import LLMJudgement, LLMProvider, LLMProviderError, apply_llm_gate
from cda.verifiers.llm_offline import OfflineProvider
from cda.verifiers.redact import redact
from cda.verifiers.temporal import verify_temporal
from cda.verifiers.units_check import verify_units

__all__ = [
    "AgreementReport", "LLMJudgement", "LLMProvider", "LLMProviderError", "OfflineProvider", "agreement_outcome",
    "apply_llm_gate", "cross_check", "ken_evidence", "redact", "run_function_check", "verify_arithmetic",
    "verify_temporal", "verify_units",
]
