"""The soak (`make soak`, docs/reliability.md): three scheduler instances with leader election on
a private lab, a steady mixed arrival of pods, and a seeded schedule of overlapping faults; the
same plan for kubesched and for the pinned kube-scheduler.

    plan.py          the seed -> every arrival and every fault, before anything starts
    workload.py      the objects set up first, and the driver that carries out the arrivals
    schedulers.py    the three instances (host processes with the role's flags) and their supervisor
    faults.py        the fault driver, and the extender it makes misbehave
    certificates.py  the serving pair and the client CA bundle, and their rotation
    ledger.py        the invariants checked all through the run, from the API's own objects
    processes.py     RSS, threads and open files of each instance, and whether they stayed flat
    cache_check.py   each cache (upstream's SIGUSR2 dump) against the API's view
    run.py           one run of one scheduler, and its verdicts
    results.py       tests/reliability/results/soak.json, its plot and its section of the docs

The 5-minute smoke in `make test` is tests/integration/reliability/test_soak.py.
"""
