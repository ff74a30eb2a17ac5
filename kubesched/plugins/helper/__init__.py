"""What several plugins share, one file per concern, as upstream's plugins/helper.

selectors      label selectors (apimachinery's labels package) and well-known label keys
node_affinity  node selector terms, required and preferred node affinity
taint          taint effects and toleration matching
normalize_score  DefaultNormalizeScore
integer        Go's integer division
args           pluginConfig args decoding with errors that name the field
cluster_objects  the namespaces, services and controllers affinity and spreading read
volumes        the claims kubesched does not schedule, and the reason it gives

Selectors are compiled once per pod and matched per node or pod: the matching functions
are hot paths, written for speed.
"""
