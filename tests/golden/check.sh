#!/bin/sh
# CTest `golden_outputs`: records every case of record.sh with PLENA_BIN and
# compares it byte for byte with tests/golden/expected. A difference is a
# behaviour change: fix it, or (when deliberate) run `make golden` and say so
# in the commit.
#   tests/golden/check.sh PLENA_BIN
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/plena_golden_check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
sh "$SRC/tests/golden/record.sh" "$1" "$TMP/got"
if diff -r -u "$SRC/tests/golden/expected" "$TMP/got" >"$TMP/diff"; then
    echo "golden: $(ls "$TMP/got" | wc -l) recordings identical"
    exit 0
fi
head -c 20000 "$TMP/diff"
echo "golden: outputs differ from tests/golden/expected (see the diff above)" >&2
exit 1
