// mode.cpp - reads the NOVA_INTERPRET switch.
#include <cstdlib>
#include <cstring>

#include "nova/detail/builder.hpp"

namespace nova::detail {

ExecMode effective_mode(ExecMode requested) {
  const char* v = std::getenv("NOVA_INTERPRET");
  if (v && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0) return ExecMode::interpreted;
  return requested;
}

} // namespace nova::detail
