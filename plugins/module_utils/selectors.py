# -*- coding: utf-8 -*-
# Copyright: kubesched maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Local parsing of Kubernetes label selectors, so a malformed one fails before any API call.

The grammar is that of k8s.io/apimachinery/pkg/labels (kubectl's -l): requirements separated
by commas, each one of `key`, `!key`, `key=value`, `key==value`, `key!=value`,
`key in (v1,v2)`, `key notin (v1,v2)`, `key>n` or `key<n`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.kubesched.scheduler.plugins.module_utils.errors import ModuleFailure
from ansible_collections.kubesched.scheduler.plugins.module_utils.validation import (
    label_value_problems,
    qualified_name_problems,
)

_TOKEN_RE = re.compile(r"\s*(?:(?P<op>!=|==|=|!|\(|\)|,|>|<)|(?P<word>[^\s!=(),<>]+))")
_INTEGER_RE = re.compile(r"[-+]?[0-9]+")


class Requirement(object):
    """One parsed selector requirement; operator uses upstream names (In, NotIn, Exists, ...)."""

    def __init__(self, key, operator, values=()):
        self.key = key
        self.operator = operator
        self.values = tuple(values)

    def __eq__(self, other):
        return (self.key, self.operator, self.values) == (other.key, other.operator, other.values)

    def __repr__(self):
        return "Requirement(%r, %r, %r)" % (self.key, self.operator, self.values)


def _tokenize(selector):
    tokens = []
    position = 0
    while position < len(selector):
        if selector[position:].strip() == "":
            break
        match = _TOKEN_RE.match(selector, position)
        if not match:  # pragma: no cover - every character is either an operator or a word
            raise ValueError("unexpected character %r at position %d" % (selector[position], position))
        kind = "op" if match.group("op") else "word"
        tokens.append((kind, match.group(kind), match.start(kind)))
        position = match.end()
    return tokens


class _Parser(object):
    def __init__(self, selector):
        self.tokens = _tokenize(selector)
        self.index = 0

    def peek(self):
        if self.index < len(self.tokens):
            return self.tokens[self.index]
        return ("end", "", None)

    def take(self):
        token = self.peek()
        self.index += 1
        return token

    def expect_word(self, what):
        kind, text, position = self.take()
        if kind != "word":
            raise ValueError("expected %s %s" % (what, _where(text, position)))
        return text

    def parse(self):
        requirements = []
        while True:
            requirements.append(self.requirement())
            kind, text, position = self.take()
            if kind == "end":
                return requirements
            if text != ",":
                raise ValueError("expected ',' or the end of the selector %s" % _where(text, position))

    def requirement(self):
        kind, text, _position = self.peek()
        if text == "!":
            self.take()
            return Requirement(self.expect_word("a label key after '!'"), "DoesNotExist")
        key = self.expect_word("a label key")
        kind, text, position = self.peek()
        if kind == "end" or text == ",":
            return Requirement(key, "Exists")
        self.take()
        if text in ("=", "=="):
            return Requirement(key, "Equals", [self.single_value(text)])
        if text == "!=":
            return Requirement(key, "NotEquals", [self.single_value(text)])
        if text in (">", "<"):
            value = self.expect_word("an integer after '%s'" % text)
            if not _INTEGER_RE.fullmatch(value):
                raise ValueError("'%s %s' needs an integer value, got %r" % (key, text, value))
            return Requirement(key, "Gt" if text == ">" else "Lt", [value])
        if kind == "word" and text in ("in", "notin"):
            return Requirement(key, "In" if text == "in" else "NotIn", self.value_set(text))
        raise ValueError(
            "expected an operator (=, ==, !=, in, notin, >, <) after key %r %s" % (key, _where(text, position))
        )

    def single_value(self, operator):
        kind, text, _position = self.peek()
        if kind == "end" or text == ",":
            return ""
        return self.expect_word("a value after '%s'" % operator)

    def value_set(self, operator):
        kind, text, position = self.take()
        if text != "(":
            raise ValueError("expected '(' after '%s' %s" % (operator, _where(text, position)))
        values = []
        while True:
            kind, text, position = self.take()
            if kind == "word":
                values.append(text)
                kind, text, position = self.take()
            if text == ")":
                break
            if text != ",":
                raise ValueError("expected ',' or ')' in the '%s' value list %s" % (operator, _where(text, position)))
        if not values:
            raise ValueError("the '%s' value list must not be empty" % operator)
        return values


def _where(text, position):
    if position is None:
        return "but the selector ended"
    return "but found %r at position %d" % (text, position)


def parse_label_selector(selector, option="label_selector"):
    """Parse and validate selector; raise ModuleFailure naming option on any problem."""
    if not selector or not selector.strip():
        raise ModuleFailure("%s must not be empty; give e.g. 'node-role.kubernetes.io/worker' or 'color=blue'" % option)
    try:
        requirements = _Parser(selector).parse()
    except ValueError as error:
        raise ModuleFailure(
            "%s %r is malformed: %s. Use kubectl's syntax, e.g. 'color=blue,zone in (a,b),!excluded'"
            % (option, selector, error)
        ) from None
    for requirement in requirements:
        problems = qualified_name_problems(requirement.key)
        if problems:
            raise ModuleFailure("%s %r: label key %r is invalid: %s" % (option, selector, requirement.key, "; ".join(problems)))
        for value in requirement.values:
            problems = label_value_problems(value)
            if problems:
                raise ModuleFailure(
                    "%s %r: value %r for key %r is invalid: %s"
                    % (option, selector, value, requirement.key, "; ".join(problems))
                )
    return requirements
