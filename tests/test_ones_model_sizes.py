"""ONES' model sizes (traces/ones.py, PAIRS' last column) against the networks its artifact
trains on CIFAR-10: torchvision's ImageNet-shaped VGG16 and GoogLeNet with their default 1000
classes (and GoogLeNet's two auxiliary heads, which it trains and so all-reduces), rebuilt here
layer by layer with torch.nn and counted."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from roundhouse.traces import ones

# float32 parameters, in MB of 10^6 bytes (the unit of PAIRS' sizes).
BYTES_PER_PARAMETER = 4


def _vgg16() -> nn.Module:
    """torchvision's vgg16 (configuration D, no batch norm, 7x7 adaptive pooling, 1000 classes)."""
    layers: list[nn.Module] = []
    cin = 3
    for width, repeats in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(repeats):
            layers += [nn.Conv2d(cin, width, 3, padding=1), nn.ReLU()]
            cin = width
        layers.append(nn.MaxPool2d(2))
    classifier = [nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000)]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(7), nn.Flatten(), *classifier)


def _conv(cin: int, cout: int, kernel: int) -> nn.Module:
    # torchvision's GoogLeNet BasicConv2d: a convolution without bias, then batch norm.
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, bias=False), nn.BatchNorm2d(cout, eps=0.001))


def _inception(cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int) -> nn.Module:
    # torchvision's "5x5" branch uses a 3x3 kernel (as its pretrained weights do).
    return nn.ModuleList(
        [_conv(cin, c1, 1), _conv(cin, c3r, 1), _conv(c3r, c3, 3), _conv(cin, c5r, 1), _conv(c5r, c5, 3), _conv(cin, pool, 1)]
    )


def _aux(cin: int) -> nn.Module:
    return nn.ModuleList([_conv(cin, 128, 1), nn.Linear(2048, 1024), nn.Linear(1024, 1000)])


def _googlenet(aux_heads: bool) -> nn.Module:
    """torchvision's googlenet (1000 classes), with or without its two auxiliary heads."""
    body = [
        _conv(3, 64, 7),
        _conv(64, 64, 1),
        _conv(64, 192, 3),
        _inception(192, 64, 96, 128, 16, 32, 32),
        _inception(256, 128, 128, 192, 32, 96, 64),
        _inception(480, 192, 96, 208, 16, 48, 64),
        _inception(512, 160, 112, 224, 24, 64, 64),
        _inception(512, 128, 128, 256, 24, 64, 64),
        _inception(512, 112, 144, 288, 32, 64, 64),
        _inception(528, 256, 160, 320, 32, 128, 128),
        _inception(832, 256, 160, 320, 32, 128, 128),
        _inception(832, 384, 192, 384, 48, 128, 128),
        nn.Linear(1024, 1000),
    ]
    heads = [_aux(512), _aux(528)] if aux_heads else []
    return nn.ModuleList(body + heads)


def _parameters(build) -> int:
    with torch.device("meta"):  # shapes only: VGG16's 138 M parameters are never allocated
        return sum(p.numel() for p in build().parameters())


def test_the_constructions_have_torchvisions_published_parameter_counts():
    assert _parameters(_vgg16) == 138_357_544
    assert _parameters(lambda: _googlenet(aux_heads=False)) == 6_624_904
    assert _parameters(lambda: _googlenet(aux_heads=True)) == 13_004_888


@pytest.mark.parametrize(
    ("app", "build"),
    [("vgg16-cifar", _vgg16), ("googlenet-cifar", lambda: _googlenet(aux_heads=True))],
)
def test_cifar_rows_are_the_size_of_the_torchvision_model_the_artifact_trains(app, build):
    mb = {p[0]: p[-1] for p in ones.PAIRS}[app]
    expected = _parameters(build) * BYTES_PER_PARAMETER / 1e6
    # Within 1%: the table rounds to whole MB; the CIFAR-shaped networks (about 60 MB for VGG16)
    # and GoogLeNet without its auxiliary heads (26.5 MB) are far outside it.
    assert mb == pytest.approx(expected, rel=0.01), f"{app}: {mb} MB in PAIRS, {expected:.1f} MB of float32 parameters"


def test_the_all_reduce_is_charged_for_the_corrected_size():
    # application(): an all-reduce moves twice the model, over InfiniBand between machines.
    app = ones.application("vgg16-cifar")
    expected = 2.0 * _parameters(_vgg16) * BYTES_PER_PARAMETER / 1e9 / ones._INTER_GBPS
    assert app.params[2] == pytest.approx(expected, rel=0.01)
