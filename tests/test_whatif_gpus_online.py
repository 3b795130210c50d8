"""`roundhouse whatif` from a journal whose run lost a node says so: its starting state gives
the GPUs online (what both sides run on, as `roundhouse submit --status` gives them), in the
JSON and in the table's header."""

from __future__ import annotations

import json

import attrs
import numpy as np

import tests.test_journal_reading as reading
from roundhouse.runtime.backends.live.records import record_of


class LosingNodeB(reading.Recording):
    """The stand-in live backend, whose second node (GPUs 2 and 3) is lost at round 3: the jobs
    on it wait again, as the live backend requeues them."""

    def poll(self):
        events, progress = super().poll()
        if self.k == 3:
            holders = self.world.holder[2:4]
            lost = np.unique(holders[holders >= 0])
            online = np.array([True, True, False, False])
            events = attrs.evolve(events, online=online, nodes_lost=("node-1",), requeued=lost)
            self.record = record_of(events, progress, self.world.jobs.column("job_id"), self.record["submitted"])
        return events, progress


def test_whatif_after_a_node_was_lost_gives_the_gpus_online(tmp_path, capsys, monkeypatch):
    from roundhouse.tools.cli import main

    monkeypatch.setattr(reading, "Recording", LosingNodeB)
    path = reading.make_journal(tmp_path, jobs=6, cluster="2x2:V100", stop_s=60.0)
    assert main(["whatif", str(path), "--json"]) == 0, capsys.readouterr().err
    point = json.loads(capsys.readouterr().out)["from"]
    assert (point["gpus"], point["gpus_online"]) == (4, 2)
    assert point["running"] <= 2
    assert main(["whatif", str(path)]) == 0
    assert "2 of 4 GPUs online" in " ".join(capsys.readouterr().out.split())


def test_whatif_with_every_gpu_online_says_nothing_of_it(tmp_path, capsys):
    from roundhouse.tools.cli import main

    path = reading.make_journal(tmp_path, jobs=6, cluster="2x2:V100", stop_s=60.0)
    assert main(["whatif", str(path), "--json"]) == 0
    point = json.loads(capsys.readouterr().out)["from"]
    assert (point["gpus"], point["gpus_online"]) == (4, 4)
    assert main(["whatif", str(path)]) == 0
    assert "GPUs online" not in capsys.readouterr().out
