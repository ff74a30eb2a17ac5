"""Out-of-tree plugins: classes from any installed distribution, registered under the
``kubesched.plugins`` entry point group (what kube-scheduler offers only through a rebuild).

A distribution declares, in its pyproject.toml::

    [project.entry-points."kubesched.plugins"]
    MyPlugin = "my_package.plugin:MyPlugin"

and a profile enables ``MyPlugin`` by name, with its ``pluginConfig`` args, like an in-tree
plugin. Each out-of-tree plugin runs behind a guard: an exception in any extension point
becomes that pod's error status, logged with the plugin's name, never a crashed scheduler
or a lost pod (see docs/plugins.md).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from kubesched import klog
from kubesched.config.entrypoints import describe, entry_points
from kubesched.framework.interface import ActionType, ClusterEvent, Code, EventResource, Status


class PluginLoadError(RuntimeError):
    """An installed entry point that cannot give a plugin class."""


def _broken(name: str, message: str) -> type:
    """A registry entry for an entry point that failed to load: the error surfaces only when
    a profile enables it, so one broken package does not stop profiles that never use it."""

    def init(self: Any, args: Any, handle: Any) -> None:
        raise PluginLoadError(message)

    return type(name, (), {"name": name, "__init__": init, "load_error": message})


def load_out_of_tree_plugins(in_tree: dict[str, type]) -> dict[str, type]:
    """Entry point name -> guarded plugin class."""
    plugins: dict[str, type] = {}
    for ep in entry_points():
        name = ep.name
        if name in in_tree:
            # The in-tree plugin keeps its name: a package cannot replace it unnoticed.
            klog.warning("Ignoring an out-of-tree plugin named as an in-tree one; rename its entry point",
                         entryPoint=describe(ep))
            continue
        try:
            cls = ep.load()
        except Exception as err:  # noqa: BLE001 - any import failure is reported when the plugin is enabled
            plugins[name] = _broken(name, f"entry point {describe(ep)} cannot be imported: "
                                          f"{type(err).__name__}: {err}")
            continue
        if not isinstance(cls, type):
            plugins[name] = _broken(name, f"entry point {describe(ep)} is not a class")
            continue
        own_name = getattr(cls, "name", None)
        if own_name != name:
            plugins[name] = _broken(name, f"entry point {describe(ep)} names class {cls.__name__} whose name "
                                          f"attribute is {own_name!r}; set name = {name!r} on the class")
            continue
        plugins[name] = guarded(cls)
    return plugins


_registry: dict[str, type] | None = None  # the out-of-tree part, loaded once per process
_registry_lock = threading.Lock()


def full_registry() -> dict[str, type]:
    """In-tree plugins plus every installed out-of-tree plugin (entry points load once)."""
    global _registry
    from kubesched.plugins.registry import REGISTRY

    with _registry_lock:
        if _registry is None:
            _registry = load_out_of_tree_plugins(REGISTRY)
        return {**REGISTRY, **_registry}


# ---------------------------------------------------------------------------------------------
# The guard
# ---------------------------------------------------------------------------------------------

# Extension points returning a Status (or None): an exception becomes an error status.
_STATUS_METHODS = ("pre_enqueue", "filter", "pre_score", "reserve", "permit", "pre_bind", "bind",
                   "normalize_score")
# Extension points whose result is not a Status.
_OTHER_METHODS = ("less", "pre_filter", "post_filter", "score", "score_nodes", "filter_nodes", "unreserve",
                  "post_bind", "events_to_register", "pre_filter_extensions", "normalize_scores", "sign_pod")


class PluginError(RuntimeError):
    """An out-of-tree plugin raised; the message names the plugin and the extension point."""


class _Reporter:
    """Logs a plugin's failure once per extension point and scheduling attempt (one cycle
    state), not once per node."""

    def __init__(self, plugin: str):
        self.plugin = plugin
        self.last: tuple[str, str, int] | None = None

    def __call__(self, point: str, pod: Any, err: BaseException, state: Any = None) -> str:
        message = f'plugin "{self.plugin}" failed in {point}: {type(err).__name__}: {err}'
        key = (point, getattr(pod, "uid", ""), id(state))
        if key != self.last:
            self.last = key
            klog.error("Out-of-tree plugin raised", plugin=self.plugin, extensionPoint=point,
                       pod=getattr(pod, "key", ""), err=f"{type(err).__name__}: {err}")
        return message


def _status_or_error(point: str, result: Any, plugin: str) -> Any:
    if result is None or isinstance(result, Status):
        return result
    if point == "permit" and isinstance(result, tuple) and len(result) == 2 and \
            (result[0] is None or isinstance(result[0], Status)):
        return result
    return Status(Code.ERROR, f'plugin "{plugin}" returned {type(result).__name__} from {point}; want a Status '
                              f"or None", plugin=plugin)


def _wrap(point: str, method: Callable[..., Any], report: _Reporter, plugin: str) -> Callable[..., Any]:
    def pod_of(args: tuple) -> Any:
        return next((a for a in args if hasattr(a, "uid") and hasattr(a, "key")), None)

    if point in _STATUS_METHODS:
        def call(*args: Any) -> Any:
            try:
                return _status_or_error(point, method(*args), plugin)
            except Exception as err:  # noqa: BLE001 - a plugin bug fails this pod, not the scheduler
                return Status(Code.ERROR, report(point, pod_of(args), err, args[0] if args else None), plugin=plugin, error=err)
        return call
    if point == "pre_filter":
        def pre_filter(*args: Any) -> Any:
            try:
                return method(*args)
            except Exception as err:  # noqa: BLE001
                return None, Status(Code.ERROR, report(point, pod_of(args), err, args[0] if args else None), plugin=plugin, error=err)
        return pre_filter
    if point == "post_filter":
        def post_filter(*args: Any) -> Any:
            try:
                return method(*args)
            except Exception as err:  # noqa: BLE001
                return None, Status(Code.ERROR, report(point, pod_of(args), err, args[0] if args else None), plugin=plugin, error=err)
        return post_filter
    if point == "filter_nodes":
        def filter_nodes(state: Any, pod: Any, nodes: list) -> Any:
            try:
                return method(state, pod, nodes)
            except Exception as err:  # noqa: BLE001
                failed = Status(Code.ERROR, report(point, pod, err, state), plugin=plugin, error=err)
                return [failed] * len(nodes)
        return filter_nodes
    if point in ("unreserve", "post_bind"):
        def notify(*args: Any) -> None:
            try:
                method(*args)
            except Exception as err:  # noqa: BLE001 - nothing to fail any more; say so
                report(point, pod_of(args), err, args[0] if args else None)
        return notify
    if point == "less":
        def less(a: Any, b: Any) -> bool:
            try:
                return bool(method(a, b))
            except Exception as err:  # noqa: BLE001 - the queue must stay ordered somehow
                report(point, a, err)
                return False
        return less
    if point == "events_to_register":
        def events_to_register() -> list:
            try:
                return list(method())
            except Exception as err:  # noqa: BLE001 - then any event may help the pods it rejected
                report(point, None, err)
                return [ClusterEvent(EventResource.WILDCARD, ActionType.ALL)]
        return events_to_register
    if point == "sign_pod":
        def sign_pod(pod: Any) -> Any:
            try:
                return method(pod)
            except Exception as err:  # noqa: BLE001 - then the pod is not batched
                report(point, pod, err)
                return None
        return sign_pod
    if point == "pre_filter_extensions":
        def pre_filter_extensions() -> Any:
            try:
                ext = method()
            except Exception as err:  # noqa: BLE001
                report(point, None, err)
                return None
            return _GuardedExtensions(ext, report, plugin) if ext is not None else None
        return pre_filter_extensions

    def call_or_raise(*args: Any) -> Any:  # score, score_nodes, normalize_scores: the runtime reports them
        try:
            return method(*args)
        except Exception as err:  # noqa: BLE001
            raise PluginError(report(point, pod_of(args), err, args[0] if args else None)) from err
    return call_or_raise


class _GuardedExtensions:
    def __init__(self, ext: Any, report: _Reporter, plugin: str):
        self.add_pod = _wrap("add_pod", ext.add_pod, report, plugin)
        self.remove_pod = _wrap("remove_pod", ext.remove_pod, report, plugin)


_STATUS_METHODS += ("add_pod", "remove_pod")  # PreFilterExtensions return statuses too


def guarded(cls: type) -> type:
    """A class with cls's extension points, each behind the guard. It defines exactly the
    methods cls defines, since the framework reads a plugin's extension points from them."""
    name = cls.name

    def init(self: Any, args: Any, handle: Any) -> None:
        self.plugin = cls(args, handle)
        report = _Reporter(name)
        for point in _STATUS_METHODS + _OTHER_METHODS:
            method = getattr(self.plugin, point, None)
            if method is not None and point not in ("add_pod", "remove_pod"):
                setattr(self, point, _wrap(point, method, report, name))

    def getattr_(self: Any, attr: str) -> Any:  # anything else (helpers, state) from the plugin itself
        if attr == "plugin":
            raise AttributeError(attr)
        return getattr(self.plugin, attr)

    namespace: dict[str, Any] = {"name": name, "__init__": init, "__getattr__": getattr_, "out_of_tree": True,
                                 "__doc__": cls.__doc__, "__module__": cls.__module__}
    # Class-level placeholders so hasattr(class, point) answers as for cls (config reads `less`).
    for point in _STATUS_METHODS + _OTHER_METHODS:
        if hasattr(cls, point):
            namespace[point] = getattr(cls, point)
    return type(cls.__name__, (), namespace)
