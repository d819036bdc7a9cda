#!/usr/bin/env bash
# Installs every Debian package imagepack needs to build, test, run the demo
# and the benchmarks, then the npm packages the parquet tests run with node
# (tests/python/npm_packages.txt) into build/npm (git-ignored). Idempotent:
# packages already present are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config ninja-build git
  clang libclang-rt-14-dev procps util-linux e2fsprogs
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev libvips-dev liblmdb-dev lmdb-utils
  libtbb-dev libboost-program-options-dev libgtest-dev libgmock-dev
  libbenchmark-dev nlohmann-json3-dev libxxhash-dev
  libtorch-dev libgloo-dev pybind11-dev python3-dev python3-pytest
  python3 python3-numpy python3-lmdb python3-xxhash python3-pil python3-opencv
  python3-torch python3-torchvision python3-matplotlib python3-venv python3-pip
  libvips-tools libjpeg-turbo-progs imagemagick time fonts-dejavu-core
  dataset-fashion-mnist plasma-workspace-wallpapers mate-backgrounds
  libcurl4-openssl-dev curl python3-boto3 s3fs iproute2 uuid-runtime
  python3-protobuf python3-crc32c libsnappy-dev libzstd-dev liblz4-dev
  ceph-mon ceph-osd radosgw ceph-common
  nginx openssl
  slurm-wlm munge
)
# node and npm (the parquet tests' writers, DuckDB and arrow-rs): Debian's,
# unless a node with its npm is there already (NodeSource's nodejs bundles
# npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# The npm packages, at their versions, into build/npm/node_modules (where
# tests/python/conftest.py looks). Needs the npm registry; without it the
# parquet tests say so (and fail where IMAGEPACK_REQUIRE_DUCKDB=1, as
# scripts/test.sh sets), but the demo and the build do not need them.
mapfile -t npm_packages < <(grep -v '^#' tests/python/npm_packages.txt | grep .)
npm_missing=()
for spec in "${npm_packages[@]}"; do
  have=$(node -p "require('./build/npm/node_modules/${spec%@*}/package.json').version" 2>/dev/null || true)
  [ "$have" = "${spec##*@}" ] || npm_missing+=("$spec")
done
if [ ${#npm_missing[@]} -eq 0 ]; then
  echo "setup: npm packages present (build/npm)"
elif mkdir -p build/npm && npm install --prefix build/npm --no-audit --no-fund --loglevel=error \
       "${npm_packages[@]}" >/dev/null; then
  echo "setup: npm packages installed into build/npm: ${npm_packages[*]}"
else
  echo "setup: warning: npm install ${npm_packages[*]} failed: the parquet tests cannot run" >&2
fi
