# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The one exception type modules turn into fail_json."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleFailure(Exception):
    """A failure whose message is complete for the user: it names the option and what to fix.

    `details` are extra return values (for example the node that could not be written).
    """

    def __init__(self, message, **details):
        super(ModuleFailure, self).__init__(message)
        self.message = message
        self.details = details

    def __str__(self):
        return self.message
