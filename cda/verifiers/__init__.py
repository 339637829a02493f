"""Independent checks of results. A verifier may lower a verdict, never raise one.

Each name loads its own module on first use (sympy and pint come only with the verifiers
that need them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cda.lazy import lazy_exports

if TYPE_CHECKING:
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
    "AgreementReport",
    "LLMJudgement",
    "LLMProvider",
    "LLMProviderError",
    "OfflineProvider",
    "agreement_outcome",
    "apply_llm_gate",
    "cross_check",
    "ken_evidence",
    "redact",
    "run_function_check",
    "verify_arithmetic",
    "verify_temporal",
    "verify_units",
]

#: the module each public name lives in, imported on first access
_HOME: dict[str, str] = {
    **dict.fromkeys(("AgreementReport", "cross_check"), "cda.verifiers.agreement"),
    **dict.fromkeys(("agreement_outcome",), "cda.verifiers.agreement_outcome"),
    **dict.fromkeys(("verify_arithmetic",), "cda.verifiers.arithmetic"),
    **dict.fromkeys(("run_function_check",), "cda.verifiers.function_eval"),
    **dict.fromkeys(("ken_evidence",), "cda.verifiers.ken_evidence"),
    **dict.fromkeys(("LLMJudgement", "LLMProvider", "LLMProviderError", "apply_llm_gate"), "cda.verifiers.llm_gate"),
    **dict.fromkeys(("OfflineProvider",), "cda.verifiers.llm_offline"),
    **dict.fromkeys(("redact",), "cda.verifiers.redact"),
    **dict.fromkeys(("verify_temporal",), "cda.verifiers.temporal"),
    **dict.fromkeys(("verify_units",), "cda.verifiers.units_check"),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
