"""The Couchbase nodes' user data as CloudFormation's Fn::Sub renders it."""

from __future__ import annotations

import re

from stacks.data import USER_DATA

SCRIPT = USER_DATA.read_text()
# Fn::Sub's syntax: ${Name} is a value, ${!text} stands for a literal ${text}
_SUBSTITUTION = re.compile(r"\$\{(!?)([^}]*)\}")


def placeholders(script: str = SCRIPT) -> set[str]:
    """The names Fn::Sub must be given (or knows: the AWS:: pseudo parameters)."""
    return {name for bang, name in _SUBSTITUTION.findall(script) if not bang}


def render(values: dict[str, str], script: str = SCRIPT) -> str:
    """The script with every name replaced; a name without a value raises KeyError, as
    CloudFormation refuses the template."""
    return _SUBSTITUTION.sub(lambda m: "${" + m[2] + "}" if m[1] else values[m[2]], script)
