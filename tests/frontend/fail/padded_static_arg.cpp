// A static argument is keyed by value, never by its bytes: a struct with
// padding (or floating-point members) must describe its members.
// EXPECT: nova::static_arg: the value must be an arithmetic type, an enum, a std::string
#include <nova/nova.hpp>

struct Options {
  bool fast;
  double scale; // 7 padding bytes before it: unkeyable bytes
};
#ifdef NOVA_TWIN
BOOST_HANA_ADAPT_STRUCT(Options, fast, scale);
#endif

void run(nova::Tensor x) {
  auto step = nova::jit([](auto x, Options o) { return o.fast ? x * o.scale : x; });
  step(x, nova::static_arg(Options{true, 2.0}));
}
