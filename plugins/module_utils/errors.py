# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

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
