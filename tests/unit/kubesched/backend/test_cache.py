"""The scheduler cache: incremental aggregates, assume/forget, cheap snapshots, zone order."""

from kubesched_fakes import node_raw, pod

from kubesched.backend.cache import SchedulerCache
from kubesched.framework.snapshot import NodeMemos, Snapshot


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_aggregates_follow_pod_add_update_delete():
    cache = SchedulerCache()
    cache.add_node(node_raw("n1"))
    a = pod("a", node="n1", cpu="500m")
    cache.add_pod(a)
    cache.add_pod(pod("b", node="n1", cpu="250m"))
    assert cache.nodes["n1"].requested.milli_cpu == 750
    cache.update_pod(pod("a", node="n1", cpu="100m", uid=a.uid))
    assert cache.nodes["n1"].requested.milli_cpu == 350
    cache.remove_pod(a)
    assert cache.nodes["n1"].requested.milli_cpu == 250
    assert len(cache.nodes["n1"].pods) == 1


def test_assume_then_confirm_counts_once():
    cache = SchedulerCache()
    cache.add_node(node_raw("n1"))
    p = pod("p", cpu="1")
    assumed = cache.assume_pod(p, "n1")
    assert assumed.node_name == "n1" and p.node_name == ""
    assert cache.nodes["n1"].requested.milli_cpu == 1000 and cache.is_assumed(p.uid)
    cache.finish_binding(assumed)
    cache.add_pod(pod("p", node="n1", cpu="1", uid=p.uid))  # the watch confirms the binding
    assert cache.nodes["n1"].requested.milli_cpu == 1000
    assert not cache.is_assumed(p.uid)


def test_forget_releases_the_node():
    cache = SchedulerCache()
    cache.add_node(node_raw("n1"))
    p = pod("p", cpu="1")
    assumed = cache.assume_pod(p, "n1")
    cache.forget_pod(assumed)
    assert cache.nodes["n1"].requested.milli_cpu == 0 and not cache.is_assumed(p.uid)


def test_assumed_pod_expires_after_binding_without_confirmation():
    clock = Clock()
    cache = SchedulerCache(assumed_ttl=30, clock=clock)
    cache.add_node(node_raw("n1"))
    assumed = cache.assume_pod(pod("p", cpu="1"), "n1")
    clock.now = 100
    assert cache.cleanup_expired_assumed_pods() == []  # binding not finished: never expires
    cache.finish_binding(assumed)
    clock.now = 120
    assert cache.cleanup_expired_assumed_pods() == []
    clock.now = 131
    assert [p.name for p in cache.cleanup_expired_assumed_pods()] == ["p"]
    assert cache.nodes["n1"].requested.milli_cpu == 0


def test_assumed_pod_never_expires_by_default_once_bound():
    # kube-scheduler's durationToExpireAssumedPod is 0: a bound pod stays counted until the
    # informer confirms or deletes it, however long that takes.
    clock = Clock()
    cache = SchedulerCache(clock=clock)
    cache.add_node(node_raw("n1"))
    assumed = cache.assume_pod(pod("p", cpu="1"), "n1")
    cache.finish_binding(assumed)
    clock.now = 10 * 24 * 3600
    assert cache.cleanup_expired_assumed_pods() == []
    assert cache.is_assumed(assumed.uid) and cache.nodes["n1"].requested.milli_cpu == 1000


def synced(nodes: int) -> tuple[SchedulerCache, Snapshot]:
    """A cache with nodes n0.. and a snapshot brought up to date with it."""
    cache = SchedulerCache()
    for i in range(nodes):
        cache.add_node(node_raw(f"n{i}"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    return cache, snap


def test_snapshot_clones_only_changed_nodes():
    cache, snap = synced(4)
    before = {n.name: n for n in snap.node_info_list}
    cache.add_pod(pod("p", node="n2", cpu="1"))
    cache.update_snapshot(snap)
    after = {n.name: n for n in snap.node_info_list}
    assert [name for name in after if after[name] is not before[name]] == ["n2"]
    assert after["n2"].requested.milli_cpu == 1000 and before["n2"].requested.milli_cpu == 0
    assert snap.node_info_list[after["n2"].index] is after["n2"]
    # The snapshot is a copy: later cache changes do not leak into it until the next update.
    cache.add_pod(pod("q", node="n2", cpu="1"))
    assert after["n2"].requested.milli_cpu == 1000


def test_node_removal_and_pods_on_unknown_nodes():
    cache = SchedulerCache()
    cache.add_pod(pod("early", node="later", cpu="1"))  # pod seen before its node
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert snap.num_nodes() == 0
    cache.add_node(node_raw("later"))
    cache.update_snapshot(snap)
    assert snap.get("later").requested.milli_cpu == 1000
    cache.remove_node("later")
    cache.update_snapshot(snap)
    assert snap.num_nodes() == 0


def test_snapshot_interleaves_zones_like_upstream_node_tree():
    cache = SchedulerCache()
    for name, zone in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")):
        cache.add_node(node_raw(name, zone=zone))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert [n.name for n in snap.node_info_list] == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_affinity_lists_follow_incremental_updates():
    cache = SchedulerCache()
    cache.add_node(node_raw("n1"))
    cache.add_node(node_raw("n2"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    anti = pod("anti", node="n2")
    anti.has_affinity = anti.has_required_anti_affinity = True
    cache.add_pod(anti)
    cache.update_snapshot(snap)
    assert [n.name for n in snap.have_pods_with_required_anti_affinity_node_info_list] == ["n2"]
    cache.remove_pod(anti)
    cache.update_snapshot(snap)
    assert snap.have_pods_with_affinity_node_info_list == []


def test_image_counts_are_refreshed_only_when_an_image_list_changes():
    cache = SchedulerCache()
    raw = node_raw("n1")
    raw["status"]["images"] = [{"names": ["nginx:1"], "sizeBytes": 100}]
    cache.add_node(raw)
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert snap.get("n1").image_states["nginx:1"].num_nodes == 1
    heartbeat = node_raw("n1", rv="2")
    heartbeat["status"]["images"] = [{"names": ["nginx:1"], "sizeBytes": 100}]
    cache.update_node(heartbeat)
    assert not cache.images_changed
    cache.add_node({**node_raw("n2"), "status": {**node_raw("n2")["status"],
                                                 "images": [{"names": ["nginx:1"], "sizeBytes": 100}]}})
    cache.update_snapshot(snap)
    assert snap.get("n1").image_states["nginx:1"].num_nodes == 2


def test_node_memos_hold_while_the_node_set_does_and_let_go_of_a_deleted_node():
    cache, snap = synced(3)
    memos = NodeMemos(max_keys=2)
    table = memos.table(snap, "selector-a")
    for node in snap.node_info_list:
        table[node.name] = (node.generation, "counted")
    cache.add_pod(pod("p", node="n1", cpu="1"))  # one node's pods change: the node set holds
    cache.update_snapshot(snap)
    assert memos.table(snap, "selector-a") is table and set(table) == {"n0", "n1", "n2"}
    assert table["n1"][0] != snap.get("n1").generation  # stale: its user recounts it
    assert table["n0"][0] == snap.get("n0").generation  # a new clone of an unchanged node: still good
    cache.remove_node("n2")
    cache.update_snapshot(snap)
    assert memos.table(snap, "selector-a") == {}  # the node set is rebuilt; n2's entry is let go
    assert memos.table(Snapshot(), "selector-a") == {}  # another snapshot starts afresh


def test_every_change_to_a_node_takes_a_generation_no_other_node_info_has():
    cache, snap = synced(2)
    seen = {snap.get("n0").generation, snap.get("n1").generation}
    assert len(seen) == 2  # two nodes in the same state number: two generations
    cache.add_pod(pod("p", node="n0", cpu="1"))
    cache.remove_node("n1")
    cache.add_node(node_raw("n1"))  # deleted and made again: a new NodeInfo in its first state
    cache.update_snapshot(snap)
    assert snap.get("n0").generation not in seen and snap.get("n1").generation not in seen
    assert snap.get("n0").clone().generation == snap.get("n0").generation  # a clone is the same state


def test_node_memos_keep_at_most_max_keys_tables_dropping_the_oldest():
    snap = Snapshot()
    memos = NodeMemos(max_keys=2)
    memos.table(snap, "a")["n"] = ("a",)
    memos.table(snap, "b")["n"] = ("b",)
    memos.table(snap, "c")["n"] = ("c",)
    assert list(memos.tables) == ["b", "c"]
    assert memos.table(snap, "a") == {}
