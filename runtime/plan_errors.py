"""The error of a plan that cannot be carried out. It has a module of its own so that plan
checking (runtime/plans.py) and the checks it binds as its methods (runtime/plan_resources.py,
runtime/plan_resizes.py) raise the one class; other modules take it from runtime/plans.py."""

from __future__ import annotations

from roundhouse.errors import RoundhouseError


class PlanError(RoundhouseError):
    """A plan that cannot be carried out (double-booked GPU, unknown job, ...)."""
