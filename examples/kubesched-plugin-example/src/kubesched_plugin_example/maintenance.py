"""Maintenance: a Filter and a Score, enabled by name in a kubesched profile.

Filter: nodes labelled ``<maintenanceLabel>=true`` take no new pods (unless the pod tolerates
maintenance with the same label set to "true" in its own labels).
Score: nodes are preferred by the integer value (0-100) of their ``<preferenceLabel>`` label.

    pluginConfig:
    - name: Maintenance
      args: {maintenanceLabel: example.com/maintenance, preferenceLabel: example.com/preference}
"""

from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, PluginArgsError, Status

REASON = "node(s) were in maintenance"


class Maintenance:
    name = "Maintenance"  # must equal the entry point's name

    def __init__(self, args, handle):
        args = dict(args or {})
        self.maintenance_label = args.pop("maintenanceLabel", "example.com/maintenance")
        self.preference_label = args.pop("preferenceLabel", "example.com/preference")
        if args:  # a misspelt argument is an error, as kube-scheduler's strict decoding makes it
            raise PluginArgsError(sorted(args)[0], "unknown field; known: maintenanceLabel, preferenceLabel")
        for field, value in (("maintenanceLabel", self.maintenance_label),
                             ("preferenceLabel", self.preference_label)):
            if not isinstance(value, str) or not value:
                raise PluginArgsError(field, f"must be a non-empty label key, got {value!r}")
        # The unschedulable status is shared: plugins return the same instance for every node.
        self.in_maintenance = Status(Code.UNSCHEDULABLE, REASON)

    def filter(self, state, pod, node_info):
        if node_info.labels.get(self.maintenance_label) == "true" and \
                pod.labels.get(self.maintenance_label) != "true":
            return self.in_maintenance
        return None

    def score(self, state, pod, node_info):
        try:
            return max(0, min(100, int(node_info.labels.get(self.preference_label, "0"))))
        except ValueError:
            return 0

    def events_to_register(self):
        # A pod this plugin rejected may fit once a node's labels change or a node joins.
        return [ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]
