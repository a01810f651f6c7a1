# NovaAot.cmake - compile Nova steps ahead of time, at build time.
#
#   nova_aot_compile(OUTPUT <file> GENERATOR <target> [TARGET <name>] [ARGS <arg>...])
#
# Runs the program `GENERATOR` (your code, linked with Nova::nova: it builds
# the steps with their shapes and saves their executables with
# nova::aot::save or nova::aot::save_to_cache_dir) as a build step with
# NOVA_TARGET=<name> (default: the machine that builds), passing OUTPUT and
# ARGS on its command line. OUTPUT is rebuilt when the generator changes;
# depend on it from a target (add_custom_target(... DEPENDS <file>)).
# The artifacts load with nova::aot::load or `nova-run` (runtime only).
function(nova_aot_compile)
  cmake_parse_arguments(AOT "" "OUTPUT;GENERATOR;TARGET" "ARGS" ${ARGN})
  if(NOT AOT_OUTPUT OR NOT AOT_GENERATOR)
    message(FATAL_ERROR "nova_aot_compile: OUTPUT and GENERATOR are required")
  endif()
  set(env NOVA_CACHE=off)
  if(AOT_TARGET)
    list(APPEND env NOVA_TARGET=${AOT_TARGET})
  endif()
  add_custom_command(OUTPUT ${AOT_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -E env ${env} $<TARGET_FILE:${AOT_GENERATOR}> ${AOT_OUTPUT} ${AOT_ARGS}
    DEPENDS ${AOT_GENERATOR}
    COMMENT "Nova: compiling steps ahead of time into ${AOT_OUTPUT}"
    VERBATIM)
endfunction()
