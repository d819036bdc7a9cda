"""PEP 517 build backend for `pip install --no-build-isolation .`: builds
the extension with CMake for the Python that runs pip (a venv's, a conda
environment's, Debian's) and packs it with the package's Python files
into a wheel. No network and no build dependencies beyond what the
project's own build needs (cmake, a compiler, pybind11, the libraries
scripts/setup.sh installs). When scripts/build.sh's build folder was made
for this same interpreter (a venv of Debian's python3, say) and for these
sources, its extension is brought up to date and packed; otherwise the
library and extension are built in build/wheel-<tag> in the source tree,
kept between installs. A build folder configured for other sources (a
checkout copied with its build/, whose CMake cache names the original's
sources) is never packed or reused: its build would install the
original's files."""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "imagepack"


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(imagepack VERSION ([0-9.]+)", f.read()).group(1)


def _tag():
    py = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (py, py, plat)


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Prepare image datasets for deep learning; fast augmented batches from LMDB or blob files\n"
            "Requires-Python: >=3.8\nRequires-Dist: numpy\n" % (NAME, _version()))


def _dist_info():
    return "%s-%s.dist-info" % (NAME, _version())


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    path = os.path.join(metadata_directory, _dist_info())
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w") as f:
        f.write(_metadata())
    return _dist_info()


_SAME_PYTHON = ("import sys, sysconfig; "
                "print(sys.base_prefix, sys.version_info[:3], sysconfig.get_config_var('EXT_SUFFIX'))")


def _cache_entry(build, *names):
    """The value of the first of `names` in a CMake build folder's
    CMakeCache.txt, or None."""
    found = {}
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                name = line.split(":", 1)[0]
                if name in names and "=" in line and name not in found:
                    found[name] = line.split("=", 1)[1].strip()
    except OSError:
        pass
    return next((found[n] for n in names if n in found), None)


def _cached_python(build):
    """The Python a CMake build folder was configured for, or None."""
    return _cache_entry(build, "Python_EXECUTABLE", "_Python_EXECUTABLE")


def _same_path(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _other_sources(build):
    """The source folder a CMake build folder was configured for when it is
    not this checkout (ROOT), else None (this checkout's, or no cache). A
    copied or moved checkout keeps its build folders, whose caches (and
    build rules) still name the original's sources: building there builds
    those."""
    source = _cache_entry(build, "CMAKE_HOME_DIRECTORY", "imagepack_SOURCE_DIR")
    return source if source and not _same_path(source, ROOT) else None


def _reusable_build():
    """The project's own build folder (scripts/build.sh's: $IMAGEPACK_BUILD_DIR,
    else build/) when its package was built for this same interpreter: the
    same installation (a venv's base, or the Python itself), version and
    extension suffix. Its extension is then the one this Python loads, so
    the wheel packs it instead of building the library again."""
    build = os.path.join(ROOT, os.environ.get("IMAGEPACK_BUILD_DIR", "build"))
    exe = _cached_python(build)
    if not exe or not os.path.isdir(os.path.join(build, "python", NAME)):
        return None
    other = _other_sources(build)
    if other:
        print("imagepack: %s was configured for the sources in %s, not these (%s; a copied or moved checkout?): "
              "not packed (its build would install those); building afresh in %s. To use this checkout's own "
              "build folder, remove %s and run scripts/build.sh." % (build, other, ROOT, _wheel_build(), build),
              file=sys.stderr)
        return None
    try:
        theirs = subprocess.run([exe, "-c", _SAME_PYTHON], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    mine = subprocess.run([sys.executable, "-c", _SAME_PYTHON], capture_output=True, text=True, timeout=60).stdout
    return build if theirs and theirs == mine else None


def _wheel_build():
    """This backend's own build folder for this Python."""
    return os.path.join(ROOT, "build", "wheel-" + _tag())


def _build():
    """The package folder (the extension and the .py files) built by CMake
    for sys.executable."""
    reuse = _reusable_build()
    if reuse:
        # Brought up to date with the sources first (a no-op right after
        # scripts/build.sh).
        print("imagepack: packing the extension of %s (built for this Python)" % reuse, file=sys.stderr)
        subprocess.check_call(["cmake", "--build", reuse, "--target", "imagepack_python", "-j",
                               str(os.cpu_count() or 1)], stdout=sys.stderr)
        return os.path.join(reuse, "python", NAME)
    build = _wheel_build()
    other = _other_sources(build)
    if other:  # this backend's own folder, copied with a checkout: of no use here
        print("imagepack: %s was configured for the sources in %s, not these (%s): removed, building afresh"
              % (build, other, ROOT), file=sys.stderr)
        shutil.rmtree(build)
    gen = ["-G", "Ninja"] if shutil.which("ninja") and not os.path.exists(os.path.join(build, "Makefile")) else []
    subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                           "-DPython_EXECUTABLE=" + sys.executable, "-DIMAGEPACK_BUILD_TESTS=OFF",
                           "-DIMAGEPACK_BUILD_TRAINER=OFF", "-DIMAGEPACK_BUILD_BENCH=OFF"] + gen,
                          stdout=sys.stderr)
    subprocess.check_call(["cmake", "--build", build, "--target", "imagepack_python", "-j", str(os.cpu_count() or 1)],
                          stdout=sys.stderr)
    pkg = os.path.join(build, "python", NAME)
    if not any(f.startswith("_imagepack") for f in os.listdir(pkg)):
        raise RuntimeError("the extension was not built (is pybind11-dev installed? scripts/setup.sh installs it)")
    return pkg


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    pkg = _build()
    wheel_name = "%s-%s-%s.whl" % (NAME, _version(), _tag())
    records = []

    def add(zf, arcname, data):
        zf.writestr(arcname, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py") or name.startswith(("_imagepack", "_augment")):
                with open(os.path.join(pkg, name), "rb") as f:
                    add(zf, "%s/%s" % (NAME, name), f.read())
        for sub in sorted(os.listdir(pkg)):  # the subpackages (imagepack/train/): their .py files
            if os.path.isfile(os.path.join(pkg, sub, "__init__.py")):
                for name in sorted(n for n in os.listdir(os.path.join(pkg, sub)) if n.endswith(".py")):
                    with open(os.path.join(pkg, sub, name), "rb") as f:
                        add(zf, "%s/%s/%s" % (NAME, sub, name), f.read())
        info = _dist_info()
        add(zf, info + "/METADATA", _metadata().encode())
        add(zf, info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: imagepack_build\nRoot-Is-Purelib: false\n"
                                  "Tag: %s\n" % _tag()).encode())
        records.append(info + "/RECORD,,")
        zf.writestr(info + "/RECORD", "\n".join(records) + "\n")
    return wheel_name
