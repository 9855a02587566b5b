"""`blackbox` names the extra a command lacks, in one line, where pip installed the project without
it: a venv holding this project's installed metadata and code but none of its dependencies."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import types
from importlib import metadata
from pathlib import Path

import pytest

from cli import entry
from cli.entry import missing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    [dist_info] = Path(sysconfig.get_paths()["purelib"]).glob("blackbox-*.dist-info")
    shutil.copytree(dist_info, site / dist_info.name)
    (site / "blackbox.pth").write_text(f"{ROOT}\n")
    return venv / "bin" / "python"


def blackbox(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = "import sys; from cli.entry import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([str(python), "-c", script, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(("args", "extra", "named"), [
    (["serve"], "serve", "uvicorn"),
    (["invoke", "capture-crash", "--event", "events/capture-crash.json"], "serve", "uvicorn"),
    (["--help"], "serve", "rich"),
    (["--debug", "load", "--rate", "5"], "load", "psutil"),
    (["bench", "--quick"], "bench", "matplotlib"),
])
def test_a_command_without_its_extra_names_the_extra_to_install(bare_python: Path, args: list[str], extra: str,
                                                                 named: str):
    result = blackbox(bare_python, *args)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"needs the {extra} extra" in line and named in line, line
    # the pip of the python the script runs on: found from outside, a bare `pip` may be another's
    assert line.endswith(f"{bare_python} -m pip install -e '.[{extra}]'"), line
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_an_extra_counts_the_extras_it_names(bare_python: Path):
    """bench runs serve and load: what those need is missing too."""
    [line] = blackbox(bare_python, "bench").stderr.splitlines()
    assert all(name in line for name in ("redis", "psutil", "uvicorn")), line


def test_with_its_extra_installed_the_command_runs():
    assert missing("dev") == []
    result = subprocess.run([str(Path(sys.executable).parent / "blackbox"), "load", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "--rate" in result.stdout, result.stderr


def test_the_script_checks_the_extra_before_the_command_line_is_imported():
    [script] = metadata.entry_points(group="console_scripts", name="blackbox")
    assert script.value == "cli.entry:main"


def test_a_commands_help_needs_only_the_command_lines_extra(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]):
    """Found by a newcomer: `blackbox load --help` without the load extra asked for it, where the help
    is what says what the command is."""
    monkeypatch.setattr(entry, "missing", lambda extra: ["psutil"] if extra == "load" else [])
    with pytest.raises(SystemExit) as helped:
        entry.main(["load", "--help"])
    assert helped.value.code == 0 and "--rate" in capsys.readouterr().out
    assert entry.main(["load", "--rate", "5"]) == 2  # running it still needs the extra


class _Interrupted(types.ModuleType):
    """The command line's module as Ctrl-C finds it while it is still being imported."""

    def __getattr__(self, name: str) -> object:
        if name == "main":
            raise KeyboardInterrupt
        raise AttributeError(name)


def test_ctrl_c_while_the_command_line_is_imported_exits_130_quietly(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]):
    """Found from outside: Ctrl-C in serve's first 0.3 s printed a KeyboardInterrupt traceback."""
    monkeypatch.setitem(sys.modules, "cli.main", _Interrupted("cli.main"))
    try:
        code = entry.main(["serve"])
    except KeyboardInterrupt:  # not left to stop pytest itself
        pytest.fail("the KeyboardInterrupt came through, and with it its traceback")
    assert code == 130
    assert capsys.readouterr().err == "blackbox: interrupted\n"
