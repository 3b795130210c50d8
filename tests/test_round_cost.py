"""The runtime's cheaper round: events say where launches went, and merging keeps that
consistent; progress over several quiet rounds adds up as round by round."""

import numpy as np

from roundhouse.runtime.types import Events
from roundhouse.runtime.world import add_progress


def test_merged_events_keep_where_launches_went_only_when_every_part_says():
    a = Events(time=5.0, launched=[3, 7], launched_gpus=[0, 1, 4], launched_counts=[2, 1])
    b = Events(time=5.0, launched=[9], launched_gpus=[6], launched_counts=[1], suspended=[2])
    both = Events.merge([a, b])
    assert both.launched.tolist() == [3, 7, 9]
    assert both.launched_gpus.tolist() == [0, 1, 4, 6]
    assert both.launched_counts.tolist() == [2, 1, 1]
    hand_made = Events(time=5.0, launched=[11], finished=[1], finished_at=[4.0])
    mixed = Events.merge([a, hand_made])
    assert mixed.launched.tolist() == [3, 7, 11]
    assert len(mixed.launched_counts) == 0 and len(mixed.launched_gpus) == 0


def test_progress_over_rounds_is_the_same_bits_as_round_by_round():
    rng = np.random.default_rng(3)
    rows = np.array([1, 4, 5])
    steps = rng.random((4, 3)) * 1e-3 + np.array([[0.1], [300.0], [300.0], [0.7]])
    start = {name: rng.random(8) * 1e6 for name in ("done", "service", "run_s", "compute_s")}
    once = {k: v.copy() for k, v in start.items()}
    add_progress(once, rows, steps, 7)
    by_round = {k: v.copy() for k, v in start.items()}
    for _ in range(7):
        add_progress(by_round, rows, tuple(steps), 1)
    for name in start:
        assert np.array_equal(once[name], by_round[name]), name
    assert np.all(once["done"][rows] > start["done"][rows])  # (the rows moved; the others did not)
    assert np.array_equal(np.delete(once["done"], rows), np.delete(start["done"], rows))
