#!/bin/sh
# check_downstream.sh MODE NOVA_SOURCE BUILD_DIR [PREFIX]
#   MODE installed: configure tests/package/downstream against the package
#                   installed in PREFIX (find_package(Nova)).
#   MODE subdir:    configure it with Nova's sources (add_subdirectory).
# Then build it (the AOT step runs at build time), run the program and run
# the runtime-only runner on the artifact.
set -eu
mode=$1 src=$2 build=$3
rm -rf "$build"
case "$mode" in
  installed) cmake -S "$src/tests/package/downstream" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$4" ;;
  subdir) cmake -S "$src/tests/package/downstream" -B "$build" -G Ninja -DNOVA_SOURCE_DIR="$src" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
cmake --build "$build" --target downstream downstream_runner downstream_artifacts
"$build/downstream"
"$build/downstream_runner" "$build/axpy.nexe"
