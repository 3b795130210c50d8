"""A number too large for a float (1e400) reads as infinity; the refusal names the text the file
holds, not "got inf", which the file does not say."""

from __future__ import annotations

import pytest

from roundhouse.tools.cli import main

GAVEL_LINE = "ResNet-18 (batch size 32)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1\t100\t1\t1.0\t-1\t{}\n"


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("t.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,5\n1,1e400,1,5\n", ":3: error: column 'arrival_s': '1e400'"),
        ("w.csv", "job_id,arrival_s,gpus,duration_s,weight\n0,0,1,5,-1e309\n", ":2: error: column 'weight': '-1e309'"),
        (
            "tiresias.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,1000,ResNet-18,1e999,0\n",
            ":2: error: column 'duration': '1e999'",
        ),
        ("g.trace", GAVEL_LINE.format("1e400"), ":1: error: column 'arrival_time': '1e400'"),
    ],
)
def test_an_overflowing_number_is_named_as_written(tmp_path, capsys, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    assert main(["trace", "describe", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}{where} is out of range for a number" in err, err
    assert "inf" not in err.split("error:", 1)[1], err


def test_infinity_written_as_such_is_still_told_as_not_finite(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s\n0,inf,1,5\n")
    assert main(["trace", "describe", str(path)]) == 2
    assert "column 'arrival_s': must be a finite number, got inf" in capsys.readouterr().err
