// cuda_executable.cpp - a step compiled for a CUDA GPU, run through the driver.
//
// The description's cubin is loaded once (cuModuleLoadData), or, where it
// has none or the driver refuses it (another chip, an ELF newer than the
// driver), its PTX, which the driver assembles for the device; each kernel
// looked up by its symbol and allowed its dynamic shared memory; the arena and one device buffer per
// step input and (not aliased) output are allocated once. A call copies the
// inputs in, launches the plan in order on the default stream (grid =
// the launch's workgroups along x, block = the kernel's threads; each
// argument a device pointer: the bare-pointer ABI of the kernels), waits,
// and copies the outputs out. An input the step updates in place (a
// parameter, optimizer state) whose tensor is all of its storage stays on
// the device: its storage is marked as this executable's (storage.hpp), the
// next call with the same tensor skips its upload, and the host's first
// access copies it back; the executable copies back what it holds before
// it goes (NOVA_GPU_RESIDENT=0: every such input copied back each call, as
// before). Kernels that load with TMA take some arguments as tensor
// maps: encoded once at load (cuTensorMapEncodeTiled) over the launch's
// buffer, kept in device memory, passed by address. The plan is captured
// once, at load, into a CUDA graph on the executable's stream, and each
// call replays it (one launch for the whole step instead of one per kernel;
// NOVA_CUDA_GRAPH=0, or a driver without graphs, launches kernel by kernel
// instead). A data-parallel step sums its gradient buckets with NCCL on the
// device buffers, on a stream of their own: each bucket's all-reduces wait
// (an event) for the launch the plan starts them after, and the launch the
// plan waits for them before waits (another event) for their end, so the
// sums overlap the rest of the backward (a driver without streams and
// events: both on one stream, in order). The communicator is made at the
// first call from the calling thread's (rank, size, and the broadcast of
// NCCL's unique id); its graph is captured then, the all-reduces in it.
// With NOVA_PROFILE (nova/profile.hpp) the plan runs kernel by kernel, a
// timing event recorded before each launch and after the last: each
// launch's time is its two events' difference (on a data-parallel step the
// launch waiting for a sum counts the wait), added to the process's
// profile, no graph captured. With NOVA_TIMELINE (nova/timeline.hpp) a call
// runs kernel by kernel too, with timing events around every launch and
// each bucket's sums, published as the process's last timeline. A kernel's
// fault reaches the host only at the next wait, after the whole step was
// enqueued: the error then says so, and NOVA_GPU_SYNC=<s> runs the plan
// kernel by kernel, waiting after each launch, to name the one that failed
// (or, on stderr, one still running after s seconds: a hang).
// Calls of one executable are serialized (its buffers are shared).
#include "cuda_executable.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cuda_driver.hpp"
#include "host_collectives.hpp"
#include "nccl.hpp"
#include "nova/cuda.hpp"
#include "nova/distributed.hpp"
#include "nova/error.hpp"
#include "nova/explain.hpp"
#include "nova/profile.hpp"
#include "profile_registry.hpp"
#include "storage.hpp"

namespace nova {
namespace {

using cuda::CUdeviceptr;

class CudaExecutable final : public Executable, public detail::DeviceHolder {
 public:
  explicit CudaExecutable(ExecutableDesc desc)
      : Executable(desc.inputs, desc.outputs, desc.aliases), desc_(std::move(desc)), schedule_(desc_) {
    std::string why;
    d_ = cuda::driver(&why);
    if (!d_) throw Error("nova: " + why);
    try {
      load();
    } catch (...) {
      release(); // no destructor runs for a constructor that throws
      throw;
    }
  }

  ~CudaExecutable() override { release(); }

  std::string kind() const override { return "cuda"; }
  const ExecutableDesc* description() const override { return &desc_; }

  void run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    check("cuCtxSetCurrent", d_->cuCtxSetCurrent(context_));
    std::shared_ptr<dist::Communicator> comm;
    if (!desc_.collectives.empty()) {
      comm = dist::required_communicator(desc_.collectives.size());
      join_nccl(*comm);
      if (!graph_tried_) capture_graph(); // the sums' NCCL kernels in it too
    }
    // A tensor this executable holds leaves the buffer it is held in when
    // this call passes another tensor there (or it moved to another
    // input): its bytes go back first, before that buffer is overwritten.
    for (std::size_t i = 0; i < held_.size(); ++i)
      if (std::shared_ptr<detail::Storage> s = held_[i].lock())
        if (detail::TensorAccess::storage(inputs[i]) != s) s->copy_back(this);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::size_t n = bytes_of(desc_.inputs[i]);
      if (n == 0 || resident(inputs[i], inputs_[i])) continue; // its newer bytes are already here
      check("cuMemcpyHtoD", d_->cuMemcpyHtoD(inputs_[i], inputs[i].raw_data(), n));
    }
    // NOVA_TIMELINE: kernel by kernel, timing events around each launch
    // and each bucket's sums.
    const bool timeline = timeline_enabled() && prepare_timeline();
    const double host_begin = timeline ? detail::clock_s() : 0.0;
    if (graph_exec_ && !timeline) {
      // The copies above ran on the default stream, which the blocking
      // stream waits for; the graph replays every launch of the plan.
      check("cuGraphLaunch", d_->cuGraphLaunch(graph_exec_, stream_));
      check("cuStreamSynchronize", d_->cuStreamSynchronize(stream_));
    } else {
      timing_sums_ = timeline;
      launch_plan(stream_, comm != nullptr, profile_ || timeline ? &marks_ : nullptr);
      timing_sums_ = false;
      check("cuCtxSynchronize", d_->cuCtxSynchronize());
      if (profile_) add_to_profile();
      if (timeline) publish_timeline(host_begin, comm.get());
    }
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      int alias = desc_.aliases[o];
      CUdeviceptr from = alias >= 0 ? inputs_[static_cast<std::size_t>(alias)] : outputs_[o];
      std::size_t n = bytes_of(desc_.outputs[o]);
      if (n == 0 || (alias >= 0 && keep_on_device(outputs[o], static_cast<std::size_t>(alias)))) continue;
      check("cuMemcpyDtoH", d_->cuMemcpyDtoH(outputs[o].raw_data(), from, n));
    }
  }

  void copy_to_host(std::uint64_t device, void* host, std::size_t bytes) const override {
    // Not under mutex_: a call copying in an input this executable holds
    // in another of its buffers comes here from run().
    check("cuCtxSetCurrent", d_->cuCtxSetCurrent(context_));
    check("cuMemcpyDtoH", d_->cuMemcpyDtoH(host, static_cast<CUdeviceptr>(device), bytes));
  }

 private:
  /// Whether `t`'s newer bytes are this executable's, in `buffer`.
  bool resident(const Tensor& t, CUdeviceptr buffer) const {
    const std::shared_ptr<detail::Storage>& s = detail::TensorAccess::storage(t);
    return s && s->held_by(this, buffer);
  }
  /// Leaves input `input`'s update (written into its tensor `t`) on the
  /// device where `t` is all of its storage: the storage marked as held
  /// here. False: the caller copies it back.
  bool keep_on_device(const Tensor& t, std::size_t input) const {
    if (!resident_inputs_ || !detail::TensorAccess::whole(t)) return false;
    const std::shared_ptr<detail::Storage>& s = detail::TensorAccess::storage(t);
    held_[input] = s;
    s->hold(this, inputs_[input]);
    return true;
  }

  void load() {
    const int ordinal = cuda_device();
    check("cuDeviceGet", d_->cuDeviceGet(&device_, ordinal));
    // Code configured for more SMs than this GPU has runs, slower: say so
    // once a plan.
    for (const std::string& note : fit_warnings(desc_.target, cuda_device_target(ordinal)))
      std::fprintf(stderr, "nova: note: %s\n", note.c_str());
    check("cuDevicePrimaryCtxRetain", d_->cuDevicePrimaryCtxRetain(&context_, device_));
    check("cuCtxSetCurrent", d_->cuCtxSetCurrent(context_));
    load_module();
    for (const KernelDesc& k : desc_.kernels) {
      cuda::CUfunction f = nullptr;
      check("cuModuleGetFunction", k.symbol, d_->cuModuleGetFunction(&f, module_, k.symbol.c_str()));
      if (k.shared_bytes > 48 * 1024)
        check("cuFuncSetAttribute", d_->cuFuncSetAttribute(f, cuda::kFuncMaxDynamicSharedSizeBytes,
                                                           static_cast<int>(k.shared_bytes)));
      if (k.cluster > 1 && !d_->cuLaunchKernelEx)
        throw Error("nova: kernel " + k.symbol + " runs in clusters of " + std::to_string(k.cluster) +
                    ", and this CUDA driver has no cuLaunchKernelEx (CUDA 12 or later needed)");
      functions_.push_back(f);
    }
    note_clusters_left_waiting();
    const char* resident = std::getenv("NOVA_GPU_RESIDENT");
    resident_inputs_ = !(resident && std::strcmp(resident, "0") == 0);
    sync_report_s_ = sync_seconds();
    find_programmatic_waits();
    held_.resize(desc_.inputs.size());
    check_fits(io_bytes(desc_.inputs, desc_.outputs, desc_.aliases));
    arena_ = allocate(desc_.arena_bytes);
    for (const auto& s : desc_.inputs) inputs_.push_back(allocate(bytes_of(s)));
    for (std::size_t o = 0; o < desc_.outputs.size(); ++o)
      outputs_.push_back(desc_.aliases[o] >= 0 ? 0 : allocate(bytes_of(desc_.outputs[o])));
    // Every launch's arguments; tensor maps over their buffers, encoded now
    // (the buffers never move) into one device table.
    struct alignas(64) Map {
      unsigned char bytes[128];
    };
    std::vector<Map> maps;
    std::vector<std::pair<std::size_t, std::size_t>> slots; // (launch, argument) of each map
    for (std::size_t i = 0; i < desc_.launches.size(); ++i) {
      const LaunchDesc& l = desc_.launches[i];
      std::vector<CUdeviceptr> args;
      for (const BufferRef& b : l.args) args.push_back(device_address(b));
      for (const TensorMapDesc& m : desc_.kernels[l.kernel].tensor_maps) {
        if (!d_->cuTensorMapEncodeTiled)
          throw Error("nova: kernel " + desc_.kernels[l.kernel].symbol +
                      " loads with TMA, and this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or later needed)");
        std::vector<std::uint32_t> box(m.box.begin(), m.box.end()), unit(m.box.size(), 1);
        maps.emplace_back();
        check("cuTensorMapEncodeTiled", desc_.kernels[l.kernel].symbol,
              d_->cuTensorMapEncodeTiled(maps.back().bytes, tensor_map_type(m.element),
                                         static_cast<std::uint32_t>(m.dims.size()),
                                         reinterpret_cast<void*>(static_cast<std::uintptr_t>(args[m.arg])),
                                         m.dims.data(), m.strides.data(), box.data(), unit.data(), /*interleave=*/0,
                                         cuda::tensor_map_swizzle(m.swizzle_bytes), cuda::kTensorMapL2Promotion128B,
                                         /*oob_fill=*/0));
        slots.push_back({i, m.arg});
      }
      args_.push_back(std::move(args));
    }
    if (!maps.empty()) {
      CUdeviceptr table = allocate(maps.size() * sizeof(Map));
      check("cuMemcpyHtoD", d_->cuMemcpyHtoD(table, maps.data(), maps.size() * sizeof(Map)));
      for (std::size_t j = 0; j < slots.size(); ++j) args_[slots[j].first][slots[j].second] = table + j * sizeof(Map);
    }
    // cuLaunchKernel's parameter arrays, made once: args_ no longer changes.
    for (auto& args : args_) {
      params_.emplace_back();
      for (CUdeviceptr& p : args) params_.back().push_back(&p);
    }
    // The step's own stream (graph replays, or launches beside the sums).
    if (d_->has_graphs()) check("cuStreamCreate", d_->cuStreamCreate(&stream_, 0));
    prepare_profile();
    capture_graph();
    prepare_sums();
  }

  /// NOVA_PROFILE: this executable's counters and a timing event before
  /// each launch and after the last; none where the driver cannot time
  /// events (said once).
  void prepare_profile() {
    if (!profiling_enabled() || desc_.launches.empty()) return;
    if (!d_->has_events() || !d_->cuEventElapsedTime) {
      std::fprintf(stderr, "nova: NOVA_PROFILE: this CUDA driver has no timing events; the GPU step is not profiled\n");
      return;
    }
    make_timing_events(marks_, desc_.launches.size() + 1);
    profile_ = detail::register_profile(desc_);
  }

  /// The last run's launch times (its events, complete after the
  /// synchronization) into the profile.
  void add_to_profile() const {
    auto ms_between = [&](std::size_t a, std::size_t b) {
      float ms = 0;
      check("cuEventElapsedTime", d_->cuEventElapsedTime(&ms, marks_[a], marks_[b]));
      return static_cast<std::uint64_t>(std::max(0.0, double(ms) * 1e6));
    };
    for (std::size_t i = 0; i < desc_.launches.size(); ++i) {
      const std::size_t k = desc_.launches[i].kernel;
      profile_->kernel_ns[k] += ms_between(i, i + 1);
      profile_->kernel_launches[k] += 1;
    }
    profile_->run_ns += ms_between(0, desc_.launches.size());
    profile_->runs += 1;
  }

  /// NOVA_TIMELINE's events, made at its first run (false: a driver that
  /// cannot time events, said once): the launches' marks, and per bucket
  /// its sums' start and end and the launches' arrival at its wait.
  bool prepare_timeline() const {
    if (desc_.launches.empty()) return false;
    if (!d_->has_events() || !d_->cuEventElapsedTime) {
      static std::once_flag said;
      std::call_once(said, [] {
        std::fprintf(stderr, "nova: NOVA_TIMELINE: this CUDA driver has no timing events; no GPU timeline\n");
      });
      return false;
    }
    make_timing_events(marks_, desc_.launches.size() + 1);
    for (auto* events : {&sum_begin_, &sum_end_, &arrive_}) make_timing_events(*events, desc_.collectives.size());
    return true;
  }

  /// `events` grown to `n` timing events (the profile's marks serve the
  /// timeline too).
  void make_timing_events(std::vector<cuda::CUevent>& events, std::size_t n) const {
    while (events.size() < n) {
      events.push_back(nullptr);
      check("cuEventCreate", d_->cuEventCreate(&events.back(), cuda::kEventDefault));
    }
  }

  /// The last run's timeline (its events complete after the
  /// synchronization), each event's time as seconds on the process's
  /// clock: `host_begin` (read before the first launch) plus its time
  /// after the first mark. A bucket's sums run from their start to their
  /// end; the launches wait from their arrival (the launch before the
  /// wait done) until then, if later.
  void publish_timeline(double host_begin, const dist::Communicator* comm) const {
    auto at = [&](cuda::CUevent e) {
      float ms = 0;
      check("cuEventElapsedTime", d_->cuEventElapsedTime(&ms, marks_[0], e));
      return host_begin + std::max(0.0, double(ms)) / 1e3;
    };
    RunTimeline t = detail::timeline_of(desc_, comm ? comm->rank() : -1, host_begin);
    for (std::size_t i = 0; i < desc_.launches.size(); ++i)
      t.launches.push_back({desc_.launches[i].kernel, at(marks_[i]), at(marks_[i + 1])});
    const bool apart = sum_stream_ != nullptr;
    for (std::size_t c = 0; c < desc_.collectives.size(); ++c) {
      CollectiveTiming& k = t.collectives[c];
      k.start_s = k.start_end_s = at(sum_begin_[c]);
      const double end = at(sum_end_[c]);
      k.wait_begin_s = apart ? at(arrive_[c]) : end; // one stream: the sums are the launches' own
      k.wait_end_s = std::max(end, k.wait_begin_s);
    }
    t.end_s = at(marks_.back());
    detail::publish_timeline(std::move(t));
  }

  /// cuLaunchKernelEx's configuration of kernel `k`'s launch of `workgroups`
  /// blocks: a kernel in clusters gets the cluster as the launch's
  /// attribute (MLIR 19 puts no .reqnctapercluster in the PTX); with
  /// `programmatic`, the attribute that lets it start before the launch
  /// before it in the stream ends (programmatic dependent launch: its
  /// kernel's first op waits for that one, griddepcontrol.wait).
  struct ExtendedLaunch {
    cuda::LaunchAttribute attributes[2];
    cuda::LaunchConfig config;
    ExtendedLaunch(const KernelDesc& k, std::uint64_t workgroups, cuda::CUstream stream, bool programmatic = false) {
      unsigned n = 0;
      if (k.cluster > 1) {
        attributes[n].id = cuda::kLaunchAttributeClusterDimension;
        attributes[n].value[0] = k.cluster, attributes[n].value[1] = 1, attributes[n].value[2] = 1;
        ++n;
      }
      if (programmatic) {
        attributes[n].id = cuda::kLaunchAttributeProgrammaticStreamSerialization;
        attributes[n].value[0] = 1;
        ++n;
      }
      config.grid_x = static_cast<unsigned>(workgroups);
      config.block_x = k.threads;
      config.shared_bytes = k.shared_bytes;
      config.stream = stream;
      config.attributes = attributes; // (hence no copies)
      config.attribute_count = n;
    }
    ExtendedLaunch(const ExtendedLaunch&) = delete;
    ExtendedLaunch& operator=(const ExtendedLaunch&) = delete;
  };

  /// A persistent kernel in clusters launches as many as the configurator
  /// found room for; a GPU that holds fewer at once (its GPCs' SMs pair
  /// up unevenly, another kernel's blocks) runs the rest in a second
  /// round: said once a kernel at load.
  void note_clusters_left_waiting() const {
    if (!d_->cuOccupancyMaxActiveClusters) return;
    for (std::size_t i = 0; i < desc_.kernels.size(); ++i) {
      const KernelDesc& k = desc_.kernels[i];
      if (k.cluster < 2) continue;
      std::uint64_t most = 0;
      for (const LaunchDesc& l : desc_.launches)
        if (l.kernel == i) most = std::max(most, l.workgroups);
      const ExtendedLaunch launch(k, most, nullptr);
      int held = 0;
      if (d_->cuOccupancyMaxActiveClusters(&held, functions_[i], &launch.config) == 0 && held > 0 &&
          most / k.cluster > static_cast<std::uint64_t>(held))
        std::fprintf(stderr,
                     "nova: note: kernel %s launches %llu clusters of %u, this GPU holds %d at once: the rest "
                     "wait for a second round (compile with NOVA_GPU_CLUSTER=1, or NOVA_GPU_SMS=%d)\n",
                     k.symbol.c_str(), static_cast<unsigned long long>(most / k.cluster), k.cluster, held,
                     held * static_cast<int>(k.cluster));
    }
  }

  /// Every launch of the plan, in order, on `stream`; with `sums`, each
  /// collective's all-reduces enqueued where the plan starts it; with
  /// `marks`, its event i recorded before launch i and the last after them.
  /// With `programmatic`, each launch after the first whose kernel waits
  /// for the grids before it (waits_first_) may start before the one before
  /// it ends (programmatic dependent launch; a graph's launches only).
  void launch_plan(cuda::CUstream stream, bool sums = false, const std::vector<cuda::CUevent>* marks = nullptr,
                   bool programmatic = false) const {
    for (std::size_t i = 0; i <= desc_.launches.size(); ++i) {
      if (sums) all_reduces_at(i, stream);
      if (marks) check("cuEventRecord", d_->cuEventRecord((*marks)[i], stream));
      if (i == desc_.launches.size()) break;
      const LaunchDesc& l = desc_.launches[i];
      const KernelDesc& k = desc_.kernels[l.kernel];
      // The driver reads the parameters and does not write them.
      void** params = const_cast<void**>(params_[i].data());
      const bool early = programmatic && i > 0 && waits_first_[l.kernel];
      if (k.cluster > 1 || early) {
        const ExtendedLaunch launch(k, l.workgroups, stream, early);
        check("cuLaunchKernelEx", k.symbol,
              d_->cuLaunchKernelEx(&launch.config, functions_[l.kernel], params, nullptr));
        if (sync_launches()) check_launch_finished(i, stream);
        continue;
      }
      check("cuLaunchKernel", k.symbol,
            d_->cuLaunchKernel(functions_[l.kernel], static_cast<unsigned>(l.workgroups), 1, 1, k.threads, 1, 1,
                               k.shared_bytes, stream, params, nullptr));
      if (sync_launches()) check_launch_finished(i, stream);
    }
  }

  /// NOVA_GPU_SYNC: waits for launch `i` and names it (its kernel, what it
  /// computes, its grid) if it failed: a kernel's fault (an out-of-bounds
  /// access, a trap) is otherwise reported only by the step's wait, after
  /// every launch, without saying whose it was.
  /// A launch that runs past NOVA_GPU_SYNC's seconds (a hang: a barrier or
  /// mbarrier some threads never reach) is named on stderr once, while it
  /// is still waited for.
  void check_launch_finished(std::size_t i, cuda::CUstream stream) const {
    const LaunchDesc& l = desc_.launches[i];
    const KernelDesc& k = desc_.kernels[l.kernel];
    auto launch_text = [&] {
      return "launch " + std::to_string(i) + " of " + std::to_string(desc_.launches.size()) + ", kernel " +
             k.symbol + (k.summary.empty() ? "" : " (" + k.summary + ")") + ", " + std::to_string(l.workgroups) +
             " blocks of " + std::to_string(k.threads) + " threads, " + std::to_string(k.shared_bytes) +
             " bytes of shared memory";
    };
    const char* call = stream ? "cuStreamSynchronize" : "cuCtxSynchronize";
    cuda::CUresult r = 0;
    if (stream && d_->cuStreamQuery) {
      call = "cuStreamQuery";
      const auto start = std::chrono::steady_clock::now();
      bool reported = false;
      while ((r = d_->cuStreamQuery(stream)) == cuda::kErrorNotReady) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!reported && s >= sync_report_s_) {
          std::fprintf(stderr, "nova: NOVA_GPU_SYNC: %s has run for %.1f s and is still running\n",
                       launch_text().c_str(), s);
          reported = true;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    } else {
      r = stream ? d_->cuStreamSynchronize(stream) : d_->cuCtxSynchronize();
    }
    if (r == 0) return;
    throw Error("nova: running a step on " + desc_.target.describe() + ": " + launch_text() +
                ", failed: " + cuda::describe_error(*d_, call, r));
  }

  /// Enqueues the all-reduces (sums in place, one NCCL group a bucket) of
  /// the collectives the plan starts after `i` launches and, with the sums
  /// on their own stream, makes `stream` wait for the ones the plan waits
  /// for before launch `i`.
  void all_reduces_at(std::size_t i, cuda::CUstream stream) const {
    const bool apart = sum_stream_ != nullptr;
    for (std::size_t ci : schedule_.started_after[i]) {
      const CollectiveDesc& c = desc_.collectives[ci];
      cuda::CUstream on = stream;
      if (apart) { // after the launches so far, on the sums' stream
        check("cuEventRecord", d_->cuEventRecord(produced_[ci], stream));
        check("cuStreamWaitEvent", d_->cuStreamWaitEvent(sum_stream_, produced_[ci], 0));
        on = sum_stream_;
      }
      if (timing_sums_) check("cuEventRecord", d_->cuEventRecord(sum_begin_[ci], on));
      nccl_check("ncclGroupStart", n_->ncclGroupStart());
      for (const BufferRef& b : c.buffers) {
        CUdeviceptr p = device_address(b);
        void* data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
        nccl_check("ncclAllReduce",
                   n_->ncclAllReduce(data, data, b.bytes / size_of(c.dtype),
                                     c.dtype == DType::f64 ? nccl::kFloat64 : nccl::kFloat32, nccl::kSum, nccl_comm_,
                                     on));
      }
      nccl_check("ncclGroupEnd", n_->ncclGroupEnd());
      if (timing_sums_) check("cuEventRecord", d_->cuEventRecord(sum_end_[ci], on));
      if (apart) check("cuEventRecord", d_->cuEventRecord(summed_[ci], sum_stream_));
    }
    if (!apart) return; // one stream: its order is the wait
    for (std::size_t ci : schedule_.waited_before[i]) {
      if (timing_sums_) check("cuEventRecord", d_->cuEventRecord(arrive_[ci], stream));
      check("cuStreamWaitEvent", d_->cuStreamWaitEvent(stream, summed_[ci], 0));
    }
  }

  /// A data-parallel step's streams and events: the launches on stream_,
  /// the sums on sum_stream_ (when the driver has streams and events).
  void prepare_sums() {
    if (desc_.collectives.empty() || !stream_ || !d_->has_events()) return;
    check("cuStreamCreate", d_->cuStreamCreate(&sum_stream_, 0));
    for (std::size_t c = 0; c < desc_.collectives.size(); ++c)
      for (auto* events : {&produced_, &summed_}) {
        events->push_back(nullptr);
        check("cuEventCreate", d_->cuEventCreate(&events->back(), cuda::kEventDisableTiming));
      }
  }

  /// This process's NCCL communicator for the group `comm` is one rank of:
  /// made once, rank 0's unique id broadcast through `comm`.
  void join_nccl(dist::Communicator& comm) const {
    if (nccl_comm_) {
      if (comm.rank() != nccl_rank_ || comm.size() != nccl_size_)
        throw DistError("nova: this GPU step joined NCCL as rank " + std::to_string(nccl_rank_) + " of " +
                        std::to_string(nccl_size_) + "; it is now called as rank " + std::to_string(comm.rank()) +
                        " of " + std::to_string(comm.size()));
      return;
    }
    std::string why;
    n_ = nccl::library(&why);
    if (!n_) throw Error("nova: a data-parallel step on " + desc_.target.describe() + ": " + why);
    nccl::UniqueId id{};
    std::vector<std::uint8_t> bytes(sizeof id.internal);
    if (comm.rank() == 0) {
      nccl_check("ncclGetUniqueId", n_->ncclGetUniqueId(&id));
      std::memcpy(bytes.data(), id.internal, bytes.size());
    }
    comm.broadcast(bytes, 0);
    if (bytes.size() != sizeof id.internal) throw DistError("nova: rank 0 sent an NCCL id of " + std::to_string(bytes.size()) + " bytes");
    std::memcpy(id.internal, bytes.data(), bytes.size());
    nccl_check("ncclCommInitRank", n_->ncclCommInitRank(&nccl_comm_, comm.size(), id, comm.rank()));
    nccl_rank_ = comm.rank();
    nccl_size_ = comm.size();
  }

  void nccl_check(const char* call, nccl::ncclResult r) const {
    if (r != 0) throw DistError("nova: a data-parallel step on " + desc_.target.describe() + ": " + nccl::describe_error(*n_, call, r));
  }

  static int tensor_map_type(MapElement t) {
    switch (t) {
    case MapElement::f32: return cuda::kTensorMapFloat32; // also tf32 operands
    case MapElement::f64: return cuda::kTensorMapFloat64;
    case MapElement::i32: return cuda::kTensorMapInt32;
    case MapElement::i64: return cuda::kTensorMapInt64;
    case MapElement::bf16: return cuda::kTensorMapBfloat16;
    case MapElement::f16: return cuda::kTensorMapFloat16;
    }
    return cuda::kTensorMapFloat32;
  }

  CUdeviceptr device_address(const BufferRef& b) const {
    return b.kind == BufferRef::Kind::input    ? inputs_[b.index]
           : b.kind == BufferRef::Kind::output ? outputs_[b.index]
                                               : arena_ + b.offset;
  }

  /// The plan as a CUDA graph on a stream of its own, when the driver has
  /// graphs and NOVA_CUDA_GRAPH is not 0. A data-parallel step's is
  /// captured at its first call, once its NCCL communicator exists: its
  /// sums' all-reduces enqueued on their own stream, which the capture
  /// takes in through the events that order it (NCCL records its kernels
  /// into the graph), so each replay runs them where the plan says.
  void capture_graph() const {
    const char* env = std::getenv("NOVA_CUDA_GRAPH");
    const bool sums = !desc_.collectives.empty();
    if (sums && !nccl_comm_) return; // at the first call
    graph_tried_ = true;
    if (!stream_ || (env && std::strcmp(env, "0") == 0) || desc_.launches.empty() || profile_ || sync_launches())
      return;
    // A graph is only faster: if the driver will not capture or instantiate
    // it, say so and launch kernel by kernel on the same stream. Its
    // launches are programmatic dependents of the ones before them
    // (programmatic_launches); a driver that will not take that in a
    // graph gets the graph without it, said once.
    bool programmatic = programmatic_launches() && !sums;
    for (;;) {
      bool capturing = false;
      try {
        check("cuStreamBeginCapture", d_->cuStreamBeginCapture(stream_, cuda::kCaptureModeThreadLocal));
        capturing = true;
        launch_plan(stream_, sums, nullptr, programmatic);
        capturing = false;
        check("cuStreamEndCapture", d_->cuStreamEndCapture(stream_, &graph_));
        check("cuGraphInstantiateWithFlags", d_->cuGraphInstantiateWithFlags(&graph_exec_, graph_, 0));
        return;
      } catch (const Error& e) {
        if (capturing) {
          cuda::CUgraph partial = nullptr;
          d_->cuStreamEndCapture(stream_, &partial); // the stream leaves capture mode either way
          if (partial) d_->cuGraphDestroy(partial);
        }
        if (graph_) d_->cuGraphDestroy(graph_);
        graph_ = nullptr;
        graph_exec_ = nullptr;
        if (programmatic) {
          std::fprintf(stderr, "%s; capturing its graph again without programmatic dependent launches "
                               "(NOVA_GPU_PDL=0 skips them)\n", e.what());
          programmatic = false;
          continue;
        }
        std::fprintf(stderr, "%s; launching its kernels one by one instead of as a CUDA graph\n", e.what());
        return;
      }
    }
  }

  /// Whether the graph's launches may start before the ones before them
  /// end: some kernel waits for its prerequisites first (the compiler puts
  /// griddepcontrol.wait there on sm_90, waits_first_), the driver has
  /// cuLaunchKernelEx, and NOVA_GPU_PDL is not 0.
  bool programmatic_launches() const {
    const char* env = std::getenv("NOVA_GPU_PDL");
    if ((env && std::strcmp(env, "0") == 0) || !d_->cuLaunchKernelEx) return false;
    return std::find(waits_first_.begin(), waits_first_.end(), true) != waits_first_.end();
  }

  /// Per kernel, whether its PTX entry waits for the grids before it
  /// (griddepcontrol.wait): only such a kernel is launched as a
  /// programmatic dependent, so a step compiled without it (another
  /// compiler, an older step) never reads what its predecessor still writes.
  void find_programmatic_waits() {
    // One pass over the PTX: each entry's name, and whether the text up to
    // the next entry waits.
    const std::string_view ptx(reinterpret_cast<const char*>(desc_.object.data()), desc_.object.size());
    std::unordered_map<std::string_view, bool> waits;
    for (std::size_t at = ptx.find(".entry "); at != std::string_view::npos;) {
      const std::size_t name = at + 7, paren = ptx.find('(', name), next = ptx.find(".entry ", name);
      if (paren == std::string_view::npos) break;
      const std::string_view body = ptx.substr(name, next == std::string_view::npos ? ptx.npos : next - name);
      waits[ptx.substr(name, paren - name)] = body.find("griddepcontrol.wait") != std::string_view::npos;
      at = next;
    }
    waits_first_.assign(desc_.kernels.size(), false);
    for (std::size_t i = 0; i < desc_.kernels.size(); ++i) {
      auto found = waits.find(desc_.kernels[i].symbol);
      waits_first_[i] = found != waits.end() && found->second;
    }
  }

  /// Everything load() took, in reverse; errors ignored (nothing to report them to).
  void release() {
    // What this executable holds goes back to its tensors before its
    // buffers go (a driver error here cannot throw out of a destructor:
    // those bytes are lost, as the device is).
    for (std::weak_ptr<detail::Storage>& w : held_)
      if (std::shared_ptr<detail::Storage> s = w.lock()) try {
          s->copy_back(this);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "nova: copying a GPU step's in-place update back failed: %s\n", e.what());
        }
    held_.clear();
    if (context_) d_->cuCtxSetCurrent(context_);
    if (nccl_comm_) n_->ncclCommDestroy(nccl_comm_);
    nccl_comm_ = nullptr;
    for (auto* events : {&produced_, &summed_, &marks_, &sum_begin_, &sum_end_, &arrive_}) {
      for (cuda::CUevent e : *events)
        if (e) d_->cuEventDestroy(e);
      events->clear();
    }
    if (sum_stream_) d_->cuStreamDestroy(sum_stream_);
    sum_stream_ = nullptr;
    if (graph_exec_) d_->cuGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
    if (graph_) d_->cuGraphDestroy(graph_);
    graph_ = nullptr;
    if (stream_) d_->cuStreamDestroy(stream_);
    stream_ = nullptr;
    for (CUdeviceptr p : owned_) d_->cuMemFree(p);
    owned_.clear();
    if (module_) d_->cuModuleUnload(module_);
    module_ = nullptr;
    if (context_) d_->cuDevicePrimaryCtxRelease(device_);
    context_ = nullptr;
  }

  /// The cubin where the description has one and the driver takes it (the
  /// device's chip, an ELF this driver knows), else the PTX, which the
  /// driver compiles for the device now.
  void load_module() {
    auto start = std::chrono::steady_clock::now();
    std::string refused;
    if (desc_.binary_format == "cubin") {
      cuda::CUresult r = d_->cuModuleLoadData(&module_, desc_.binary.data());
      if (r != 0) {
        module_ = nullptr;
        refused = cuda::describe_error(*d_, "cuModuleLoadData", r);
      }
    }
    if (!module_) {
      std::string ptx(desc_.object.begin(), desc_.object.end()); // NUL-terminated for the driver
      cuda::CUresult r = d_->cuModuleLoadData(&module_, ptx.c_str());
      if (r == kErrorUnsupportedPtxVersion) {
        // The PTX's ISA is newer than this driver compiles: say which of
        // each, and what would load (the cubin is tried first).
        module_ = nullptr;
        const std::size_t at = ptx.find(".version ");
        const std::string isa = at == std::string::npos ? "?" : ptx.substr(at + 9, ptx.find('\n', at) - at - 9);
        int version = 0;
        d_->cuDriverGetVersion(&version);
        throw Error("nova: running a step on " + desc_.target.describe() + ": " +
                    cuda::describe_error(*d_, "cuModuleLoadData", r) + ": its PTX is ISA " + isa +
                    ", newer than this driver (CUDA " + std::to_string(version / 1000) + "." +
                    std::to_string(version % 1000 / 10) + ") compiles" +
                    (refused.empty() ? ", and it carries no cubin" : ", and its cubin was refused (" + refused + ")") +
                    ": a newer driver, or the step compiled where ptxas for this GPU is (its cubin then loads)");
      }
      check("cuModuleLoadData", r);
    }
    const bool from_cubin = refused.empty() && desc_.binary_format == "cubin";
    if (explain_enabled()) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::string from = from_cubin ? "its cubin for " + desc_.target.cpu
                         : refused.empty()  ? "its PTX (no cubin), compiled by the driver,"
                                            : "its PTX, compiled by the driver (the cubin for " + desc_.target.cpu +
                                                 " was refused: " + refused + "),";
      std::fprintf(stderr, "nova: %zu GPU kernels loaded from %s in %.1f ms\n", desc_.kernels.size(), from.c_str(), ms);
    }
  }

  /// NOVA_GPU_SYNC: unset, empty or 0: off (0 returned); else the seconds
  /// after which a launch still running is reported.
  static double sync_seconds() {
    const char* v = std::getenv("NOVA_GPU_SYNC");
    if (!v || !*v) return 0;
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (*end || !(s >= 0) || s > 1e6)
      throw Error(std::string("nova: NOVA_GPU_SYNC='") + v +
                  "': expected 0 (off) or the seconds after which a launch still running is named (1: on, a second)");
    return s;
  }

  /// CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
  static constexpr cuda::CUresult kErrorUnsupportedPtxVersion = 222;

  /// A kernel's fault is reported by whichever driver call comes next (the
  /// step's wait, a later launch, a copy), not by its own launch: the
  /// message says so and how to find the kernel.
  void check(const char* call, cuda::CUresult r) const {
    if (r == 0) return;
    std::string text = "nova: running a step on " + desc_.target.describe() + ": " + cuda::describe_error(*d_, call, r);
    if (cuda::is_kernel_fault(r))
      text += "; a kernel faulted: one of this step's " + std::to_string(desc_.launches.size()) +
              " launches, or one before them on this GPU (the driver reports a fault at its next call, and the "
              "process's CUDA context is unusable from then on); NOVA_GPU_SYNC=1 waits after each launch and names "
              "the one that fails";
    throw Error(text);
  }
  /// A call about one kernel: its name in the message (built only on failure).
  void check(const char* call, const std::string& kernel, cuda::CUresult r) const {
    if (r != 0) check((std::string(call) + "(" + kernel + ")").c_str(), r);
  }

  /// What the step allocates (its arena and `io` bytes of inputs and
  /// outputs) against the device's free memory, before any of it is
  /// allocated: a step that cannot fit is a named error with the sizes,
  /// not the driver's out-of-memory at some allocation.
  void check_fits(std::uint64_t io) const {
    std::size_t free = 0, total = 0;
    if (!d_->cuMemGetInfo || d_->cuMemGetInfo(&free, &total) != 0) return; // allocation will say
    const std::uint64_t needed = desc_.arena_bytes + io;
    if (needed <= free) return;
    throw Error("nova: a step for " + desc_.target.describe() + " needs " + mib(needed) +
                " of device memory (arena " + mib(desc_.arena_bytes) + ", inputs and outputs " + mib(io) +
                "), and this GPU has " + mib(free) + " free of " + mib(total) +
                ": compile it for the memory there is (NOVA_GPU_MEMORY=" + std::to_string(free >> 20) +
                "M recomputes what it must to fit), or free the memory other steps and processes hold");
  }
  static std::string mib(std::uint64_t bytes) {
    if (bytes < (1 << 20)) return std::to_string(bytes) + " bytes";
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return text;
  }

  CUdeviceptr allocate(std::size_t bytes) {
    if (bytes == 0) return 0;
    CUdeviceptr p = 0;
    check("cuMemAlloc", d_->cuMemAlloc(&p, bytes));
    owned_.push_back(p);
    return p;
  }

  ExecutableDesc desc_;
  detail::CollectiveSchedule schedule_;
  const cuda::Driver* d_ = nullptr;
  cuda::CUdevice device_ = 0;
  cuda::CUcontext context_ = nullptr;
  cuda::CUmodule module_ = nullptr;
  std::vector<cuda::CUfunction> functions_;
  CUdeviceptr arena_ = 0;
  std::vector<CUdeviceptr> inputs_, outputs_, owned_;
  /// Each launch's arguments (tensor-map arguments: the map's address).
  std::vector<std::vector<CUdeviceptr>> args_;
  std::vector<std::vector<void*>> params_; ///< per launch, pointers to its args_
  /// The step's stream (null: a driver without streams, the default
  /// stream) and the plan's graph on it (null: kernel by kernel).
  cuda::CUstream stream_ = nullptr;
  /// The plan as a CUDA graph (a data-parallel step's is captured at its
  /// first call, once its NCCL communicator exists).
  mutable cuda::CUgraph graph_ = nullptr;
  mutable cuda::CUgraphExec graph_exec_ = nullptr;
  mutable bool graph_tried_ = false;
  /// Data-parallel steps: NCCL and this process's communicator (made at the
  /// first call, under mutex_).
  mutable const nccl::Library* n_ = nullptr;
  mutable nccl::ncclComm nccl_comm_ = nullptr;
  mutable int nccl_rank_ = -1, nccl_size_ = 0;
  /// Their stream, and per collective the events that order it against
  /// the launches: its buffers produced, its sums done (null: one stream).
  cuda::CUstream sum_stream_ = nullptr;
  std::vector<cuda::CUevent> produced_, summed_;
  /// NOVA_PROFILE: the process's counters for this executable, and the
  /// timing events around its launches (null, empty: not profiling).
  detail::ExecutableProfile* profile_ = nullptr;
  mutable std::vector<cuda::CUevent> marks_;
  /// NOVA_TIMELINE: per bucket, timing events at its sums' start and end
  /// and where the launches reach its wait (made at the first timed run),
  /// and whether this run records them.
  mutable std::vector<cuda::CUevent> sum_begin_, sum_end_, arrive_;
  mutable bool timing_sums_ = false;
  mutable std::mutex mutex_;
  /// Inputs updated in place stay on the device (NOVA_GPU_RESIDENT=0: no).
  bool resident_inputs_ = true;
  /// NOVA_GPU_SYNC=<s> (0: off): kernel by kernel (no graph), each launch
  /// waited for and named if it failed, or if it still runs after s seconds.
  double sync_report_s_ = 0;
  bool sync_launches() const { return sync_report_s_ > 0; }
  /// Per kernel, whether it waits for the grids before it first
  /// (find_programmatic_waits).
  std::vector<bool> waits_first_;
  /// Per input, the storage whose update this executable last kept.
  mutable std::vector<std::weak_ptr<detail::Storage>> held_;
};

} // namespace

std::string cannot_run_on_cuda(const ExecutableDesc& desc) {
  std::string why;
  if (!cuda_available(&why)) return why;
  const TargetDesc device = cuda_device_target();
  std::vector<std::string> missing = missing_features(desc.target, device);
  if (missing.empty()) return "";
  std::string list;
  for (const auto& f : missing) list += (list.empty() ? "" : ", ") + f;
  return "its GPU (" + device.describe() + ") lacks " + list;
}

std::shared_ptr<Executable> load_cuda_executable(const ExecutableDesc& desc) {
  if (!desc.launches.empty() && desc.object_format != "ptx")
    throw Error("nova: unknown object format '" + desc.object_format + "' for a CUDA executable");
  return std::make_shared<CudaExecutable>(desc);
}

} // namespace nova
