"""The job farm (flows/farm.py): local processes and a Dask cluster give the same results in the
same order; a failing job is named and does not stop the others."""

import os

import distributed
import pytest

from dstar_rtl.flows.farm import JobError, run_jobs


def square_and_pid(x, offset=0):
    return x * x + offset, os.getpid()


def fail_on_three(x):
    if x == 3:
        raise ValueError("three is not allowed")
    return x


def test_local_processes_keep_the_order_and_run_in_parallel():
    lines = []
    out = run_jobs(square_and_pid, [(k, 1) for k in range(8)], jobs=2, progress=lines.append)
    assert [v for v, _ in out] == [k * k + 1 for k in range(8)]
    assert os.getpid() not in {pid for _, pid in out}            # not in this process
    assert len(lines) == 8 and lines[-1].startswith("[8/8]")


def test_a_failing_job_is_named_and_the_others_finish():
    lines = []
    with pytest.raises(JobError, match="1 of 5 jobs failed; first: 3: ValueError: three") as e:
        run_jobs(fail_on_three, range(5), jobs=2, progress=lines.append)
    assert list(e.value.failures) == [3] and len(lines) == 5


def test_jobs_must_be_positive():
    with pytest.raises(ValueError, match="jobs must be a positive integer, not 0"):
        run_jobs(fail_on_three, [1], jobs=0)


def test_dask_cluster_on_loopback_gives_the_local_results():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=None, processes=True) as cluster:
        with distributed.Client(cluster) as client:
            got = run_jobs(square_and_pid, [(k,) for k in range(6)], scheduler=client)
            assert [v for v, _ in got] == [k * k for k in range(6)]
            assert len({pid for _, pid in got} - {os.getpid()}) >= 1
            with pytest.raises(JobError, match="first: 3: ValueError"):
                run_jobs(fail_on_three, range(5), scheduler=cluster.scheduler_address)
