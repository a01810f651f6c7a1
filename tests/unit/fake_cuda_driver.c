/* fake_cuda_driver.c - a stand-in for libcuda.so.1 (loaded through
 * NOVA_CUDA_DRIVER), so the runtime's driver paths run without a GPU.
 * Default: one H200 (its cuDeviceGetAttribute values as the driver reports
 * them). Built with -DFAKE_NO_DEVICE: cuInit fails as on a machine whose
 * driver sees no GPU.
 * Running kernels: device memory is host memory; a module is its PTX text,
 * whose ".entry <name>" lines are its functions (FAKE_CUDA_OLD_DRIVER: refused as
 * PTX of an ISA newer than the driver), or a cubin (an ELF), whose
 * NUL-delimited names are (fake_cuda_refuse_cubins: refused as for another
 * GPU); a launch is logged
 * (fake_cuda_launches) and, for two kernels the tests write, executed one
 * float per thread: "nova_fake_copy" (arg 0 = arg 1) and "nova_fake_inc"
 * (arg 0 += 1); and "nova_fake_tma_copy": arg 1 = the tensor the TMA map in
 * arg 0 covers, which cuTensorMapEncodeTiled "encodes" as its address and
 * element count (dims[0] x dims[1]). Streams and graphs: a capture records
 * launches, a graph launch runs them ("graph;" in the log).
 * It is NCCL too (NOVA_NCCL_LIBRARY may name this library): communicators
 * of one unique id are threads of this process, and an in-place f32/f64
 * all-reduce sums the ranks' buffers in rank order ("allreduce(N)@S;", S
 * its stream's number; a stream waiting for an event logs "wait@S;").
 * Host-device copies are counted (fake_cuda_copies).
 * A fault: FAKE_CUDA_FAULT=<kernel> makes each executed launch of that
 * kernel fault as an out-of-bounds access does on a GPU: the context's
 * error is sticky (CUDA_ERROR_ILLEGAL_ADDRESS from every later
 * synchronization and copy) until the primary context is released.
 * FAKE_CUDA_HANG=<kernel>:<seconds>: each executed launch of that kernel
 * keeps its stream busy for that long (real time), as a kernel that hangs
 * until it is killed does: cuStreamQuery says not ready, the waits wait.
 * Time: a launch the fake executes takes one microsecond per block of its
 * grid on a clock of its own, which an event records (cuEventElapsedTime). 
 * Launches, graphs and sums may come from several threads at once. */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

int cuInit(unsigned flags) {
  (void)flags;
#ifdef FAKE_NO_DEVICE
  return 100; /* CUDA_ERROR_NO_DEVICE */
#else
  return 0;
#endif
}
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
/* FAKE_CUDA_DEVICES: how many (alike) GPUs it reports (default 1). */
static int device_count(void) {
#ifdef FAKE_NO_DEVICE
  return 0;
#else
  const char* v = getenv("FAKE_CUDA_DEVICES");
  return v && *v ? atoi(v) : 1;
#endif
}
int cuDeviceGetCount(int* n) {
  *n = device_count();
  return 0;
}
int cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *d = ordinal;
  return 0;
}
int cuDeviceGetName(char* name, int length, int d) {
  (void)d;
  strncpy(name, "NVIDIA H200", (size_t)length);
  return 0;
}
int cuDeviceGetAttribute(int* v, int attribute, int d) {
  (void)d;
  switch (attribute) {
    case 1: *v = 1024; return 0;       /* max threads per block */
    case 8: *v = 49152; return 0;      /* shared memory per block */
    case 10: *v = 32; return 0;        /* warp size */
    case 12: *v = 65536; return 0;     /* registers per block */
    case 13: *v = 1980000; return 0;   /* clock, kHz */
    case 16: *v = 132; return 0;       /* multiprocessors */
    case 36: *v = 3201000; return 0;   /* memory clock, kHz */
    case 37: *v = 6144; return 0;      /* bus width, bits */
    case 38: *v = 62914560; return 0;  /* L2 bytes */
    case 39: *v = 2048; return 0;      /* threads per SM */
    case 75: *v = 9; return 0;
    case 76: *v = 0; return 0;
    case 81: *v = 233472; return 0;    /* shared memory per SM */
    case 82: *v = 65536; return 0;     /* registers per SM */
    case 97: *v = 232448; return 0;    /* shared memory per block, opt-in */
    case 106: *v = 32; return 0;       /* blocks per SM */
    default: return 1;                 /* CUDA_ERROR_INVALID_VALUE */
  }
}
int cuDeviceTotalMem_v2(size_t* bytes, int d) {
  (void)d;
  *bytes = (size_t)150754820096ull;
  return 0;
}
int cuGetErrorName(int e, const char** s) {
  *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : e == 101 ? "CUDA_ERROR_INVALID_DEVICE" : e == 500 ? "CUDA_ERROR_NOT_FOUND"
      : e == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU" : e == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
      : e == 801 ? "CUDA_ERROR_NOT_SUPPORTED" : e == 222 ? "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
      : "CUDA_ERROR_INVALID_VALUE";
  return 0;
}
int cuGetErrorString(int e, const char** s) {
  *s = e == 100 ? "no CUDA-capable device is detected" : e == 101 ? "invalid device ordinal"
      : e == 500 ? "named symbol not found" : e == 209 ? "no kernel image is available for execution on the device"
      : e == 700 ? "an illegal memory access was encountered" : e == 801 ? "operation not supported"
      : e == 222 ? "the provided PTX was compiled with an unsupported toolchain." : "invalid argument";
  return 0;
}

/* Running kernels. */
typedef unsigned long long CUdeviceptr;
static int primary_context; /* retains not yet released */
static int faulted; /* the context's sticky error (FAKE_CUDA_FAULT), 0 if none */
/* Every call after a fault fails with it (until the context is released). */
#define RETURN_IF_FAULTED() do { int f_ = __atomic_load_n(&faulted, __ATOMIC_SEQ_CST); if (f_) return f_; } while (0)
static long long busy_until_ns; /* FAKE_CUDA_HANG: when the hanging launch ends (CLOCK_MONOTONIC) */
static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
static void wait_until_idle(void) {
  long long left;
  while ((left = __atomic_load_n(&busy_until_ns, __ATOMIC_SEQ_CST) - now_ns()) > 0) {
    struct timespec t = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    nanosleep(&t, NULL);
  }
}
static int context_device; /* the device of the last primary context retained (fake_cuda_context_device) */
int cuDevicePrimaryCtxRetain(void** ctx, int d) {
  __atomic_store_n(&context_device, d, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&primary_context, 1, __ATOMIC_SEQ_CST);
  *ctx = &primary_context;
  return 0;
}
int fake_cuda_context_device(void) { return __atomic_load_n(&context_device, __ATOMIC_SEQ_CST); }
int cuDevicePrimaryCtxRelease_v2(int d) {
  (void)d;
  int before = __atomic_fetch_sub(&primary_context, 1, __ATOMIC_SEQ_CST);
  if (before == 1) __atomic_store_n(&faulted, 0, __ATOMIC_SEQ_CST); /* the context goes, its error with it */
  return before > 0 ? 0 : 1;
}
int cuCtxSetCurrent(void* ctx) { return ctx == &primary_context ? 0 : 1; }
int cuCtxSynchronize(void) {
  wait_until_idle();
  return __atomic_load_n(&faulted, __ATOMIC_SEQ_CST);
}
/* A module: its text and the names of the functions looked up in it (a
 * function handle points at its name), freed together by cuModuleUnload. */
struct module { char* text; size_t size; int elf; char names[512][128]; int count; };
static int loaded_modules, cubins_loaded, refuse_cubins;
int cuModuleLoadData(void** m, const void* image) {
  const unsigned char* bytes = image;
  int elf = memcmp(bytes, "\x7f" "ELF", 4) == 0;
  size_t size = strlen((const char*)image) + 1;
  if (elf) {
    /* A cubin: as long as its section headers reach (e_shoff + e_shnum x
     * e_shentsize, at least its 64-byte header); its functions are the
     * names in it ("\0name\0"). */
    unsigned long long shoff;
    unsigned short shentsize, shnum;
    memcpy(&shoff, bytes + 40, 8);
    memcpy(&shentsize, bytes + 58, 2);
    memcpy(&shnum, bytes + 60, 2);
    size = shoff + (size_t)shnum * shentsize;
    if (size < 64) size = 64;
    if (__atomic_load_n(&refuse_cubins, __ATOMIC_SEQ_CST)) return 209; /* CUDA_ERROR_NO_BINARY_FOR_GPU */
  } else if (getenv("FAKE_CUDA_OLD_DRIVER")) {
    return 222; /* CUDA_ERROR_UNSUPPORTED_PTX_VERSION: PTX newer than this driver */
  }
  struct module* mod = calloc(1, sizeof *mod);
  if (!mod || !(mod->text = malloc(size))) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  memcpy(mod->text, image, size);
  mod->size = size;
  mod->elf = elf;
  __atomic_add_fetch(&loaded_modules, 1, __ATOMIC_SEQ_CST);
  if (elf) __atomic_add_fetch(&cubins_loaded, 1, __ATOMIC_SEQ_CST);
  *m = mod;
  return 0;
}
int cuModuleUnload(void* m) {
  struct module* mod = m;
  free(mod->text);
  free(mod);
  __atomic_sub_fetch(&loaded_modules, 1, __ATOMIC_SEQ_CST);
  return 0;
}
int cuModuleGetFunction(void** f, void* m, const char* name) {
  struct module* mod = m;
  char entry[160];
  int n = mod->elf ? snprintf(entry, sizeof entry, "%c%s%c", 0, name, 0) : snprintf(entry, sizeof entry, ".entry %s(", name);
  if (!memmem(mod->text, mod->size, entry, (size_t)n)) return 500; /* CUDA_ERROR_NOT_FOUND */
  if (mod->count == 512 || strlen(name) >= 128) return 1;
  strcpy(mod->names[mod->count], name);
  *f = mod->names[mod->count++];
  return 0;
}
static int max_dynamic_shared;
int cuFuncSetAttribute(void* f, int attribute, int value) {
  (void)f;
  if (attribute != 8 || value > 232448) return 1;
  max_dynamic_shared = value;
  return 0;
}
int cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  void* m = calloc(1, bytes);
  if (!m) return 2;
  *p = (CUdeviceptr)(size_t)m;
  return 0;
}
int cuMemFree_v2(CUdeviceptr p) { free((void*)(size_t)p); return 0; }
/* FAKE_CUDA_FREE_MEMORY: the bytes it says are free (default: all but 1 GiB). */
int cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  const char* v = getenv("FAKE_CUDA_FREE_MEMORY");
  *total = (size_t)150754820096ull;
  *free_bytes = v && *v ? (size_t)strtoull(v, NULL, 10) : *total - ((size_t)1 << 30);
  return 0;
}
/* Copies each way so far (fake_cuda_copies). */
static int copies_in, copies_out;
int cuMemcpyHtoD_v2(CUdeviceptr to, const void* from, size_t bytes) {
  RETURN_IF_FAULTED();
  __atomic_add_fetch(&copies_in, 1, __ATOMIC_RELAXED);
  memcpy((void*)(size_t)to, from, bytes);
  return 0;
}
int cuMemcpyDtoH_v2(void* to, CUdeviceptr from, size_t bytes) {
  RETURN_IF_FAULTED();
  __atomic_add_fetch(&copies_out, 1, __ATOMIC_RELAXED);
  memcpy(to, (const void*)(size_t)from, bytes);
  return 0;
}
void fake_cuda_copies(int* in, int* out) {
  *in = __atomic_load_n(&copies_in, __ATOMIC_RELAXED);
  *out = __atomic_load_n(&copies_out, __ATOMIC_RELAXED);
}

static char launch_log[16384];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static void log_text(const char* text) {
  pthread_mutex_lock(&log_lock);
  size_t used = strlen(launch_log);
  snprintf(launch_log + used, sizeof launch_log - used, "%s", text);
  pthread_mutex_unlock(&log_lock);
}
/* One launch: its kernel (a function handle is its name), shape and the
 * values of its (at most 2) pointer arguments. */
struct launch { const char* name; unsigned gx, bx, shared; CUdeviceptr args[2]; unsigned cluster; int programmatic; };
/* The fake GPU's clock, in microseconds: each executed launch adds its blocks. */
static unsigned long long fake_clock_us;
static void execute_kernel(const struct launch* l) {
  if (__atomic_load_n(&faulted, __ATOMIC_SEQ_CST)) return; /* a faulted context runs nothing more */
  __atomic_add_fetch(&fake_clock_us, (unsigned long long)l->gx, __ATOMIC_SEQ_CST);
  char line[256];
  if (l->cluster > 1)
    snprintf(line, sizeof line, "%s<<<%u,%u,%u,cluster %u%s>>>;", l->name, l->gx, l->bx, l->shared, l->cluster,
             l->programmatic ? ",programmatic" : "");
  else
    snprintf(line, sizeof line, "%s<<<%u,%u,%u%s>>>;", l->name, l->gx, l->bx, l->shared,
             l->programmatic ? ",programmatic" : "");
  log_text(line);
  const char* hang = getenv("FAKE_CUDA_HANG");
  size_t named = hang ? strcspn(hang, ":") : 0;
  if (hang && hang[named] == ':' && strlen(l->name) == named && strncmp(hang, l->name, named) == 0)
    __atomic_store_n(&busy_until_ns, now_ns() + (long long)(atof(hang + named + 1) * 1e9), __ATOMIC_SEQ_CST);
  const char* fault = getenv("FAKE_CUDA_FAULT");
  if (fault && strcmp(fault, l->name) == 0) {
    __atomic_store_n(&faulted, 700, __ATOMIC_SEQ_CST); /* CUDA_ERROR_ILLEGAL_ADDRESS */
    return;
  }
  size_t n = (size_t)l->gx * l->bx;
  float* a = (float*)(size_t)l->args[0];
  if (strcmp(l->name, "nova_fake_copy") == 0) {
    const float* b = (const float*)(size_t)l->args[1];
    for (size_t i = 0; i < n; ++i) a[i] = b[i];
  } else if (strcmp(l->name, "nova_fake_inc") == 0) {
    for (size_t i = 0; i < n; ++i) a[i] += 1.0f;
  } else if (strcmp(l->name, "nova_fake_tma_copy") == 0) {
    const unsigned long long* map = (const unsigned long long*)a; /* arg 0: the map's device (= host) address */
    float* out = (float*)(size_t)l->args[1];
    const float* in = (const float*)(size_t)map[0];
    for (unsigned long long i = 0; i < map[1]; ++i) out[i] = in[i];
  }
}
/* The arguments of the kernels it runs; any other kernel (a compiled step's,
 * whose real code the fake cannot run) is logged only, its arguments unread. */
static int arguments_of(const char* name) {
  return strcmp(name, "nova_fake_inc") == 0 ? 1
      : strcmp(name, "nova_fake_copy") == 0 || strcmp(name, "nova_fake_tma_copy") == 0 ? 2 : 0;
}

/* Streams and graphs: a capture records what is enqueued on any stream of
 * the capturing thread instead of running it (kernels, stream waits, NCCL
 * all-reduces: a data-parallel step's graph forks to the sums' stream and
 * joins back through events); a graph is that, run in order by
 * cuGraphLaunch (logged "graph;"). */
enum node_kind { node_kernel, node_wait, node_all_reduce };
struct node {
  enum node_kind kind;
  struct launch launch;      /* node_kernel */
  int stream;                /* node_wait, node_all_reduce: the stream's number */
  void* buffer;              /* node_all_reduce */
  size_t count;
  int dtype;
  void* comm;
};
struct graph { int count; struct node nodes[2048]; };
static __thread struct graph* capture; /* this thread's graph being captured, or null */
static int all_reduce(void* buffer, size_t count, int dtype, void* comm, int stream);
static void execute(const struct node* n) {
  char line[32];
  switch (n->kind) {
  case node_kernel: execute_kernel(&n->launch); break;
  case node_wait:
    snprintf(line, sizeof line, "wait@%d;", n->stream);
    log_text(line);
    break;
  case node_all_reduce: all_reduce(n->buffer, n->count, n->dtype, n->comm, n->stream); break;
  }
}
static int record(struct node n) {
  if (capture->count == 2048) return 2;
  capture->nodes[capture->count++] = n;
  return 0;
}
static int graphs_held, streams_held, events_held, next_stream_id;
/* A stream: numbered from 1 in creation order (the default stream is 0). */
struct fake_stream { unsigned magic; int id; };
#define STREAM_MAGIC 0x5354524du
static int is_stream(void* s) { return s && ((struct fake_stream*)s)->magic == STREAM_MAGIC; }
static int stream_id(void* s) { return s ? ((struct fake_stream*)s)->id : 0; }
int cuStreamCreate(void** stream, unsigned flags) {
  (void)flags;
  struct fake_stream* s = malloc(sizeof *s);
  if (!s) return 2;
  s->magic = STREAM_MAGIC;
  s->id = __atomic_add_fetch(&next_stream_id, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&streams_held, 1, __ATOMIC_SEQ_CST);
  *stream = s;
  return 0;
}
int cuStreamDestroy_v2(void* stream) {
  if (!is_stream(stream)) return 400;
  ((struct fake_stream*)stream)->magic = 0;
  free(stream);
  __atomic_sub_fetch(&streams_held, 1, __ATOMIC_SEQ_CST);
  return 0;
}
int cuStreamSynchronize(void* stream) {
  if (!is_stream(stream)) return 400;
  wait_until_idle();
  return __atomic_load_n(&faulted, __ATOMIC_SEQ_CST);
}
int cuStreamQuery(void* stream) {
  if (!is_stream(stream)) return 400;
  if (now_ns() < __atomic_load_n(&busy_until_ns, __ATOMIC_SEQ_CST)) return 600; /* CUDA_ERROR_NOT_READY */
  return __atomic_load_n(&faulted, __ATOMIC_SEQ_CST);
}
/* Events: work here runs when it is enqueued, so an event orders nothing;
 * a wait is logged with the waiting stream ("wait@N;"). An event records
 * the fake clock when recorded outside a capture (timing events only). */
struct fake_event { unsigned flags; int recorded; unsigned long long us; };
int cuEventCreate(void** event, unsigned flags) {
  struct fake_event* e = calloc(1, sizeof *e);
  if (!e) return 2;
  e->flags = flags;
  *event = e;
  __atomic_add_fetch(&events_held, 1, __ATOMIC_SEQ_CST);
  return 0;
}
int cuEventDestroy_v2(void* event) { free(event); __atomic_sub_fetch(&events_held, 1, __ATOMIC_SEQ_CST); return 0; }
int cuEventRecord(void* event, void* stream) {
  if (!event || (stream && !is_stream(stream))) return 400;
  if (!capture) {
    struct fake_event* e = event;
    e->recorded = 1;
    e->us = __atomic_load_n(&fake_clock_us, __ATOMIC_SEQ_CST);
  }
  return 0;
}
int cuEventElapsedTime(float* ms, void* start, void* end) {
  const struct fake_event *a = start, *b = end;
  if (!ms || !a || !b) return 400;
  if ((a->flags | b->flags) & 2) return 400;   /* CUDA_ERROR_INVALID_HANDLE: an event without timing */
  if (!a->recorded || !b->recorded) return 600; /* CUDA_ERROR_NOT_READY */
  *ms = (float)((double)(b->us - a->us) / 1000.0);
  return 0;
}
int cuStreamWaitEvent(void* stream, void* event, unsigned flags) {
  if (!event || flags || (stream && !is_stream(stream))) return 400;
  if (capture) {
    struct node n = {node_wait, {0}, stream_id(stream), NULL, 0, 0, NULL};
    return record(n);
  }
  char line[32];
  snprintf(line, sizeof line, "wait@%d;", stream_id(stream));
  log_text(line);
  return 0;
}
int cuStreamBeginCapture_v2(void* stream, int mode) {
  if (!is_stream(stream) || capture || mode < 0 || mode > 2) return 1;
  capture = calloc(1, sizeof *capture);
  return capture ? 0 : 2;
}
int cuStreamEndCapture(void* stream, void** graph) {
  if (!is_stream(stream) || !capture) return 1;
  *graph = capture;
  capture = NULL;
  __atomic_add_fetch(&graphs_held, 1, __ATOMIC_SEQ_CST);
  return 0;
}
int cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
  (void)flags;
  if (getenv("FAKE_CUDA_GRAPH_FAILS")) return 1; /* as a driver that cannot instantiate it */
  struct graph* copy = malloc(sizeof *copy);
  if (!copy) return 2;
  memcpy(copy, graph, sizeof *copy);
  __atomic_add_fetch(&graphs_held, 1, __ATOMIC_SEQ_CST);
  *exec = copy;
  return 0;
}
int cuGraphLaunch(void* exec, void* stream) {
  if (!is_stream(stream)) return 1;
  RETURN_IF_FAULTED();
  const struct graph* g = exec;
  log_text("graph;");
  for (int i = 0; i < g->count; ++i) execute(&g->nodes[i]);
  return 0;
}
int cuGraphExecDestroy(void* exec) { free(exec); __atomic_sub_fetch(&graphs_held, 1, __ATOMIC_SEQ_CST); return 0; }
int cuGraphDestroy(void* graph) { free(graph); __atomic_sub_fetch(&graphs_held, 1, __ATOMIC_SEQ_CST); return 0; }

int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  if (extra || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx < 1 || bx > 1024) return 1;
  if (stream && !is_stream(stream)) return 400; /* CUDA_ERROR_INVALID_HANDLE */
  RETURN_IF_FAULTED();
  struct launch l = {(const char*)f, gx, bx, shared, {0, 0}, 1, 0};
  for (int i = 0; i < arguments_of(l.name); ++i) l.args[i] = *(CUdeviceptr*)params[i]; /* values, as CUDA copies them */
  if (capture && stream) {
    struct node n = {node_kernel, l, stream_id(stream), NULL, 0, 0, NULL};
    return record(n);
  }
  execute_kernel(&l);
  return 0;
}
/* CUlaunchConfig and CUlaunchAttribute (cuda.h); only the cluster
 * attribute (4) is taken, its x dividing the grid, at most 8. */
struct launch_attribute { int id; char pad[4]; unsigned value[16]; };
struct launch_config {
  unsigned gx, gy, gz, bx, by, bz, shared;
  void* stream;
  struct launch_attribute* attrs;
  unsigned count;
};
/* FAKE_CUDA_CLUSTERS: how many clusters the fake GPU holds at once (default 66). */
int cuOccupancyMaxActiveClusters(int* clusters, void* f, const struct launch_config* c) {
  (void)f;
  if (!c || c->count != 1 || c->attrs[0].id != 4) return 1;
  const char* v = getenv("FAKE_CUDA_CLUSTERS");
  *clusters = v && *v ? atoi(v) : 66;
  return 0;
}
/* Attributes taken: the cluster (4) and programmatic stream serialization
 * (6, logged ",programmatic"; FAKE_CUDA_PDL_FAILS: refused in a capture, as
 * by a driver whose graphs do not take it). */
int cuLaunchKernelEx(const struct launch_config* c, void* f, void** params, void** extra) {
  unsigned cluster = 1;
  int programmatic = 0;
  for (unsigned i = 0; i < c->count; ++i) {
    if (c->attrs[i].id == 6 && c->attrs[i].value[0] <= 1) {
      programmatic = (int)c->attrs[i].value[0];
      if (programmatic && capture && getenv("FAKE_CUDA_PDL_FAILS")) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
      continue;
    }
    if (c->attrs[i].id != 4 || c->attrs[i].value[1] != 1 || c->attrs[i].value[2] != 1) return 1;
    cluster = c->attrs[i].value[0];
  }
  if (cluster < 1 || cluster > 8 || c->gx % cluster) return 1; /* CUDA_ERROR_INVALID_VALUE */
  if (extra || c->gy != 1 || c->gz != 1 || c->by != 1 || c->bz != 1 || c->bx < 1 || c->bx > 1024) return 1;
  if (c->stream && !is_stream(c->stream)) return 400;
  RETURN_IF_FAULTED();
  struct launch l = {(const char*)f, c->gx, c->bx, c->shared, {0, 0}, cluster, programmatic};
  for (int i = 0; i < arguments_of(l.name); ++i) l.args[i] = *(CUdeviceptr*)params[i];
  if (capture && c->stream) {
    struct node n = {node_kernel, l, stream_id(c->stream), NULL, 0, 0, NULL};
    return record(n);
  }
  execute_kernel(&l);
  return 0;
}
/* A map: its tensor's address and element count (the real driver's
 * encoding is opaque); 64-byte aligned, as cuda.h's CUtensorMap; strides
 * multiples of 16 bytes, the first at least a row of dims[0] elements. */
int cuTensorMapEncodeTiled(void* map, int type, unsigned rank, void* address, const unsigned long long* dims,
                           const unsigned long long* strides, const unsigned* box, const unsigned* element_strides,
                           int interleave, int swizzle, int l2, int fill) {
  (void)box; (void)element_strides; (void)interleave; (void)l2; (void)fill;
  static const unsigned element_bytes[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4}; /* CUtensorMapDataType */
  if (((size_t)map & 63) || type < 0 || type > 12 || rank < 1 || rank > 5 || swizzle < 0 || swizzle > 3) return 1;
  for (unsigned d = 1; d < rank; ++d)
    if (strides[d - 1] % 16 || (d == 1 && strides[0] < dims[0] * element_bytes[type])) return 1;
  unsigned long long* m = map;
  memset(map, 0, 128);
  m[0] = (unsigned long long)(size_t)address;
  m[1] = dims[0];
  for (unsigned d = 1; d < rank; ++d) m[1] *= dims[d];
  return 0;
}
/* NCCL. */
typedef struct { char internal[128]; } fake_nccl_id;
struct nccl_group {
  fake_nccl_id id;
  int nranks, arrived, generation, failed;
  void* buffers[16];
  size_t count;
  int dtype;
  pthread_mutex_t lock;
  pthread_cond_t done;
};
static struct nccl_group nccl_groups[8];
static int nccl_group_count, nccl_comms_held;
static pthread_mutex_t nccl_groups_lock = PTHREAD_MUTEX_INITIALIZER;
struct nccl_comm { struct nccl_group* group; int rank; };
int ncclGetUniqueId(fake_nccl_id* id) {
  static int next;
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "fake-nccl-%d", __atomic_add_fetch(&next, 1, __ATOMIC_SEQ_CST));
  return 0;
}
int ncclCommInitRank(void** comm, int nranks, fake_nccl_id id, int rank) {
  if (nranks < 1 || nranks > 16 || rank < 0 || rank >= nranks) return 4; /* ncclInvalidArgument */
  pthread_mutex_lock(&nccl_groups_lock);
  struct nccl_group* g = NULL;
  for (int i = 0; i < nccl_group_count; ++i)
    if (memcmp(&nccl_groups[i].id, &id, sizeof id) == 0) g = &nccl_groups[i];
  if (!g && nccl_group_count < 8) {
    g = &nccl_groups[nccl_group_count++];
    memset(g, 0, sizeof *g);
    g->id = id;
    g->nranks = nranks;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->done, NULL);
  }
  pthread_mutex_unlock(&nccl_groups_lock);
  if (!g || g->nranks != nranks) return 4;
  struct nccl_comm* c = malloc(sizeof *c);
  if (!c) return 1;
  c->group = g;
  c->rank = rank;
  __atomic_add_fetch(&nccl_comms_held, 1, __ATOMIC_SEQ_CST);
  *comm = c;
  return 0;
}
int ncclCommDestroy(void* comm) { free(comm); __atomic_sub_fetch(&nccl_comms_held, 1, __ATOMIC_SEQ_CST); return 0; }
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
const char* ncclGetErrorString(int r) { return r == 4 ? "invalid argument" : r == 5 ? "invalid usage" : "unhandled error"; }
/* In place, f32 (7) or f64 (8), sum (0): blocks until every rank of the
 * group has called it, then every buffer holds the rank-order sum. */
int ncclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream) {
  if ((stream && !is_stream(stream)) || send != recv || op != 0 || (dtype != 7 && dtype != 8)) return 5; /* ncclInvalidUsage */
  if (capture && stream) { /* captured: it runs at each replay */
    struct node n = {node_all_reduce, {0}, stream_id(stream), recv, count, dtype, comm};
    return record(n) ? 1 : 0;
  }
  return all_reduce(recv, count, dtype, comm, stream_id(stream));
}
static int all_reduce(void* recv, size_t count, int dtype, void* comm, int stream) {
  struct nccl_comm* c = comm;
  struct nccl_group* g = c->group;
  pthread_mutex_lock(&g->lock);
  int generation = g->generation;
  if (g->arrived == 0) {
    g->count = count;
    g->dtype = dtype;
  } else if (g->count != count || g->dtype != dtype) {
    g->failed = 1;
  }
  g->buffers[c->rank] = recv;
  if (++g->arrived == g->nranks) {
    for (size_t i = 0; i < count && !g->failed; ++i) {
      double sum = 0;
      for (int r = 0; r < g->nranks; ++r)
        sum += dtype == 7 ? (double)((float*)g->buffers[r])[i] : ((double*)g->buffers[r])[i];
      for (int r = 0; r < g->nranks; ++r) {
        if (dtype == 7) ((float*)g->buffers[r])[i] = (float)sum;
        else ((double*)g->buffers[r])[i] = sum;
      }
    }
    g->arrived = 0;
    ++g->generation;
    pthread_cond_broadcast(&g->done);
  } else {
    while (generation == g->generation) pthread_cond_wait(&g->done, &g->lock);
  }
  int failed = g->failed;
  pthread_mutex_unlock(&g->lock);
  if (c->rank == 0) {
    char line[64];
    snprintf(line, sizeof line, "allreduce(%zu)@%d;", count, stream);
    log_text(line);
  }
  return failed ? 5 : 0;
}

/* For the tests: every launch so far, "name<<<blocks,threads,shared>>>;" each,
 * and what is still held (modules loaded, primary context retains). */
const char* fake_cuda_launches(void) { return launch_log; }
/* Cubins loaded so far; with refuse != 0 every cubin is refused as one for
 * another GPU (CUDA_ERROR_NO_BINARY_FOR_GPU). */
int fake_cuda_cubins_loaded(void) { return cubins_loaded; }
void fake_cuda_refuse_cubins(int refuse) { __atomic_store_n(&refuse_cubins, refuse, __ATOMIC_SEQ_CST); }
int fake_cuda_held(void) {
  return loaded_modules + primary_context + graphs_held + streams_held + events_held + nccl_comms_held;
}
