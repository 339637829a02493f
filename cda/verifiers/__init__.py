"""Independent checks of results. A verifier may lower a verdict, never raise one."""

from cda.verifiers.agreement import AgreementReport, cross_check

__all__ = ["AgreementReport", "cross_check"]
