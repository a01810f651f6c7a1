#!/bin/sh
# check_downstream.sh MODE NOVA_SOURCE BUILD_DIR [PREFIX]
#   MODE installed: configure tests/package/downstream against the package
#                   installed in PREFIX (find_package(Nova)).
#   MODE subdir:    configure it with Nova's sources (add_subdirectory).
# installed: build it (the AOT step runs at build time), run the program and
#            run the runtime-only runner on the artifact.
# subdir:    Nova's libraries are the same sources the main build just
#            compiled (compiling them a second time here took 7 of the
#            normal tests' 12 minutes on 2 cores), so this checks what only
#            add_subdirectory can break: the configure (Nova::nova,
#            Nova::nova_runtime and nova_aot_compile defined from a parent
#            project), the generated headers landing where the sources find
#            them, and the runtime library built and linked into the runner.
set -eu
mode=$1 src=$2 build=$3
rm -rf "$build"
case "$mode" in
  installed) cmake -S "$src/tests/package/downstream" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$4" ;;
  subdir) cmake -S "$src/tests/package/downstream" -B "$build" -G Ninja -DNOVA_SOURCE_DIR="$src" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
if [ "$mode" = subdir ]; then
  cmake --build "$build" --target downstream_runner MLIRNovaOpsIncGen MLIRNovaAttrsIncGen \
        MLIRNovaInterfacesIncGen MLIRNovaPassIncGen
  test -f "$build/nova/src/compiler/dialect/NovaOps.h.inc"
  test -f "$build/nova/src/compiler/transforms/Passes.h.inc"
  # The runner refuses a missing file by name (it loaded and ran).
  if "$build/downstream_runner" "$build/missing.nexe" 2>"$build/runner.err"; then
    echo "the runner accepted a missing file"; exit 1
  fi
  grep -q "missing.nexe" "$build/runner.err"
  exit 0
fi
cmake --build "$build" --target downstream downstream_runner downstream_artifacts
"$build/downstream"
"$build/downstream_runner" "$build/axpy.nexe"
