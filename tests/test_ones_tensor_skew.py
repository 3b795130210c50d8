"""ONES' applications get their tensor skew: every job of the artifact's trace, read and prepared
as the ones reproduction runs it, has the skew of the model the artifact trains, computed here
from that model's parameter shapes (largest tensor over all parameters), so Tiresias' placer
consolidates only the jobs whose largest tensor dominates."""

from math import prod

import numpy as np
import pytest

from roundhouse.elements.placement.tiresias import SkewAwarePlacer
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events
from roundhouse.runtime.world import World
from roundhouse.traces import ones
from roundhouse.traces.formats import load_trace
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import SHARED

TRACE = SHARED / "data" / "ones" / "trace_1.csv"

# The artifact builds torchvision's models with their defaults (1000 classes whatever the data
# set, auxiliary heads on) for ImageNet and CIFAR-10 alike, and BERT-base-uncased with a
# 2-label head. Their parameter shapes, written out:


def _conv(cin, cout, k, bias=True):
    kh, kw = (k, k) if isinstance(k, int) else k
    return [(cout, cin, kh, kw)] + ([(cout,)] if bias else [])


def _bn_conv(cin, cout, k):  # a convolution without bias, then batch norm's weight and bias
    return _conv(cin, cout, k, bias=False) + [(cout,), (cout,)]


def _linear(i, o):
    return [(o, i), (o,)]


def _alexnet():
    convs = _conv(3, 64, 11) + _conv(64, 192, 5) + _conv(192, 384, 3) + _conv(384, 256, 3) + _conv(256, 256, 3)
    return convs + _linear(256 * 6 * 6, 4096) + _linear(4096, 4096) + _linear(4096, 1000)


def _vgg16():
    widths = [64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    convs = [s for cin, cout in zip([3, *widths], widths) for s in _conv(cin, cout, 3)]
    return convs + _linear(512 * 7 * 7, 4096) + _linear(4096, 4096) + _linear(4096, 1000)


def _resnet(bottleneck, blocks):
    shapes, cin, grow = _bn_conv(3, 64, 7), 64, 4 if bottleneck else 1
    for stage, (width, n) in enumerate(zip((64, 128, 256, 512), blocks)):
        for b in range(n):
            if bottleneck:
                shapes += _bn_conv(cin, width, 1) + _bn_conv(width, width, 3) + _bn_conv(width, width * 4, 1)
            else:
                shapes += _bn_conv(cin, width, 3) + _bn_conv(width, width, 3)
            if b == 0 and (stage > 0 or cin != width * grow):
                shapes += _bn_conv(cin, width * grow, 1)  # the shortcut's projection
            cin = width * grow
    return shapes + _linear(512 * grow, 1000)


def _googlenet():
    def block(cin, c1, c3r, c3, c5r, c5, pool):  # torchvision's "5x5" branch has 3x3 kernels
        return (
            _bn_conv(cin, c1, 1) + _bn_conv(cin, c3r, 1) + _bn_conv(c3r, c3, 3)
            + _bn_conv(cin, c5r, 1) + _bn_conv(c5r, c5, 3) + _bn_conv(cin, pool, 1)
        )  # fmt: skip

    def aux(cin):  # 128 channels pooled to 4 x 4, then 2048 -> 1024 -> 1000
        return _bn_conv(cin, 128, 1) + _linear(2048, 1024) + _linear(1024, 1000)

    blocks = [
        (192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), (480, 192, 96, 208, 16, 48, 64),
        (512, 160, 112, 224, 24, 64, 64), (512, 128, 128, 256, 24, 64, 64), (512, 112, 144, 288, 32, 64, 64),
        (528, 256, 160, 320, 32, 128, 128), (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128),
    ]  # fmt: skip
    main = _bn_conv(3, 64, 7) + _bn_conv(64, 64, 1) + _bn_conv(64, 192, 3)
    main += [s for b in blocks for s in block(*b)] + _linear(1024, 1000)
    return main, aux(512) + aux(528)


def _inception_v3():
    def a(cin, pool):
        return (
            _bn_conv(cin, 64, 1) + _bn_conv(cin, 48, 1) + _bn_conv(48, 64, 5) + _bn_conv(cin, 64, 1)
            + _bn_conv(64, 96, 3) + _bn_conv(96, 96, 3) + _bn_conv(cin, pool, 1)
        )  # fmt: skip

    def c(c7):
        return (
            _bn_conv(768, 192, 1) + _bn_conv(768, c7, 1) + _bn_conv(c7, c7, (1, 7)) + _bn_conv(c7, 192, (7, 1))
            + _bn_conv(768, c7, 1) + _bn_conv(c7, c7, (7, 1)) + _bn_conv(c7, c7, (1, 7)) + _bn_conv(c7, c7, (7, 1))
            + _bn_conv(c7, 192, (1, 7)) + _bn_conv(768, 192, 1)
        )  # fmt: skip

    def e(cin):
        return (
            _bn_conv(cin, 320, 1) + _bn_conv(cin, 384, 1) + _bn_conv(384, 384, (1, 3)) + _bn_conv(384, 384, (3, 1))
            + _bn_conv(cin, 448, 1) + _bn_conv(448, 384, 3) + _bn_conv(384, 384, (1, 3)) + _bn_conv(384, 384, (3, 1))
            + _bn_conv(cin, 192, 1)
        )  # fmt: skip

    stem = _bn_conv(3, 32, 3) + _bn_conv(32, 32, 3) + _bn_conv(32, 64, 3) + _bn_conv(64, 80, 1) + _bn_conv(80, 192, 3)
    b = _bn_conv(288, 384, 3) + _bn_conv(288, 64, 1) + _bn_conv(64, 96, 3) + _bn_conv(96, 96, 3)
    d = (
        _bn_conv(768, 192, 1) + _bn_conv(192, 320, 3) + _bn_conv(768, 192, 1) + _bn_conv(192, 192, (1, 7))
        + _bn_conv(192, 192, (7, 1)) + _bn_conv(192, 192, 3)
    )  # fmt: skip
    aux = _bn_conv(768, 128, 1) + _bn_conv(128, 768, 5) + _linear(768, 1000)
    body = stem + a(192, 32) + a(256, 64) + a(288, 64) + b + c(128) + c(160) + c(160) + c(192) + d + e(1280) + e(2048)
    return body + aux + _linear(2048, 1000)


def _bert_base(labels=2):
    shapes = [(30522, 768), (512, 768), (2, 768), (768,), (768,)]  # word, position, type embeddings; norm
    for _ in range(12):
        shapes += _linear(768, 768) * 4 + [(768,), (768,)] + _linear(768, 3072) + _linear(3072, 768) + [(768,), (768,)]
    return shapes + _linear(768, 768) + _linear(768, labels)  # pooler, classifier


def _counts(shapes):
    sizes = [prod(s) for s in shapes]
    return sum(sizes), max(sizes)


def _models():
    googlenet, googlenet_aux = _googlenet()
    return {
        "alexnet": _alexnet(),
        "resnet50": _resnet(True, (3, 4, 6, 3)),
        "vgg16": _vgg16(),
        "inception_v3": _inception_v3(),
        "resnet18": _resnet(False, (2, 2, 2, 2)),
        "googlenet": googlenet + googlenet_aux,
        "googlenet without its auxiliary heads": googlenet,
        "bert": _bert_base(),
    }


def test_parameter_shapes_give_the_published_parameter_counts():
    # The shapes above against the parameter counts torchvision publishes for these models
    # (GoogLeNet's without its two auxiliary heads) and BERT-base's encoder (without its head).
    totals = {name: _counts(shapes)[0] for name, shapes in _models().items()}
    assert totals == {
        "alexnet": 61_100_840,
        "resnet50": 25_557_032,
        "vgg16": 138_357_544,
        "inception_v3": 27_161_264,
        "resnet18": 11_689_512,
        "googlenet": 13_004_888,
        "googlenet without its auxiliary heads": 6_624_904,
        "bert": 109_482_240 + 768 * 2 + 2,
    }


def _prepared_trace():
    """The artifact's trace read by format detection and prepared for the ones reproduction's
    64 GPUs, with the throughput profile and ONES' elastic profile its runs have."""
    loaded = load_trace(TRACE)
    assert loaded.format == "ones"
    world = World(Cluster.parse("16x4:V100"), ProfileTable.load(), elastic=ones.profile())
    batch, _ = world.prepare(loaded.frame, str(TRACE))
    world.add_jobs(batch)
    return loaded.frame, world


def test_every_ones_job_gets_its_models_tensor_skew():
    frame, world = _prepared_trace()
    shapes = _models()
    skew = world.jobs.column("tensor_skew")
    rows = np.array([world.jobs.row_of(j) for j in frame["job_id"].to_list()])
    apps = frame["model"].to_list()
    assert set(apps) == set(ones.PAIR_NAMES) and frame.height == 400
    for app in ones.PAIR_NAMES:
        total, largest = _counts(shapes[app.split("-")[0]])
        got = skew[rows[[i for i, a in enumerate(apps) if a == app]]]
        assert got == pytest.approx(np.full(len(got), largest / total), abs=6e-4), app  # the table keeps 3 decimals


def test_tiresias_placer_consolidates_only_the_ones_jobs_whose_largest_tensor_dominates():
    frame, world = _prepared_trace()
    rows = np.array([world.jobs.row_of(j) for j in frame["job_id"].to_list()])
    ctx = Round(world, GraphSettings(), 0.0, 1, Events(time=0.0))
    sensitive = SkewAwarePlacer(packlimit=0.3).sensitive(ctx, rows)
    consolidated = {app for app, s in zip(frame["model"].to_list(), sensitive.tolist()) if s}
    # AlexNet's and VGG16's first fully connected layers hold 62% and 74% of them (the CIFAR-10
    # VGG16 is torchvision's too); every other model's largest tensor holds under a quarter.
    assert consolidated == {"alexnet-imagenet", "vgg16-imagenet", "vgg16-cifar"}
