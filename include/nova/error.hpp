// error.hpp - the exceptions Nova throws at its user.
//
// Every message names the op, the shapes involved and, where known, the
// user's source line. Nothing in Nova aborts on bad user input.
#pragma once

#include <stdexcept>
#include <string>

namespace nova {

/// Base of every Nova error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes, ranks or dtypes that do not fit an op.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// The compiler failed on a graph that traced cleanly (a Nova bug or an
/// unsupported construct); the message holds the compiler's diagnostics.
class CompileError : public Error {
 public:
  using Error::Error;
};

/// A file that breaks its format; the message names the file and the exact problem.
class FormatError : public Error {
 public:
  using Error::Error;
};

} // namespace nova
