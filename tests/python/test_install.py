"""`pip install --no-build-isolation .` into a fresh venv builds the
extension for the venv's Python and installs a package that loads batches,
with no network (docs/PYTHON.md, "Installing")."""
import os
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
    assert "_imagepack" in listed and "Version: 0.1.0" in listed, listed
