#!/usr/bin/env bash
# Installs every Debian package imagepack needs to build, test, run the demo
# and the benchmarks. Idempotent: packages already present are not reinstalled.
set -euo pipefail

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

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
