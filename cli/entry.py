"""The `blackbox` script. The command line needs more than the runtime set the Lambda functions
run on: pyproject.toml's extras (serve for every command, load and bench for theirs). Before it is
imported, the command's extra is checked against what is installed, so a missing one is one line
naming the extra to install rather than a ModuleNotFoundError's traceback."""

from __future__ import annotations

import re
import shlex
import sys

PROJECT = "blackbox"
# the command line itself (cli.main, and the local runtime) imports the serve extra; these commands need more
COMMAND_EXTRAS = {"load": "load", "bench": "bench"}
BASE_EXTRA = "serve"
# a requirement as the installed metadata writes it, `name[extras]>=1.0; extra == "serve"`: the name
# and extras before the `;`, the extra it belongs to after
_REQUIREMENT = re.compile(r"\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["'](?P<extra>[^"']+)["']""")


def _optional() -> dict[str, list[tuple[str, list[str]]]]:
    """Each extra's requirements, from the installed metadata: (distribution, the project's extras it
    names when the distribution is the project itself)."""
    from importlib import metadata  # noqa: PLC0415 - imported within main's try, for Ctrl-C

    by_extra: dict[str, list[tuple[str, list[str]]]] = {}
    for line in metadata.requires(PROJECT) or []:
        spec, _, marker_text = line.partition(";")
        requirement, marker = _REQUIREMENT.match(spec), _EXTRA_MARKER.search(marker_text)
        if requirement and marker:
            extras = [part.strip() for part in (requirement["extras"] or "").split(",") if part.strip()]
            by_extra.setdefault(marker["extra"], []).append((requirement["name"], extras))
    return by_extra


def _installed(name: str) -> bool:
    from importlib import metadata  # noqa: PLC0415 - imported within main's try, for Ctrl-C

    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing(extra: str) -> list[str]:
    """The distributions `extra` needs, with those of the project's extras it names, that are not installed."""
    by_extra, wanted, seen, lacking = _optional(), [extra], set(), set()
    while wanted:
        current = wanted.pop()
        seen.add(current)
        for name, extras in by_extra.get(current, []):
            if name == PROJECT:
                wanted.extend(set(extras) - seen)
            elif not _installed(name):
                lacking.add(name)
    return sorted(lacking)


def command_extra(argv: list[str]) -> tuple[str, str]:
    """The command (its first word that is not an option) and the extra it needs: its help, what
    says what the command is, needs only the command line's."""
    command = next((arg for arg in argv if not arg.startswith("-")), "")
    helped = any(arg in ("-h", "--help") for arg in argv)
    return command, BASE_EXTRA if helped else COMMAND_EXTRAS.get(command, BASE_EXTRA)


def main(argv: list[str] | None = None) -> int:
    try:
        return _checked(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # Ctrl-C in the first moments, while the imports take; later, cli.main's own
        print(f"{PROJECT}: interrupted", file=sys.stderr)
        return 130


def _checked(args: list[str]) -> int:
    """The command, once its extra is known to be installed."""
    command, extra = command_extra(args)
    lacking = missing(extra)
    if lacking:
        from ports.errors import UserError  # noqa: PLC0415 - ports is heavy: imported in main's try, for Ctrl-C

        # this python's pip: a bare `pip` may be another python's, outside the venv the script runs in
        pip = f"{shlex.quote(sys.executable)} -m pip"

        error = UserError(f"{command or 'the command line'} needs the {extra} extra "
                          f"({', '.join(lacking)} not installed)",
                          f"install it from the project's folder: {pip} install -e '.[{extra}]'")
        print(f"{PROJECT}: {error}", file=sys.stderr)
        return 2
    from cli.main import main as run  # noqa: PLC0415 - only once its extra is known to be there

    return run(args)
