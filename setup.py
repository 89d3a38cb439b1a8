"""setuptools' half of pyproject.toml: the package is built by CMake.

build_ext configures the repository (Release, no tests, no benchmarks) in
build/wheel, or uses the tree DFL_CMAKE_BUILD_DIR names, builds the Python
module and the CLI it carries (targets dfl_python_core and dfl_python_bin),
and copies the package CMake assembled (BUILD/python/demandflight) into the
wheel.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
(ROOT / "build" / "setuptools").mkdir(parents=True, exist_ok=True)  # egg_info's base.


class CMakeBuild(build_ext):
    def run(self):
        given = os.environ.get("DFL_CMAKE_BUILD_DIR")
        tree = Path(given).resolve() if given else ROOT / "build" / "wheel"
        if not given:
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tree), "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", "-DDFL_BUILD_TESTS=OFF",
                            "-DDFL_BUILD_BENCH=OFF", "-DDFL_INSTALL=OFF",
                            f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        jobs = os.environ.get("DFL_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(tree), "-j", jobs, "--target", "dfl_python_core",
                        "dfl_python_bin"], check=True)
        package = tree / "python" / "demandflight"
        if not (package / "__init__.py").exists():
            raise RuntimeError(f"CMake assembled no package in {package}")
        target = Path(self.build_lib) / "demandflight"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))
        os.chmod(target / "_bin" / "demandflight", 0o755)


setup(
    packages=[],
    ext_modules=[Extension("demandflight._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/setuptools"},
             "egg_info": {"egg_base": "build/setuptools"}},
    zip_safe=False,
)
