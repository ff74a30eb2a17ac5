"""A pod deleted, or bound by someone else, between kubesched's decision and its bind."""

from tests.reliability import races


def test_races_between_decision_and_bind_leave_no_pod_stuck_and_the_cache_right(cluster, workdir):
    result = races.run(cluster, workdir)
    assert result.passed, "\n".join(f"{c.name}: {c.detail}" for c in result.failures())
    assert result.figures["races_lost_by_kubesched"] > 0
