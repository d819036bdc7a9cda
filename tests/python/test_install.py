"""`pip install --no-build-isolation .` into a fresh venv installs a
package that loads batches, with no network (docs/PYTHON.md,
"Installing"): the extension of the build folder made for the venv's
interpreter (what ctest runs in, named by IMAGEPACK_BUILD_DIR), else one
built for it in build/wheel-<tag>."""
import filecmp
import glob
import os
import stat
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))


def test_pip_install_into_a_venv_loads_a_batch(jpeg_db, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no build/python: the installed package
    subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps", "-q", ROOT],
                   check=True, env=env, timeout=540)
    code = ("import imagepack, numpy\n"
            "loader = imagepack.Loader(%r, batch_size=4, size=16, as_torch=False)\n"
            "images, labels = next(iter(loader))\n"
            "print(imagepack.__file__, images.shape, images.dtype, len(labels))\n" % jpeg_db)
    out = subprocess.run([py, "-c", code], check=True, env=env, cwd=str(tmp_path), capture_output=True, text=True)
    where, shape = out.stdout.split(" ", 1)
    assert where.startswith(str(venv)), out.stdout  # the venv's copy, not the build tree's
    assert shape.strip() == "(4, 3, 16, 16) uint8 4", out.stdout
    listed = subprocess.run([py, "-m", "pip", "show", "-f", "imagepack"], check=True, env=env, capture_output=True,
                            text=True).stdout
    assert "_imagepack" in listed and "_augment" in listed and "Version: 0.1.0" in listed, listed
    # A venv of the Python the build folder was made for: its extension,
    # byte for byte, not a second build of the library.
    # (ctest names the build folder it runs in, made for /usr/bin/python3,
    # which runs this test and made the venv.)
    build = os.environ.get("IMAGEPACK_BUILD_DIR")
    if build:
        assert backend_answer(py, build) == build
        installed = glob.glob(str(venv / "lib" / "python*" / "site-packages" / "imagepack" / "_imagepack*.so"))
        built = glob.glob(os.path.join(build, "python", "imagepack", "_imagepack*.so"))
        assert len(installed) == 1 and len(built) == 1 and filecmp.cmp(installed[0], built[0], shallow=False)


def backend_answer(py, build):
    """The build folder the backend would pack for `py`, or None."""
    code = "import imagepack_build; print(imagepack_build._reusable_build())"
    env = dict(os.environ, IMAGEPACK_BUILD_DIR=build)
    out = subprocess.run([py, "-c", code], cwd=os.path.join(ROOT, "lib", "python"), env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    return None if out == "None" else out


def test_a_build_for_another_python_is_not_packed(tmp_path):
    build = tmp_path / "build"
    (build / "python" / "imagepack").mkdir(parents=True)
    other = tmp_path / "python3.99"  # answers as another interpreter would
    other.write_text("#!/bin/sh\necho /opt/other '(3, 99, 0)' .cpython-399-x86_64-linux-gnu.so\n")
    other.chmod(other.stat().st_mode | stat.S_IXUSR)
    (build / "CMakeCache.txt").write_text("_Python_EXECUTABLE:INTERNAL=%s\n" % other)
    assert backend_answer(sys.executable, str(build)) is None
    # The same interpreter: packed.
    (build / "CMakeCache.txt").write_text("_Python_EXECUTABLE:INTERNAL=%s\n" % sys.executable)
    assert backend_answer(sys.executable, str(build)) == str(build)
    # No package folder (configured without pybind11): not packed.
    os.rmdir(build / "python" / "imagepack")
    assert backend_answer(sys.executable, str(build)) is None


# A stand-in for the project's CMakeLists.txt, cheap to configure and build:
# the target the backend builds assembles build/python/imagepack from the
# checkout's lib/python/imagepack, with a stand-in for the extension.
STAND_IN_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(imagepack VERSION 0.1.0 LANGUAGES NONE)
set(Python_EXECUTABLE "" CACHE FILEPATH "the Python the package is built for")
set(pkg ${PROJECT_BINARY_DIR}/python/imagepack)
add_custom_target(imagepack_python ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${pkg}
  COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/lib/python/imagepack/__init__.py ${pkg}/
  COMMAND ${CMAKE_COMMAND} -E touch ${pkg}/_imagepack.stand-in.so)
"""


def test_an_install_from_a_copied_built_checkout_installs_the_copy(tmp_path):
    """A checkout copied with its build folders (build/, made for this very
    Python, and the backend's own build/wheel-TAG), whose CMake caches name
    the original's sources: pip install from the copy installs the copy's
    files, saying why it does not pack build/. (The project's CMakeLists.txt
    is replaced by a stand-in that builds in a second: what is tested is the
    backend's choice of build folder, with the backend and pyproject.toml of
    this checkout.)"""
    import shutil
    orig = tmp_path / "orig"
    (orig / "lib" / "python" / "imagepack").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), orig)
    shutil.copy(os.path.join(ROOT, "lib", "python", "imagepack_build.py"), orig / "lib" / "python")
    (orig / "CMakeLists.txt").write_text(STAND_IN_CMAKE)
    (orig / "lib" / "python" / "imagepack" / "__init__.py").write_text("WHERE = 'the original'\n")
    tag = subprocess.run([sys.executable, "-c", "import imagepack_build; print(imagepack_build._tag())"],
                         cwd=str(orig / "lib" / "python"), check=True, capture_output=True, text=True).stdout.strip()
    for build, python in (("build", sys.executable), ("build/wheel-" + tag, sys.executable)):
        subprocess.run(["cmake", "-S", str(orig), "-B", str(orig / build), "-DPython_EXECUTABLE=" + python],
                       check=True, capture_output=True)
        subprocess.run(["cmake", "--build", str(orig / build)], check=True, capture_output=True)
    copy = tmp_path / "copy"
    shutil.copytree(orig, copy, symlinks=True)
    (copy / "lib" / "python" / "imagepack" / "__init__.py").write_text("WHERE = 'the copy'\n")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IMAGEPACK_BUILD_DIR")}
    out = subprocess.run([py, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-index", "--no-deps",
                          str(copy)], env=env, capture_output=True, text=True, timeout=300)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    installed = glob.glob(str(venv / "lib" / "python*" / "site-packages" / "imagepack" / "__init__.py"))
    assert len(installed) == 1, log
    assert open(installed[0]).read() == "WHERE = 'the copy'\n", log
    # Said, naming the original's sources; build/ itself left as it was.
    assert "%s was configured for the sources in %s" % (copy / "build", orig) in log, log
    assert "build/wheel-%s was configured for the sources in %s" % (tag, orig) in log, log
    assert open(copy / "build" / "python" / "imagepack" / "__init__.py").read() == "WHERE = 'the original'\n"
    # The copy's own build folder now names the copy.
    cache = open(copy / "build" / ("wheel-" + tag) / "CMakeCache.txt").read()
    assert "CMAKE_HOME_DIRECTORY:INTERNAL=%s\n" % copy in cache
