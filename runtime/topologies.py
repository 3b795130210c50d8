"""Intra-node GPU topologies: the link bandwidth between each pair of GPUs in a node.

A cluster spec names a node group's topology (`topology = "p3.8xlarge"` in TOML, or
`32x4:V100@p3.8xlarge` on the command line); the cluster then carries, per node, a matrix of
link bandwidths in Gbps (one direction), which intra-node placers and bandwidth metrics read.

p3.8xlarge (AWS, 4 V100 SXM2): the four GPUs are one quad of the NVLink "hybrid cube-mesh" of
the DGX-1V / p3.16xlarge. Every pair is linked; pairs 0-3 and 1-2 by two NVLink 2.0 bricks,
the others by one, so that GPU 0-3 has twice the bandwidth of GPU 0-1 (Blox, EuroSys'24,
§5.3, after Blink, MLSys'20). One NVLink 2.0 brick carries 25 GB/s per direction and a double
link 50 GB/s (Apache MXNet wiki, "Link topology of p3.16xlarge instance": double NVLink 50 GB/s,
single NVLink 25 GB/s), i.e. 200 and 400 Gbps. These are link ratings, not the effective
bandwidth a training job measures.
"""

from __future__ import annotations

import numpy as np

_SINGLE, _DOUBLE = 200.0, 400.0  # Gbps per direction: one and two NVLink 2.0 bricks

TOPOLOGIES: dict[str, np.ndarray] = {
    "p3.8xlarge": np.array(
        [
            [0.0, _SINGLE, _SINGLE, _DOUBLE],
            [_SINGLE, 0.0, _DOUBLE, _SINGLE],
            [_SINGLE, _DOUBLE, 0.0, _SINGLE],
            [_DOUBLE, _SINGLE, _SINGLE, 0.0],
        ]
    ),
}
# The GPU type of each topology's instance: its links are those of these GPUs (NVLink 2.0 is the
# V100's; a K80 or a P100 of PCIe has none), so a group of another type may not name it.
TOPOLOGY_GPU_TYPES: dict[str, str] = {"p3.8xlarge": "V100"}
for _matrix in TOPOLOGIES.values():
    _matrix.flags.writeable = False


def mean_link_gbps(links: np.ndarray, local: np.ndarray) -> float:
    """Mean bandwidth over the GPU pairs of a set of a node's GPUs (local indices): what a job
    on those GPUs sees; NaN for fewer than two GPUs or an unknown topology."""
    k = len(local)
    if k < 2:
        return float("nan")
    sub = links[np.ix_(local, local)]
    return float(sub[np.triu_indices(k, 1)].mean())
