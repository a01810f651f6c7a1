// precision.cpp - the process-wide matmul and activation precisions
// (nova/precision.hpp).
#include "nova/precision.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "nova/error.hpp"

namespace nova {

namespace {

MatmulPrecision from_env() {
  const char* v = std::getenv("NOVA_MATMUL_PRECISION");
  if (!v || !*v || std::string_view(v) == "fp32") return MatmulPrecision::fp32;
  if (std::string_view(v) == "bf16") return MatmulPrecision::bf16;
  if (std::string_view(v) == "tf32") return MatmulPrecision::tf32;
  throw Error("nova: NOVA_MATMUL_PRECISION is '" + std::string(v) + "'; use fp32, tf32 or bf16");
}

std::atomic<int>& setting() {
  static std::atomic<int> value{static_cast<int>(from_env())};
  return value;
}

ActivationPrecision activation_from_env() {
  const char* v = std::getenv("NOVA_ACTIVATION_PRECISION");
  if (!v || !*v || std::string_view(v) == "fp32") return ActivationPrecision::fp32;
  if (std::string_view(v) == "bf16") return ActivationPrecision::bf16;
  throw Error("nova: NOVA_ACTIVATION_PRECISION is '" + std::string(v) + "'; use fp32 or bf16");
}

std::atomic<int>& activation_setting() {
  static std::atomic<int> value{static_cast<int>(activation_from_env())};
  return value;
}

} // namespace

void set_matmul_precision(MatmulPrecision precision) { setting().store(static_cast<int>(precision)); }

MatmulPrecision matmul_precision() { return static_cast<MatmulPrecision>(setting().load()); }

std::string_view name_of(MatmulPrecision precision) {
  return precision == MatmulPrecision::bf16 ? "bf16" : precision == MatmulPrecision::tf32 ? "tf32" : "fp32";
}

void set_activation_precision(ActivationPrecision precision) {
  activation_setting().store(static_cast<int>(precision));
}

ActivationPrecision activation_precision() { return static_cast<ActivationPrecision>(activation_setting().load()); }

std::string_view name_of(ActivationPrecision precision) {
  return precision == ActivationPrecision::bf16 ? "bf16" : "fp32";
}

} // namespace nova
