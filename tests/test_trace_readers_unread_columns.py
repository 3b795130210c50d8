"""Every CSV reader with column names says which of a file's columns it does not read, as the
canonical reader does: Tiresias' (which keeps extras) names a column close to a known one;
the readers of a fixed set of columns (Pollux, ONES, PAI with its header, Helios' log) name
every other column, which they leave out, with the one it most likely meant."""

from __future__ import annotations

import pytest

from roundhouse.traces.formats import read_trace

HELIOS_ROW = "1,u1,vc1,2,8,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,60"
CASES = {
    "tiresias": (
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval,batch_szie\n1,2,0,100,resnet50,3600,0,32\n",
        "batch_szie",
        "is not a column Roundhouse reads: it is kept as an extra column, unused; did you mean 'batch_size'?",
    ),
    "pollux": (
        "name,time,application,num_replicas,batch_size,num_replica\ncifar10-0,0,cifar10,1,128,2\n",
        "num_replica",
        "is not a column of a Pollux workload: it is left out, unread; did you mean 'num_replicas'?",
    ),
    "ones": (
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus,targetacc\n"
        "0,resnet50,imagenet,10000,10,32,5e-4,0.008,0.55,16,0.9\n",
        "targetacc",
        "is not a column of an ONES trace: it is left out, unread; did you mean 'target_acc'?",
    ),
    "pai": (
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type,plan_gpus\n"
        "j1,t1,2,Terminated,100,200,600,29,100,V100,1\n",
        "plan_gpus",
        "is not a column of PAI's task table: it is left out, unread; did you mean 'plan_gpu'?",
    ),
    "helios": (
        f"job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue,site\n{HELIOS_ROW},a\n",
        "site",
        "is not a column of Helios' cluster_log: it is left out, unread",
    ),
}


@pytest.mark.parametrize("format", sorted(CASES))
def test_a_column_the_reader_does_not_read_is_named_once(tmp_path, capsys, format):
    text, column, said = CASES[format]
    path = tmp_path / f"{format}.csv"
    path.write_text(text)
    assert read_trace(path, format).height == 1
    read_trace(path)  # (format detection finds the same format; a second read says nothing more)
    err = capsys.readouterr().err
    assert err.count(f"warning: {path}: column '{column}' {said}") == 1, err


@pytest.mark.parametrize("format", sorted(CASES))
def test_a_file_of_only_its_formats_columns_reads_without_a_warning(tmp_path, capsys, format):
    text, column, _ = CASES[format]
    header, row = text.splitlines()
    names = header.split(",")
    keep = [i for i, name in enumerate(names) if name != column]
    path = tmp_path / f"{format}.csv"
    path.write_text(",".join(names[i] for i in keep) + "\n" + ",".join(row.split(",")[i] for i in keep) + "\n")
    assert read_trace(path, format).height == 1
    assert "warning" not in capsys.readouterr().err
