#!/bin/sh
# Installs the Debian packages plena needs (when run as root and something is
# missing). Used by `make demo` and `make test`; safe to run repeatedly.
set -eu
PKGS="cmake ninja-build gcc clang libjansson-dev libcmocka-dev pkg-config libopenmpi-dev openmpi-bin libopenblas-dev libclang-rt-14-dev bc make time zlib1g-dev chromium fonts-dejavu-core"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "setup: missing Debian packages:$missing" >&2
    echo "setup: run as root (or: sudo apt-get install$missing)" >&2
    exit 1
fi
echo "setup: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
