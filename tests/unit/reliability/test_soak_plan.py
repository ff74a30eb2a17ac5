"""The soak's plan: a pure function of its settings, so both schedulers meet the same run."""

from dataclasses import replace

from tests.reliability.soak.plan import ARRIVAL_MIX, FAULT_KINDS, Settings, make_plan

SMALL = Settings(minutes=5, rate=20, nodes=60, warmup_s=40, tail_s=60)


def test_the_same_seed_makes_the_same_plan_and_another_seed_another():
    first, second = make_plan(SMALL), make_plan(SMALL)
    assert first.digest == second.digest
    assert first.actions == second.actions and first.faults == second.faults
    assert make_plan(replace(SMALL, seed=SMALL.seed + 1)).digest != first.digest


def test_arrivals_come_at_about_the_rate_from_every_class():
    plan = make_plan(Settings(minutes=10, rate=50, nodes=300))
    arrived = plan.arrivals_by_class()
    assert set(arrived) == set(ARRIVAL_MIX)
    rate = sum(arrived.values()) / plan.settings.seconds
    assert 40 <= rate <= 55, rate
    # The bare pods' share, the largest, is met within a few percent.
    assert abs(arrived["bare"] / plan.settings.seconds - 50 * ARRIVAL_MIX["bare"]) < 1.5


def test_every_bare_pod_is_deleted_after_it_was_created_and_never_twice():
    plan = make_plan(SMALL)
    created = {name: a.at for a in plan.actions if a.kind == "pods" for name in a.args["names"]}
    deleted = [(a.args["name"], a.at) for a in plan.actions if a.kind == "delete"]
    assert len({name for name, _at in deleted}) == len(deleted)
    assert all(name in created and at > created[name] for name, at in deleted)
    assert [a.at for a in plan.actions] == sorted(a.at for a in plan.actions)


def test_every_fault_kind_strikes_inside_the_window_even_in_a_short_run():
    plan = make_plan(SMALL)
    assert {f.kind for f in plan.faults} == set(FAULT_KINDS)
    for fault in plan.faults:
        assert SMALL.warmup_s <= fault.at and fault.at + fault.duration <= SMALL.seconds - SMALL.tail_s + 1e-6, fault
    long_run = make_plan(Settings())
    assert sum(1 for f in long_run.faults if f.kind == "leader_sigkill") == FAULT_KINDS["leader_sigkill"][0]


def test_overlapping_node_faults_never_share_a_node():
    plan = make_plan(Settings(seed=3))
    node_faults = [f for f in plan.faults if "nodes" in f.args]
    for i, a in enumerate(node_faults):
        for b in node_faults[i + 1:]:
            if a.at <= b.end and b.at <= a.end:
                assert not set(a.args["nodes"]) & set(b.args["nodes"]), (a, b)


def test_scaled_objects_stay_within_their_bounds():
    plan = make_plan(SMALL)
    for action in plan.actions:
        if action.kind == "scale":
            assert action.args["replicas"] >= 0
            if action.args["cls"] == "stateful":
                assert action.args["replicas"] <= 5


def test_the_plan_pauses_while_kwok_is_behind_and_goes_on_when_it_has_caught_up(monkeypatch):
    from tests.reliability.soak import workload as workload_module

    monkeypatch.setattr(workload_module, "HOLD_POLL_S", 0.001)
    driver = workload_module.Workload(cluster=None, plan=make_plan(SMALL), scheduler_name="s", kubeconfig="")
    try:
        driver.hold(lambda: 900)  # behind, but not by more than HOLD_ABOVE: no pause
        assert driver.holds == [] and driver.held_s == 0
        backlog = iter([1500, 1200, 600, 300, 240, 5000])
        driver.hold(lambda: next(backlog))
        assert len(driver.holds) == 1 and next(backlog) == 5000  # resumed at 240, below RESUME_BELOW
        assert driver.held_s > 0
    finally:
        driver.close()
