"""Placement: turn a Ranking into a Plan of GPU assignments, one module per idea.

placer.py holds the steps every placer shares (`Placer`); selection.py which ranked jobs fit,
packing.py how GPUs are chosen and packed, selected_packing.py the packing of the jobs selected,
preemption.py preemption and backfill. The placers: builtin.py (FirstFree, Consolidated),
dally.py (DelayPlacer; dally_offers.py its offers of GPUs and each job's choice), gandiva.py (Gandiva), tiresias.py
(SkewAwarePlacer, ProfiledPlacer, TiresiasDally) and intranode.py (BandwidthAwareIntraNode,
RandomIntraNode); synergy.py gives launched jobs CPU and memory with their GPUs (Proportional,
SynergyTune, SynergyOpt). Gavel's placer is with its policies.
"""
