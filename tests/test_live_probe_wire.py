"""Bad wire messages as a hand-written submitter or agent sends them: a number written past any
float (`1e400`, which JSON reads as infinite) is named as such, not as `Infinity` (which the
sender never wrote, and which the wire refuses as a word of its own), and a submitted job's cell
holding one is said to be out of range, not "not a number"."""

from __future__ import annotations

import pytest

from roundhouse.wire import protocol


@pytest.mark.parametrize(
    "frame, said",
    [
        (
            b'{"v":4,"type":"submit","seq":1,"jobs":[{"gpus":1,"model":"LM","iterations":1e400}]}',
            "submit: jobs[0].iterations is a number past any float (written 1e309 or more, or -1e309 or less)",
        ),
        (
            b'{"v":4,"type":"heartbeat","seq":1,"running":[{"job":1,"attempt":1,"rank":0,"gpu":0,"iteration":-1e400}]}',
            "heartbeat: running[0].iteration must be a whole number, got a number past any float",
        ),
        (
            b'{"v":4,"type":"resize","seq":1,"job":7,"attempt":1,"generation":1,"world_size":2,"batch_size":64,'
            b'"master_addr":"h","master_port":4000,"ranks":[],"lr_scale":1e999}',
            "resize: lr_scale must be a finite number",
        ),
    ],
)
def test_a_number_past_any_float_is_named_so(frame, said):
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode(frame)
    assert said in err.value.reason and "Infinity" not in err.value.reason, err.value.reason


def test_the_word_infinity_is_still_refused_as_written():
    with pytest.raises(protocol.ProtocolError, match="Infinity is not allowed in a message"):
        protocol.decode(b'{"v":4,"type":"status","seq":Infinity}')
