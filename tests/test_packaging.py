"""The packaging promises: environment.yml and pyproject.toml agree, the README's commands exist."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _environment_yml() -> tuple[set[str], set[str]]:
    """Package names in environment.yml: conda-forge's, and those its ``pip:`` section installs
    (packages conda-forge does not have)."""
    conda, pip, in_deps, in_pip = set(), set(), False, False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if not line.startswith(" ") and line.strip():
            in_deps = line.startswith("dependencies:")
        if re.match(r"\s*-\s+pip:", line):
            in_pip = True
            continue
        m = re.match(r"(\s*)-\s+([A-Za-z0-9_.\-]+)", line)
        if in_deps and m:
            if in_pip and len(m.group(1)) <= 2:       # back at the top level of dependencies
                in_pip = False
            (pip if in_pip else conda).add(_name(m.group(2)))
    return conda - {"python", "pip"}, pip


def test_environment_yml_lists_the_same_runtime_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    # Binder builds the book too, so the book extra is in environment.yml with the runtime
    wanted = {_name(d) for d in project["dependencies"]} | {_name(d) for d in extras["book"]}
    conda, pip = _environment_yml()
    listed = conda | pip
    assert wanted <= listed, f"pyproject only: {wanted - listed}"
    assert conda <= wanted, f"environment.yml only: {conda - wanted}"
    every_extra = {_name(d) for deps in extras.values() for d in deps}
    assert pip <= wanted | every_extra, f"pip section only: {pip - wanted - every_extra}"


def test_console_script_and_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["gpu-lessons"] == "gpu_lessons.cli:main"
    assert {"test", "gpu", "book"} <= set(project["optional-dependencies"])


def test_binder_installs_the_package():
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install" in post and "-e ." in post


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "python3 course.py start" in readme
    assert "python3 course.py test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 course.py test" in ci


def test_every_runtime_dependency_is_explained_in_the_readme():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (ROOT / "README.md").read_text().lower().replace("_", "-")
    deps = [_name(d) for d in project["dependencies"]]
    deps += [_name(d) for d in project["optional-dependencies"]["test"]]
    missing = [d for d in deps if d not in readme]
    assert not missing, f"README's dependency table does not mention {missing}"
