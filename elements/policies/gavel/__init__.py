"""Gavel (OSDI'20): heterogeneity-aware policies as optimisation problems, realized by rounds.

solvers.py holds the policies (Active -> Shares, LPs on OR-Tools), waterfill.py the water
filling of hierarchical policies, formulation.py and lp.py the shared program machinery,
mechanism.py the round-based mechanism (Shares -> Ranking with a GPU type per entry), with each
round's pass of Algorithm 1 in greedy_pass.py and why jobs wait in wait_reasons.py,
placement.py its placer, estimator.py the pair-throughput estimator.
"""
