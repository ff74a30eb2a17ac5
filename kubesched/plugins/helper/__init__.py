"""What several plugins share, one file per concern, as upstream's plugins/helper.

normalize_score  DefaultNormalizeScore
integer        Go's integer division
args           pluginConfig args decoding with errors that name the field
cluster_objects  the namespaces, services and controllers affinity and spreading read
volumes        claims and PersistentVolumes: classes, binding, node affinity, matching (component-helpers/storage)
csi_translation  in-tree volume plugins as the CSI drivers they migrated to

Label selectors, node affinity and taints are the API's own rules, shared beyond plugins:
they are in kubesched/api/.
"""
