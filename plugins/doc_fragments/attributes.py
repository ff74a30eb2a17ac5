# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

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
