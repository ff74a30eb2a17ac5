"""In-tree scheduling plugins, one per file, named as kube-scheduler names them.

registry.REGISTRY maps every plugin name to its class and registry.DEFAULT_PLUGINS is the
v1 default profile. Each plugin implements only the extension points upstream's does.
"""
