// aot.cpp - saving and loading executable files (include/nova/aot.hpp).
#include "nova/aot.hpp"

#include <filesystem>

#include "disk_cache.hpp"

namespace nova::aot {

namespace {
const ExecutableDesc& description_of(const Executable& exe) {
  const ExecutableDesc* desc = exe.description();
  if (!desc)
    throw Error("nova::aot: this executable (" + exe.kind() +
                ") has no executable description to save; only compiled steps do");
  return *desc;
}
} // namespace

void save(const Executable& exe, const std::string& path) { write_executable_file(path, description_of(exe)); }

std::string save_to_cache_dir(const Executable& exe, const std::string& dir) {
  const ExecutableDesc& desc = description_of(exe);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = dir + "/" + detail::key_hex(desc.key) + ".nexe";
  write_executable_file(path, desc);
  return path;
}

std::shared_ptr<Executable> load(const std::string& path) { return load_executable(read_executable_file(path)); }

} // namespace nova::aot
