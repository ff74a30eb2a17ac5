"""Raising: a test plugin with a bug. It raises in the extension point named by the pod's label
`raise-in` (filter, score, reserve, permit, preBind), so a test can watch kubesched survive it."""


class Raising:
    name = "Raising"

    def __init__(self, args, handle):
        pass

    def _maybe(self, point, pod):
        if pod.labels.get("raise-in") == point:
            raise ZeroDivisionError(f"a bug in {point}")

    def filter(self, state, pod, node_info):
        self._maybe("filter", pod)

    def score(self, state, pod, node_info):
        self._maybe("score", pod)
        return 0

    def reserve(self, state, pod, node_name):
        self._maybe("reserve", pod)

    def unreserve(self, state, pod, node_name):
        pass

    def permit(self, state, pod, node_name):
        self._maybe("permit", pod)

    def pre_bind(self, state, pod, node_name):
        self._maybe("preBind", pod)
