"""The executor contract suite: one set of tests against every executor (test_executor_contract.py)."""
