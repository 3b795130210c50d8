"""Placement: turn a Ranking into a Plan of GPU assignments, one module per idea.

placer.py holds the steps every placer shares (`Placer`); selection.py which ranked jobs fit,
packing.py how GPUs are chosen and packed, preemption.py preemption and backfill. The placers:
builtin.py (FirstFree, Consolidated), dally.py (DelayPlacer), gandiva.py (Gandiva), tiresias.py
(SkewAwarePlacer, ProfiledPlacer, TiresiasDally) and intranode.py (BandwidthAwareIntraNode,
RandomIntraNode); synergy.py gives launched jobs CPU and memory with their GPUs (Proportional,
SynergyTune, SynergyOpt). Gavel's placer is with its policies.
"""
