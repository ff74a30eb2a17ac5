"""In-tree scheduling plugins, one per file, named as kube-scheduler names them.

names.py lists the plugins and the v1 default profile by name; registry.REGISTRY maps each
name to its class. helper/ holds what several plugins share, one file per concern. Each plugin implements only the extension points upstream's does.
"""
