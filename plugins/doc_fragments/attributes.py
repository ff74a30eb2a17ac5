# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Attributes every module of this collection has."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the changed status it would have had, without changing anything.
    support: full
    details:
      - Every write is sent to the API server as a server-side dry run, so check mode reports what the server
        would store, and fails where the real run would fail (for example on missing RBAC permissions).
  diff_mode:
    description: Returns a before and after view of every object it targets, in check mode too.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: kubernetes
"""
