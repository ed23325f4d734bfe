"""The packaging promises: environment.yml and pyproject.toml agree, the README's commands exist."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_lists_the_same_runtime_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(d) for d in project["dependencies"]}
    conda, in_deps = set(), False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if not line.startswith(" ") and line.strip():
            in_deps = line.startswith("dependencies:")
        if line.strip().startswith("- pip:"):
            break  # pip-only test packages (tests/test_cuda_nvrtc.py checks those)
        m = re.match(r"\s*-\s+([A-Za-z0-9_.\-]+)", line)
        if in_deps and m:
            conda.add(_name(m.group(1)))
    conda -= {"python", "pip"}
    assert runtime == conda, f"pyproject only: {runtime - conda}; environment.yml only: {conda - runtime}"


def test_console_script_and_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["gpu-lessons"] == "gpu_lessons.cli:main"
    assert {"test", "gpu"} <= set(project["optional-dependencies"])


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
