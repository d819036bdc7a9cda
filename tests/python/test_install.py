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
