// nova-tokenize - turns a text file into a byte-level token file.
//
//   nova-tokenize INPUT.txt OUTPUT.bin [--u8|--u16]
//
// Each byte of INPUT becomes one token (vocabulary 256), written as a flat
// little-endian array (u16 by default, like nanoGPT's train.bin) that
// nova::TokenFile reads. The output is replaced atomically. Links only the
// runtime: no MLIR.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nova/data/tokens.hpp"

namespace {

int usage() {
  std::cerr << "usage: nova-tokenize INPUT.txt OUTPUT.bin [--u8|--u16]\n"
               "  Writes one token per byte of INPUT (default format u16).\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  nova::TokenFormat format = nova::TokenFormat::u16;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--u8") {
      format = nova::TokenFormat::u8;
    } else if (arg == "--u16") {
      format = nova::TokenFormat::u16;
    } else if (arg == "-h" || arg == "--help") {
      usage();
      return 0;
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::cerr << "nova-tokenize: unknown option " << arg << "\n";
      return usage();
    } else {
      files.push_back(arg);
    }
  }
  if (files.size() != 2) return usage();
  const std::string& input = files[0];
  const std::string& output = files[1];

  std::error_code ec;
  if (std::filesystem::is_directory(input, ec)) {
    std::cerr << "nova-tokenize: " << input << " is a directory, not a text file\n";
    return 1;
  }
  std::ifstream in(input, std::ios::binary);
  if (!in) {
    std::cerr << "nova-tokenize: cannot open " << input << " for reading\n";
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    std::cerr << "nova-tokenize: error while reading " << input << "\n";
    return 1;
  }
  if (text.view().empty()) {
    std::cerr << "nova-tokenize: " << input << " is empty; a token file needs at least one token\n";
    return 1;
  }

  try {
    std::vector<std::uint8_t> tokens = nova::tokenize_bytes(text.view());
    nova::write_tokens(output, std::span<const std::uint8_t>(tokens), format);
    std::cout << tokens.size() << " tokens (" << (format == nova::TokenFormat::u8 ? "u8" : "u16")
              << ") written to " << output << "\n";
  } catch (const std::exception& e) {
    std::cerr << "nova-tokenize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
