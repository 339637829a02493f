"""Cedar policies as CDA problems: read Cedar (policies, schemas, entities, requests), authorize
requests with Cedar's semantics, run Cedar's integration tests, and decide properties of policy
sets (always-allows, implies, no-new-access, …) over every entity store the schema allows (or a
given one), lowered to CDA's IR and decided by z3 or clingo, with counterexample scenarios.

The public functions (what ``cda policy`` and the batch runner call) are re-exported here and
loaded on first use.
"""

from cda.lazy import lazy_exports

__all__ = [
    "Answer",
    "AnalysisResult",
    "EVERY_STORE",
    "Environment",
    "PolicySet",
    "RequestResult",
    "analyze",
    "analyze_files",
    "select_environments",
    "always_allows",
    "always_denies",
    "authorize",
    "disjoint",
    "environments",
    "equivalent",
    "implies",
    "load_policy_set",
    "policy_set_of",
    "never_errors",
    "no_new_access",
    "run_test_dir",
    "run_test_file",
    "summarize",
]

_HOME = {
    **dict.fromkeys(["Answer", "PolicySet", "authorize", "load_policy_set", "policy_set_of"], "cda.policy.authorization"),
    **dict.fromkeys(["RequestResult", "run_test_dir", "run_test_file", "summarize"], "cda.policy.cedar_tests"),
    **dict.fromkeys(
        ["AnalysisResult", "EVERY_STORE", "Environment", "analyze", "analyze_files", "select_environments", "always_allows", "always_denies", "disjoint", "environments",
         "equivalent", "implies", "never_errors", "no_new_access"],
        "cda.policy.analyze",
    ),
}  # fmt: skip
__getattr__, __dir__ = lazy_exports(__name__, _HOME)
