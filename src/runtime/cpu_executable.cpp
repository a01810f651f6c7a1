// cpu_executable.cpp - runs an executable description on the CPU.
//
// Loading: the description's ELF shared object is written into an anonymous
// memory file (memfd_create) and dlopen'ed through /proc/self/fd, so nothing
// touches the file system; each kernel symbol is resolved once. Kernels
// reference only libc/libm symbols, which the process already has.
//
// Running: the launch plan, in order. Each launch resolves its arguments
// (step inputs, step outputs, offsets into the arena) into an array of
// pointers and runs workgroups 0..n-1 on the runtime's thread pool. One arena
// is taken per run from a free list, so one executable can run on several
// threads at once without sharing temporaries.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>

#include "nova/distributed.hpp"
#include "nova/executable_desc.hpp"
#include "memory.hpp"
#include "nova/profile.hpp"
#include "nova/timeline.hpp"
#include "profile_registry.hpp"
#include "host_collectives.hpp"
#include "cuda_executable.hpp"
#include "thread_pool.hpp"

namespace nova {
namespace {

using KernelFn = void (*)(std::int64_t, void* const*);

struct FreeDeleter {
  void operator()(std::byte* p) const { detail::free_buffer(p); }
};
using Arena = std::unique_ptr<std::byte, FreeDeleter>;

Arena allocate_arena(std::uint64_t bytes) {
  return Arena(static_cast<std::byte*>(detail::allocate_buffer(static_cast<std::size_t>(bytes))));
}

/// A dlopen'ed shared object loaded from memory.
///
/// glibc's dlopen returns an already loaded object whose *name* matches, and
/// the name here is /proc/self/fd/<n>. So the memory file stays open while
/// the object is loaded: no other load can get the same descriptor number,
/// hence the same name, until this object is closed.
class LoadedObject {
 public:
  explicit LoadedObject(const std::vector<std::uint8_t>& image) {
    fd_ = memfd_create("nova-kernels.so", MFD_CLOEXEC);
    if (fd_ < 0) throw Error("nova: memfd_create failed while loading kernels");
    std::size_t done = 0;
    while (done < image.size()) {
      ssize_t n = ::write(fd_, image.data() + done, image.size() - done);
      if (n <= 0) {
        ::close(fd_);
        throw Error("nova: writing kernels to memory failed");
      }
      done += static_cast<std::size_t>(n);
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd_);
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* why = dlerror();
      ::close(fd_);
      throw Error(std::string("nova: loading the kernels' object code failed: ") + (why ? why : "?"));
    }
  }
  ~LoadedObject() {
    dlclose(handle_);
    ::close(fd_);
  }
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;

  KernelFn symbol(const std::string& name) const {
    void* p = dlsym(handle_, name.c_str());
    if (!p) throw Error("nova: the kernels' object code has no symbol '" + name + "'");
    return reinterpret_cast<KernelFn>(p);
  }

 private:
  int fd_ = -1;
  void* handle_ = nullptr;
};

class CpuExecutable final : public Executable {
 public:
  explicit CpuExecutable(ExecutableDesc desc)
      : Executable(desc.inputs, desc.outputs, desc.aliases), desc_(std::move(desc)), schedule_(desc_) {
    if (!desc_.launches.empty()) {
      object_ = std::make_unique<LoadedObject>(desc_.object);
      for (const auto& k : desc_.kernels) kernels_.push_back(object_->symbol(k.symbol));
    }
    if (profiling_enabled()) profile_ = detail::register_profile(desc_);
  }

  std::string kind() const override { return "cpu"; }
  const ExecutableDesc* description() const override { return &desc_; }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const override {
    std::shared_ptr<dist::Communicator> comm;
    if (!desc_.collectives.empty()) {
      comm = dist::required_communicator(desc_.collectives.size());
    }
    Arena arena = take_arena();
    std::byte* base = arena.get();
    auto resolve = [&](const BufferRef& b) -> void* {
      switch (b.kind) {
      case BufferRef::Kind::input: return inputs[b.index].raw_data();
      case BufferRef::Kind::output: return outputs[b.index].raw_data();
      case BufferRef::Kind::arena: break;
      }
      return base + b.offset;
    };
    // NOVA_TIMELINE: the clock around every launch and collective.
    std::unique_ptr<RunTimeline> timeline;
    if (timeline_enabled())
      timeline = std::make_unique<RunTimeline>(detail::timeline_of(desc_, comm ? comm->rank() : -1, detail::clock_s()));
    // Collectives: started once `after_launch` launches have run, waited
    // for before launch `before_launch` (the plan's end: launches.size()).
    std::optional<detail::HostCollectives> collectives;
    if (comm) collectives.emplace(desc_, schedule_, *comm, resolve, timeline.get());
    // Output slots of aliased outputs are their inputs' buffers.
    void* pointers[64];
    std::vector<void*> heap;
    detail::ThreadPool& pool = detail::global_pool();
    auto run_start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    for (std::size_t i = 0; i < desc_.launches.size(); ++i) {
      if (comm) {
        try {
          collectives->at(i);
        } catch (...) {
          // A failed collective may still be written by a peer: this arena
          // is never handed out again.
          abandon(std::move(arena));
          throw;
        }
      }
      const LaunchDesc& launch = desc_.launches[i];
      void** args = pointers;
      if (launch.args.size() > std::size(pointers)) {
        heap.resize(launch.args.size());
        args = heap.data();
      }
      for (std::size_t a = 0; a < launch.args.size(); ++a) args[a] = resolve(launch.args[a]);
      KernelFn fn = kernels_[launch.kernel];
      auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      double begin_s = timeline ? detail::clock_s() : 0.0;
      pool.parallel_for(static_cast<std::int64_t>(launch.workgroups),
                        [fn, args](std::int64_t wg) { fn(wg, args); });
      if (timeline) timeline->launches.push_back({launch.kernel, begin_s, detail::clock_s()});
      if (comm) comm->progress();
      if (profile_) {
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
        profile_->kernel_ns[launch.kernel] += static_cast<std::uint64_t>(ns.count());
        profile_->kernel_launches[launch.kernel] += 1;
      }
    }
    if (comm) {
      try {
        collectives->at(desc_.launches.size());
      } catch (...) {
        abandon(std::move(arena));
        throw;
      }
    }
    if (timeline) {
      timeline->end_s = detail::clock_s();
      detail::publish_timeline(std::move(*timeline));
    }
    if (profile_) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - run_start);
      profile_->run_ns += static_cast<std::uint64_t>(ns.count());
      profile_->runs += 1;
    }
    give_back(std::move(arena));
  }

 private:
  Arena take_arena() const {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        Arena a = std::move(free_.back());
        free_.pop_back();
        return a;
      }
    }
    return allocate_arena(desc_.arena_bytes);
  }
  void give_back(Arena a) const {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(a));
  }
  void abandon(Arena a) const {
    std::lock_guard lock(mutex_);
    abandoned_.push_back(std::move(a));
  }

  ExecutableDesc desc_;
  detail::CollectiveSchedule schedule_;
  std::unique_ptr<LoadedObject> object_;
  std::vector<KernelFn> kernels_;
  detail::ExecutableProfile* profile_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::vector<Arena> free_;
  // Arenas of runs whose collective failed, kept until the executable goes.
  mutable std::vector<Arena> abandoned_;
};

/// Holds a description it cannot run here.
class UnloadableExecutable final : public Executable {
 public:
  UnloadableExecutable(ExecutableDesc desc, std::string why)
      : Executable(desc.inputs, desc.outputs, desc.aliases), desc_(std::move(desc)), why_(std::move(why)) {}
  std::string kind() const override { return "unloadable"; }
  const ExecutableDesc* description() const override { return &desc_; }
  void run(std::span<const Tensor>, std::span<Tensor>) const override { throw Error(why_); }

 private:
  ExecutableDesc desc_;
  std::string why_;
};

/// Why this machine cannot run `desc`, or "".
std::string cannot_run(const ExecutableDesc& desc) {
  if (desc.target.kind != DeviceKind::cpu) {
    std::string why = cannot_run_on_cuda(desc);
    return why.empty() ? why
                       : "nova: this executable is for a CUDA device (" + desc.target.describe() + "), and " + why +
                             " (it can be saved; NOVA_GPU=emulate runs GPU steps on the CPU under the emulator)";
  }
  std::vector<std::string> missing = missing_features(desc.target, host_target());
  if (missing.empty()) return "";
  std::string list;
  for (const auto& f : missing) list += (list.empty() ? "" : ", ") + f;
  return "nova: this executable was compiled for " + desc.target.describe() + "; this machine (" +
         host_target().describe() + ") lacks " + list;
}

/// Linux gives a process the AMX tile registers only on request (their
/// 8 KiB of state grows every signal frame); code that touches them without
/// it dies of SIGILL. Asked once, for the whole process, before the first
/// executable compiled for a target with AMX runs.
void request_amx_state() {
  static const bool granted = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return ::syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  if (!granted)
    throw Error("nova: the kernel refused this process the AMX tile state (arch_prctl "
                "ARCH_REQ_XCOMP_PERM); compile with NOVA_MATMUL_PRECISION=fp32");
}

} // namespace

std::shared_ptr<Executable> load_executable(const ExecutableDesc& desc) {
  desc.validate();
  if (std::string why = cannot_run(desc); !why.empty()) throw Error(why);
  if (desc.target.is_gpu()) return load_cuda_executable(desc);
  if (desc.target.has("amx_tile")) request_amx_state();
  if (!desc.launches.empty() && desc.object_format != "elf-shared-object")
    throw Error("nova: unknown object format '" + desc.object_format + "'");
  return std::make_shared<CpuExecutable>(desc);
}

std::shared_ptr<Executable> unloadable_executable(ExecutableDesc desc, std::string why) {
  return std::make_shared<UnloadableExecutable>(std::move(desc), std::move(why));
}

std::shared_ptr<Executable> load_or_describe(const ExecutableDesc& desc) {
  if (std::string why = cannot_run(desc); !why.empty()) {
    desc.validate();
    return unloadable_executable(desc, why);
  }
  return load_executable(desc);
}

} // namespace nova
