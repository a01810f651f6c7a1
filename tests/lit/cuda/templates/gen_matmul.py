#!/usr/bin/env python3
"""Reference generator for Nova's lane-level tensor-core matmul template (MLIR 19, nvgpu dialect).

One kernel description (`kernel(b, cfg)`) is run through two builders:
  * TextBuilder  -> MLIR text (gpu.module / gpu.func ... kernel), what Nova's C++ emitter must produce;
  * EvalBuilder  -> executes the same op sequence lane-exactly in Python (all threads of a block in lockstep,
                    warp-level ldmatrix/mma with the lane maps of notes/ptx-semantics.md §1/§2/§4, cp.async groups
                    completed at the covering wait) and checks C == A x B, shared-memory hazards and bank conflicts.

Usage: gen_matmul.py {f16,bf16,tf32} [--bx2] [-o out.mlir] [--check]
  --bx2   : f16/bf16 B fragments via ldmatrix x2.trans (default: x4.trans covering two n-blocks)
  --check : also emulate (pure Python, ~5-10 s for 256^3) and report mismatches, hazards, bank conflicts.
  --mnk M,N,K : other static shapes (multiples of 128,128,BK).
Templates in this directory were made with: gen_matmul.py KIND -o matmul_KIND_nn.mlir.txt
Lowering / ptxas numbers / pitfalls: /work/shared/notes/gpu-kernel-template.md
C[M,N] f32 row-major = A[M,K] x B[K,N], both row-major ("NN"). Block 128x128, 4 warps (2x2) of 64x64, 2 stages.
"""
import argparse, math, random, struct, sys

# ----------------------------------------------------------------------------------------------------------------------
# configuration


class Cfg:
    def __init__(self, kind, bx2=False, M=256, N=256, K=256):
        self.kind = kind                      # 'f16' | 'bf16' | 'tf32'
        self.M, self.N, self.K = M, N, K
        self.BM, self.BN = 128, 128
        self.BK = 16 if kind == 'tf32' else 32
        self.WM, self.WN = 64, 64             # warp tile
        self.WARPS_M, self.WARPS_N = 2, 2
        self.NT = 32 * self.WARPS_M * self.WARPS_N   # 128 threads
        self.et = {'f16': 'f16', 'bf16': 'bf16', 'tf32': 'f32'}[kind]
        self.ebytes = 4 if kind == 'tf32' else 2
        self.epc = 16 // self.ebytes          # elements per 16-byte chunk (8 or 4)
        self.mk = 8 if kind == 'tf32' else 16  # mma K
        self.bx2 = bx2
        # XOR swizzle of the 16-byte chunk index: chunk' = chunk ^ (((row >> rs) & rm) << cs)
        #  A (BM x BK, 64-byte rows, 4 chunks): MLIR nvgpu-optimize-shared-memory formula: rs=1, rm=3, cs=0
        #  B (BK x BN): f16 256-byte rows (16 chunks): MLIR formula rs=0, rm=15, cs=0
        #               tf32 512-byte rows (32 chunks): (row & 3) << 1 -- the MLIR formula (row & 31) leaves 2-way
        #               conflicts on the scalar B loads (k = t + 4i, n = g); this one is conflict-free.
        self.swzA = (1, 3, 0)
        self.swzB = (0, 3, 1) if kind == 'tf32' else (0, 15, 0)
        assert self.M % self.BM == 0 and self.N % self.BN == 0 and self.K % self.BK == 0
        self.KT = self.K // self.BK


# ----------------------------------------------------------------------------------------------------------------------
# text builder


class V:
    def __init__(self, name, ty):
        self.name, self.ty = name, ty

    def __str__(self):
        return self.name


class TextBuilder:
    def __init__(self, cfg):
        self.cfg = cfg
        self.lines, self.consts, self.cache = [], {}, {}
        self.n = 0
        self.ind = 6
        self.globals = []

    def fresh(self, hint='v'):
        self.n += 1
        return f'%{hint}{self.n}'

    def emit(self, s):
        self.lines.append(' ' * self.ind + s)

    def c(self, v):  # index constant
        if isinstance(v, V):
            return v
        if v not in self.consts:
            self.consts[v] = V(f'%c{v}' if v >= 0 else f'%cm{-v}', 'index')
        return self.consts[v]

    FOLD = {'addi': lambda x, y: x + y, 'muli': lambda x, y: x * y, 'divui': lambda x, y: x // y,
            'remui': lambda x, y: x % y, 'shrui': lambda x, y: x >> y, 'shli': lambda x, y: x << y,
            'andi': lambda x, y: x & y, 'xori': lambda x, y: x ^ y}

    def _bin(self, op, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return self.FOLD[op](a, b)
        if op == 'addi' and (a == 0 or b == 0):
            return b if a == 0 else a
        if op == 'muli' and (a == 1 or b == 1):
            return b if a == 1 else a
        a, b = self.c(a), self.c(b)
        key = (op, a.name, b.name)
        if key in self.cache:  # builder-level CSE only at the top nesting level (see for_/if_)
            return self.cache[key]
        r = V(self.fresh('i'), 'index')
        self.emit(f'{r} = arith.{op} {a}, {b} : index')
        self.cache[key] = r
        return r

    add = lambda s, a, b: s._bin('addi', a, b)
    mul = lambda s, a, b: s._bin('muli', a, b)
    div = lambda s, a, b: s._bin('divui', a, b)
    rem = lambda s, a, b: s._bin('remui', a, b)
    shr = lambda s, a, b: s._bin('shrui', a, b)
    shl = lambda s, a, b: s._bin('shli', a, b)
    and_ = lambda s, a, b: s._bin('andi', a, b)
    xor = lambda s, a, b: s._bin('xori', a, b)

    def lt(self, a, b):
        r = V(self.fresh('p'), 'i1')
        self.emit(f'{r} = arith.cmpi ult, {self.c(a)}, {self.c(b)} : index')
        return r

    def thread_id(self):
        r = V('%tid', 'index'); self.emit(f'{r} = gpu.thread_id x'); return r

    def block_id(self, d):
        r = V(f'%bid{d}', 'index'); self.emit(f'{r} = gpu.block_id {d}'); return r

    def smem(self, name, shape, et):
        ty = f'memref<{"x".join(map(str, shape))}x{et}, #gpu.address_space<workgroup>>'
        self.globals.append(f'    memref.global "private" @{name} : {ty} {{alignment = 1024 : i64}}')
        r = V(f'%{name}', ty)
        self.emit(f'{r} = memref.get_global @{name} : {ty}')
        return r

    def idx(self, l):
        return ', '.join(str(self.c(x)) for x in l)

    def async_copy(self, src, si, dst, di, n):
        r = V(self.fresh('tok'), '!nvgpu.device.async.token')
        self.emit(f'{r} = nvgpu.device_async_copy {src}[{self.idx(si)}], {dst}[{self.idx(di)}], {n} {{bypassL1}} '
                  f': {src.ty} to {dst.ty}')
        return r

    def create_group(self, toks):
        r = V(self.fresh('grp'), '!nvgpu.device.async.token')
        self.emit(f'{r} = nvgpu.device_async_create_group {", ".join(map(str, toks))}'.rstrip())
        return r

    def wait(self, grp, n):
        self.emit(f'nvgpu.device_async_wait {grp} {{numGroups = {n} : i32}}')

    def barrier(self):
        self.emit('gpu.barrier')

    def ldmatrix(self, mem, ii, ntiles, trans):
        per = 4 // self.cfg.ebytes  # elements per 32-bit register
        ty = f'vector<{ntiles}x{per}x{self.cfg.et}>'
        r = V(self.fresh('ld'), ty)
        self.emit(f'{r} = nvgpu.ldmatrix {mem}[{self.idx(ii)}] {{numTiles = {ntiles} : i32, transpose = '
                  f'{"true" if trans else "false"}}} : {mem.ty} -> {ty}')
        return r

    def split_rows(self, v, rows):  # vector<4x2xT> -> vector<2x2xT> rows [rows, rows+2)
        ty = v.ty.replace('vector<4x', 'vector<2x')
        r = V(self.fresh('bf'), ty)
        self.emit(f'{r} = vector.extract_strided_slice {v} {{offsets = [{rows}, 0], sizes = [2, {v.ty.split("x")[1]}], '
                  f'strides = [1, 1]}} : {v.ty} to {ty}')
        return r

    def load(self, mem, ii):
        r = V(self.fresh('s'), self.cfg.et)
        self.emit(f'{r} = memref.load {mem}[{self.idx(ii)}] : {mem.ty}')
        return r

    def build_b_tf32(self, scalars):  # 2 x f32 -> vector<2x1xf32>
        z = self.zero_vec('vector<2x1xf32>')
        cur = z
        for i, s in enumerate(scalars):
            r = V(self.fresh('bv'), 'vector<2x1xf32>')
            self.emit(f'{r} = vector.insert {s}, {cur} [{i}, 0] : f32 into vector<2x1xf32>')
            cur = r
        return cur

    def zero_vec(self, ty):
        key = ('zero', ty)
        if key not in self.consts:
            nm = '%z_' + ty.replace('vector<', '').replace('>', '').replace('x', '_')
            self.consts[key] = V(nm, ty)
        return self.consts[key]

    def mma(self, a, bb, c):
        cfg = self.cfg
        if cfg.kind == 'bf16':   # nvgpu.mma.sync cannot deduce PTX types for bf16 in MLIR 19
            return self._mma_bf16(a, bb, c)
        r = V(self.fresh('acc'), 'vector<2x2xf32>')
        shape = '[16, 8, 8], tf32Enabled' if cfg.kind == 'tf32' else '[16, 8, 16]'
        self.emit(f'{r} = nvgpu.mma.sync({a}, {bb}, {c}) {{mmaShape = {shape}}} : ({a.ty}, {bb.ty}, {c.ty}) -> {r.ty}')
        return r

    def regs_i32(self, v):  # vector<Rx2xbf16> -> R x i32 (one row at a time; a 2-D vector.bitcast is not lowered)
        if hasattr(v, 'i32'):
            return v.i32
        out = []
        R = int(v.ty.split('<')[1].split('x')[0])
        for j in range(R):
            row, bc, e = self.fresh('r'), self.fresh('r'), self.fresh('r')
            self.emit(f'{row} = vector.extract {v}[{j}] : vector<2xbf16> from {v.ty}')
            self.emit(f'{bc} = vector.bitcast {row} : vector<2xbf16> to vector<1xi32>')
            self.emit(f'{e} = vector.extract {bc}[0] : i32 from vector<1xi32>')
            out.append(e)
        v.i32 = out
        return out

    def _mma_bf16(self, a, bb, c):
        ai, bi = self.regs_i32(a), self.regs_i32(bb)
        cs = []
        for i in range(4):
            e = self.fresh('cf')
            self.emit(f'{e} = vector.extract {c}[{i >> 1}, {i & 1}] : f32 from vector<2x2xf32>')
            cs.append(e)
        d = self.fresh('d')
        self.emit(f'{d} = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"({", ".join(ai + bi + cs)}) '
                  f': (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>')
        cur = self.zero_vec('vector<2x2xf32>')
        for i in range(4):
            e = self.fresh('df')
            self.emit(f'{e} = llvm.extractvalue {d}[{i}] : !llvm.struct<(f32, f32, f32, f32)>')
            r = V(self.fresh('acc'), 'vector<2x2xf32>')
            self.emit(f'{r} = vector.insert {e}, {cur} [{i >> 1}, {i & 1}] : f32 into vector<2x2xf32>')
            cur = r
        return cur

    def store_rows(self, acc, mem, i0, i1):  # row 0 of acc -> C[i0], row 1 -> C[i1], vector<2xf32> each
        for j, ii in enumerate((i0, i1)):
            e = self.fresh('o')
            self.emit(f'{e} = vector.extract {acc}[{j}] : vector<2xf32> from vector<2x2xf32>')
            self.emit(f'vector.store {e}, {mem}[{self.idx(ii)}] : {mem.ty}, vector<2xf32>')

    def for_(self, lb, ub, step, inits, body):
        iv = V(self.fresh('kt'), 'index')
        res = self.fresh('res')
        its = [V(self.fresh('a'), x.ty) for x in inits]
        n = len(inits)
        args = ', '.join(f'{i} = {x}' for i, x in zip(its, inits))
        tys = ', '.join(x.ty for x in inits)
        self.emit(f'{res}:{n} = scf.for {iv} = {self.c(lb)} to {self.c(ub)} step {self.c(step)} iter_args({args}) -> ({tys}) {{')
        saved = self.cache; self.cache = dict(saved); self.ind += 2
        ys = body(iv, its)
        self.emit(f'scf.yield {", ".join(map(str, ys))} : {tys}')
        self.ind -= 2; self.cache = saved
        self.emit('}')
        return [V(f'{res}#{i}', x.ty) for i, x in enumerate(inits)]

    def if_(self, cond, body):
        self.emit(f'scf.if {cond} {{')
        saved = self.cache; self.cache = dict(saved); self.ind += 2
        body()
        self.ind -= 2; self.cache = saved
        self.emit('}')

    def zero_acc(self):
        return self.zero_vec('vector<2x2xf32>')

    def module(self, name):
        cfg = self.cfg
        et = cfg.et
        consts = []
        for k, v in self.consts.items():
            if isinstance(k, tuple):
                consts.append(f'      {v} = arith.constant dense<0.0> : {v.ty}')
            else:
                consts.append(f'      {v} = arith.constant {k} : index')
        hdr = [
            f'// {name}: C[{cfg.M}x{cfg.N}] f32 = A[{cfg.M}x{cfg.K}] {et} x B[{cfg.K}x{cfg.N}] {et}, row-major (NN).',
            f'// Block {cfg.BM}x{cfg.BN}x{cfg.BK}, 4 warps (2x2) of {cfg.WM}x{cfg.WN}, 2-stage cp.async, XOR-swizzled smem.',
            f'// Launch: grid ({cfg.N // cfg.BN}, {cfg.M // cfg.BM}, 1), block ({cfg.NT}, 1, 1). Generated by gen_matmul.py {cfg.kind}'
            + (' --bx2' if cfg.bx2 else ''),
            'module attributes {gpu.container_module} {',
            '  gpu.module @nova_kernels {',
            *self.globals,
            f'    gpu.func @{name}(%A: memref<{cfg.M}x{cfg.K}x{et}>, %B: memref<{cfg.K}x{cfg.N}x{et}>, '
            f'%C: memref<{cfg.M}x{cfg.N}xf32>) kernel',
            f'        attributes {{known_block_size = array<i32: {cfg.NT}, 1, 1>, '
            f'known_grid_size = array<i32: {cfg.N // cfg.BN}, {cfg.M // cfg.BM}, 1>}} {{',
            *consts, *self.lines,
            '      gpu.return',
            '    }',
            '  }',
            '}',
        ]
        return '\n'.join(hdr) + '\n'


# ----------------------------------------------------------------------------------------------------------------------
# lane-exact evaluator (one block at a time, all threads in lockstep)


class EvalBuilder:
    """Values: index -> list of NT ints (one per thread); fragments -> list of NT lists of floats
    (vector elements flattened row-major, e.g. vector<4x2xf16> = [r0h0, r0h1, r1h0, ...])."""

    def __init__(self, cfg, mem, bid):
        self.cfg, self.mem, self.bid = cfg, mem, bid
        self.NT = cfg.NT
        self.pending = [[] for _ in range(self.NT)]   # uncommitted copies per thread
        self.groups = [[] for _ in range(self.NT)]    # committed groups (FIFO) per thread
        self.epoch = 0
        self.shadow = {}   # (buf, flat) -> dict(state, writer, ready_epoch, read_epochs)
        self.errors = []
        self.stats = mem.setdefault('_stats', {})

    # ---- scalars
    def c(self, v):
        return v if isinstance(v, list) else [v] * self.NT

    def _bin(self, f, a, b):
        a, b = self.c(a), self.c(b)
        return [f(x, y) for x, y in zip(a, b)]

    add = lambda s, a, b: s._bin(lambda x, y: x + y, a, b)
    mul = lambda s, a, b: s._bin(lambda x, y: x * y, a, b)
    div = lambda s, a, b: s._bin(lambda x, y: x // y, a, b)
    rem = lambda s, a, b: s._bin(lambda x, y: x % y, a, b)
    shr = lambda s, a, b: s._bin(lambda x, y: x >> y, a, b)
    shl = lambda s, a, b: s._bin(lambda x, y: x << y, a, b)
    and_ = lambda s, a, b: s._bin(lambda x, y: x & y, a, b)
    xor = lambda s, a, b: s._bin(lambda x, y: x ^ y, a, b)
    lt = lambda s, a, b: s._bin(lambda x, y: x < y, a, b)

    def thread_id(self):
        return list(range(self.NT))

    def block_id(self, d):
        return [self.bid[d]] * self.NT

    def smem(self, name, shape, et):
        bufs = self.mem.setdefault('_smem', {})
        bufs[name] = (shape, [float('nan')] * math.prod(shape))  # NaN: uninitialised
        return name

    def _flat(self, buf, ii):
        shape = self.mem[buf][0] if buf in self.mem else self.mem['_smem'][buf][0]
        f = 0
        for d, i in zip(shape, ii):
            assert 0 <= i < d, (buf, ii, shape)
            f = f * d + i
        return f

    def _arr(self, buf):
        return self.mem[buf][1] if buf in self.mem else self.mem['_smem'][buf][1]

    def _err(self, msg):
        if len(self.errors) < 20:
            self.errors.append(msg)

    def _bank_stat(self, kind, addrs_by_phase):
        """addrs_by_phase: list of phases, each a list of (byte address, width) accesses.
        Conflict degree of a phase = max over banks of distinct 4-byte words touched in that bank."""
        worst = 1
        for ph in addrs_by_phase:
            banks = {}
            for a, w in ph:
                for word in range(a >> 2, (a + w + 3) >> 2):
                    banks.setdefault(word & 31, set()).add(word)
            worst = max(worst, max(len(s) for s in banks.values()))
        st = self.stats.setdefault(kind, 1)
        self.stats[kind] = max(st, worst)

    # ---- cp.async
    def async_copy(self, src, si, dst, di, n):
        si = [self.c(x) for x in si]; di = [self.c(x) for x in di]
        eb = self.cfg.ebytes
        phases = [[] for _ in range(self.NT // 8)]
        for t in range(self.NT):
            s = self._flat(src, [x[t] for x in si]); d = self._flat(dst, [x[t] for x in di])
            assert (d * eb) % 16 == 0 and (s * eb) % 16 == 0, 'cp.async 16-byte alignment'
            for e in range(n):
                sh = self.shadow.setdefault((dst, d + e), {'reads': {}, 'state': 'init'})
                if sh['state'] == 'pending':
                    self._err(f'cp.async WAW on pending {dst}[{d + e}]')
                other_reads = [e2 for (tt, e2) in sh['reads'].items() if tt != t and e2 == self.epoch]
                if other_reads:
                    self._err(f'cp.async by t{t} overwrites {dst}[{d + e}] read by another thread in the same '
                              f'barrier epoch {self.epoch} (WAR race)')
                sh['state'] = 'pending'; sh['writer'] = t
            self.pending[t].append((src, s, dst, d, n))
            phases[t // 8].append((d * eb, 16))
        self._bank_stat('cp.async st.shared 16B (8-lane phases)', phases)
        return 'tok'

    def create_group(self, toks):
        for t in range(self.NT):
            self.groups[t].append(self.pending[t]); self.pending[t] = []
        return 'grp'

    def wait(self, grp, n):
        for t in range(self.NT):
            while len(self.groups[t]) > n:
                for (src, s, dst, d, cnt) in self.groups[t].pop(0):
                    sa, da = self._arr(src), self._arr(dst)
                    for e in range(cnt):
                        da[d + e] = sa[s + e]
                        sh = self.shadow[(dst, d + e)]
                        sh['state'] = 'done'; sh['ready_epoch'] = self.epoch + 1  # visible to others after a barrier

    def barrier(self):
        self.epoch += 1

    def _read_check(self, buf, f, t):
        sh = self.shadow.get((buf, f))
        if sh is None or sh['state'] == 'init':
            self._err(f'read of never-written {buf}[{f}] by t{t}')
            return
        if sh['state'] == 'pending':
            self._err(f'read of {buf}[{f}] by t{t} while its cp.async is pending (missing wait)')
        elif sh['writer'] != t and self.epoch < sh['ready_epoch']:
            self._err(f'read of {buf}[{f}] by t{t}: written by t{sh["writer"]}, no barrier after its wait')
        sh['reads'][t] = self.epoch

    # ---- ldmatrix: matrix j row q address from lane 8j+q; reg j of lane l per ptx-semantics.md §4
    def ldmatrix(self, mem, ii, ntiles, trans):
        ii = [self.c(x) for x in ii]
        eb = self.cfg.ebytes
        arr = self._arr(mem)
        per = 4 // eb                       # elements per 32-bit register
        out = [None] * self.NT
        phases = []
        for w in range(self.NT // 32):
            rows = {}
            for j in range(ntiles):
                ph = []
                for q in range(8):
                    t = 32 * w + 8 * j + q
                    f = self._flat(mem, [x[t] for x in ii])
                    assert (f * eb) % 16 == 0, 'ldmatrix row address must be 16-byte aligned'
                    rows[(j, q)] = f
                    ph.append((f * eb, 16))
                    for e in range(16 // eb):
                        self._read_check(mem, f + e, t)
                phases.append(ph)
            for l in range(32):
                vals = []
                for j in range(ntiles):
                    if not trans:
                        base = rows[(j, l // 4)]
                        if per == 2:
                            vals += [arr[base + 2 * (l % 4)], arr[base + 2 * (l % 4) + 1]]
                        else:  # 32-bit data: lane gets word l%4 of row l/4
                            vals += [arr[base + (l % 4)]]
                    else:
                        assert per == 2, 'ldmatrix .trans only for 16-bit'
                        vals += [arr[rows[(j, 2 * (l % 4))] + l // 4], arr[rows[(j, 2 * (l % 4) + 1)] + l // 4]]
                out[32 * w + l] = vals
        self._bank_stat(f'ldmatrix x{ntiles}{".trans" if trans else ""} (8-lane phases)', phases)
        return out

    def split_rows(self, v, rows):
        return [x[2 * rows:2 * rows + 4] for x in v]

    def load(self, mem, ii):
        ii = [self.c(x) for x in ii]
        arr = self._arr(mem)
        out, ph = [], [[] for _ in range(self.NT // 32)]
        for t in range(self.NT):
            f = self._flat(mem, [x[t] for x in ii])
            self._read_check(mem, f, t)
            out.append(arr[f]); ph[t // 32].append((f * self.cfg.ebytes, self.cfg.ebytes))
        self._bank_stat('ld.shared b32 scalar (32-lane request)', ph)
        return out

    def build_b_tf32(self, scalars):
        return [[scalars[0][t], scalars[1][t]] for t in range(self.NT)]

    def zero_acc(self):
        return [[0.0] * 4 for _ in range(self.NT)]

    # ---- mma.sync: gather per ptx-semantics.md §1 (tf32 m16n8k8) / §2 (f16/bf16 m16n8k16), compute, scatter D
    def mma(self, a, b, c):
        K = self.cfg.mk
        out = [None] * self.NT
        for w in range(self.NT // 32):
            A = [[None] * K for _ in range(16)]
            B = [[None] * 8 for _ in range(K)]
            C = [[None] * 8 for _ in range(16)]
            for l in range(32):
                g, t = l >> 2, l & 3
                fa, fb, fc = a[32 * w + l], b[32 * w + l], c[32 * w + l]
                if K == 16:
                    for i in range(8):
                        A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)] = fa[i]
                    for i in range(4):
                        B[2 * t + (i & 1) + 8 * (i >> 1)][g] = fb[i]
                else:
                    for i in range(4):
                        A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = fa[i]
                    for i in range(2):
                        B[t + 4 * i][g] = fb[i]
                for i in range(4):
                    C[g + 8 * (i >> 1)][2 * t + (i & 1)] = fc[i]
            D = [[C[m][n] + sum(A[m][k] * B[k][n] for k in range(K)) for n in range(8)] for m in range(16)]
            for l in range(32):
                g, t = l >> 2, l & 3
                out[32 * w + l] = [D[g + 8 * (i >> 1)][2 * t + (i & 1)] for i in range(4)]
        return out

    def store_rows(self, acc, mem, i0, i1):
        arr = self._arr(mem)
        for j, ii in enumerate((i0, i1)):
            ii = [self.c(x) for x in ii]
            for t in range(self.NT):
                f = self._flat(mem, [x[t] for x in ii])
                arr[f] = acc[t][2 * j]; arr[f + 1] = acc[t][2 * j + 1]

    def for_(self, lb, ub, step, inits, body):
        its = inits
        for k in range(lb, ub, step):
            its = body([k] * self.NT, its)
        return its

    def if_(self, cond, body):
        assert len(set(cond)) == 1, 'non-uniform scf.if'
        if cond[0]:
            body()


# ----------------------------------------------------------------------------------------------------------------------
# the kernel, written once against the builder interface


MUTATE = None   # checker self-test: 'wait2' | 'no-wait-barrier' | 'no-end-barrier' | 'no-swizzle' (B reads only)


def swz(b, row, chunk, p, read=False):
    """chunk' = chunk ^ (((row >> rs) & rm) << cs): the XOR swizzle of the 16-byte chunk index."""
    rs, rm, cs = p
    if read and MUTATE == 'no-swizzle':
        return chunk
    x = b.and_(b.shr(row, rs) if rs else row, rm)
    if cs:
        x = b.shl(x, cs)
    return b.xor(chunk, x)


def kernel(b, cfg):
    tid = b.thread_id()
    bx, by = b.block_id('x'), b.block_id('y')
    lane, warp = b.rem(tid, 32), b.div(tid, 32)
    wm, wn = b.div(warp, cfg.WARPS_N), b.rem(warp, cfg.WARPS_N)
    g, t = b.shr(lane, 2), b.and_(lane, 3)
    row0, col0 = b.mul(by, cfg.BM), b.mul(bx, cfg.BN)
    sA = b.smem('smemA', [2, cfg.BM, cfg.BK], cfg.et)
    sB = b.smem('smemB', [2, cfg.BK, cfg.BN], cfg.et)
    A, B, C = (('A', 'B', 'C') if isinstance(b, EvalBuilder) else
               (V('%A', f'memref<{cfg.M}x{cfg.K}x{cfg.et}>'), V('%B', f'memref<{cfg.K}x{cfg.N}x{cfg.et}>'),
                V('%C', f'memref<{cfg.M}x{cfg.N}xf32>')))
    epc = cfg.epc
    cprA, cprB = cfg.BK // epc, cfg.BN // epc          # 16-byte chunks per smem row
    nA, nB = cfg.BM * cprA // cfg.NT, cfg.BK * cprB // cfg.NT   # copies per thread
    # per-thread copy coordinates (row, swizzled chunk) -- independent of the slab
    chA, chB = b.rem(tid, cprA), b.rem(tid, cprB)
    rA = [b.add(b.div(tid, cprA), i * (cfg.NT // cprA)) for i in range(nA)]
    rB = [b.add(b.div(tid, cprB), i * (cfg.NT // cprB)) for i in range(nB)]
    dA = [b.mul(swz(b, r, chA, cfg.swzA), epc) for r in rA]
    dB = [b.mul(swz(b, r, chB, cfg.swzB), epc) for r in rB]
    gcolA = b.mul(chA, epc)
    gcolB = b.add(col0, b.mul(chB, epc))
    gA = [b.add(row0, r) for r in rA]

    def issue_slab(kt, stage):
        toks = []
        k0 = b.mul(kt, cfg.BK)
        ca = b.add(k0, gcolA)
        for i in range(nA):
            toks.append(b.async_copy(A, [gA[i], ca], sA, [stage, rA[i], dA[i]], epc))
        for i in range(nB):
            toks.append(b.async_copy(B, [b.add(k0, rB[i]), gcolB], sB, [stage, rB[i], dB[i]], epc))
        return toks

    g0 = b.create_group(issue_slab(0, 0))
    MT, NTL = cfg.WM // 16, cfg.WN // 8       # 4 x 8 mma tiles per warp
    inits = [b.zero_acc() for _ in range(MT * NTL)]

    # loop-invariant fragment addresses
    l16, lhi = b.rem(lane, 16), b.div(lane, 16)
    aRow = [b.add(b.add(b.mul(wm, cfg.WM), mi * 16), l16) for mi in range(MT)]

    def body(kt, accs):
        stage = b.rem(kt, 2)
        nxt = b.add(kt, 1)
        b.if_(b.lt(nxt, cfg.KT), lambda: issue_slab(nxt, b.rem(nxt, 2)))
        grp = b.create_group([])        # possibly empty group (last iteration): keeps wait_group 1 exact
        b.wait(grp, 2 if MUTATE == 'wait2' else 1)
        if MUTATE != 'no-wait-barrier':
            b.barrier()
        accs = list(accs)
        for kk in range(cfg.BK // cfg.mk):
            # A: ldmatrix x4; lane -> (row l%16, 16-byte chunk 2kk + l/16); same for f16 (8 elems) and f32 (4 elems)
            aCh = b.add(lhi, 2 * kk)
            af = [b.ldmatrix(sA, [stage, r, b.mul(swz(b, r, aCh, cfg.swzA), epc)], 4, False) for r in aRow]
            bf = []
            if cfg.kind == 'tf32':
                # B (k x n row-major, f32): scalar loads b_i = B[k = t + 4i][n = g]  (no b32 .trans)
                for ni in range(NTL):
                    n = b.add(b.add(b.mul(wn, cfg.WN), ni * 8), g)
                    nch, nin = b.shr(n, 2), b.and_(n, 3)
                    sc = []
                    for i in range(2):
                        k = b.add(t, kk * 8 + 4 * i)
                        sc.append(b.load(sB, [stage, k, b.add(b.mul(swz(b, k, nch, cfg.swzB, True), epc), nin)]))
                    bf.append(b.build_b_tf32(sc))
            else:
                kr = b.add(l16, kk * 16)
                if cfg.bx2:
                    # x2.trans: lane l -> (k-row l%16, n-block ni)
                    for ni in range(NTL):
                        nCh = b.add(b.mul(wn, cfg.WN // 8), ni)
                        bf.append(b.ldmatrix(sB, [stage, kr, b.mul(swz(b, kr, nCh, cfg.swzB, True), epc)], 2, True))
                else:
                    # x4.trans: lanes 0-15 -> n-block 2p, lanes 16-31 -> n-block 2p+1; regs {0,1}, {2,3}
                    for p in range(NTL // 2):
                        nCh = b.add(b.add(b.mul(wn, cfg.WN // 8), 2 * p), lhi)
                        v = b.ldmatrix(sB, [stage, kr, b.mul(swz(b, kr, nCh, cfg.swzB, True), epc)], 4, True)
                        bf += [b.split_rows(v, 0), b.split_rows(v, 2)]
            for mi in range(MT):
                for ni in range(NTL):
                    accs[mi * NTL + ni] = b.mma(af[mi], bf[ni], accs[mi * NTL + ni])
        if MUTATE != 'no-end-barrier':
            b.barrier()                 # everyone is done reading `stage` before it is refilled next iteration
        return accs

    accs = b.for_(0, cfg.KT, 1, inits, body)
    # epilogue: lane holds rows g, g+8 and cols 2t, 2t+1 of each 16x8 tile (ptx-semantics.md §2 C map)
    for mi in range(MT):
        r = b.add(row0, b.add(b.add(b.mul(wm, cfg.WM), mi * 16), g))
        r8 = b.add(r, 8)
        for ni in range(NTL):
            c = b.add(col0, b.add(b.add(b.mul(wn, cfg.WN), ni * 8), b.mul(t, 2)))
            b.store_rows(accs[mi * NTL + ni], C, [r, c], [r8, c])


# ----------------------------------------------------------------------------------------------------------------------


def emulate(cfg, seed=1):
    rnd = random.Random(seed)
    # small integers: exact in f16/bf16/tf32 and in f32 accumulation -> exact comparison
    Am = [float(rnd.randint(-3, 3)) for _ in range(cfg.M * cfg.K)]
    Bm = [float(rnd.randint(-3, 3)) for _ in range(cfg.K * cfg.N)]
    mem = {'A': ([cfg.M, cfg.K], Am), 'B': ([cfg.K, cfg.N], Bm), 'C': ([cfg.M, cfg.N], [float('nan')] * (cfg.M * cfg.N))}
    errors = []
    for by in range(cfg.M // cfg.BM):
        for bx in range(cfg.N // cfg.BN):
            eb = EvalBuilder(cfg, mem, {'x': bx, 'y': by})
            kernel(eb, cfg)
            errors += eb.errors
            for t in range(cfg.NT):
                if any(eb.groups[t]) or eb.pending[t]:   # empty groups (last iteration) are harmless
                    errors.append(f'thread {t}: non-empty cp.async group left pending at exit'); break
    Cm = mem['C'][1]
    bad = 0
    for m in range(cfg.M):
        for n in range(cfg.N):
            ref = sum(Am[m * cfg.K + k] * Bm[k * cfg.N + n] for k in range(cfg.K))
            if Cm[m * cfg.N + n] != ref:
                bad += 1
    return bad, errors, mem.get('_stats', {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('kind', choices=['f16', 'bf16', 'tf32'])
    ap.add_argument('--bx2', action='store_true')
    ap.add_argument('-o', default=None)
    ap.add_argument('--check', action='store_true')
    ap.add_argument('--mnk', default='256,256,256')
    ap.add_argument('--mutate', default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    global MUTATE
    MUTATE = a.mutate
    M, N, K = map(int, a.mnk.split(','))
    cfg = Cfg(a.kind, a.bx2, M, N, K)
    tb = TextBuilder(cfg)
    kernel(tb, cfg)
    text = tb.module(f'matmul_{a.kind}_nn')
    if a.o:
        open(a.o, 'w').write(text)
    else:
        sys.stdout.write(text)
    if a.check:
        bad, errs, stats = emulate(cfg)
        print(f'[emulate {a.kind}{" bx2" if a.bx2 else ""} {M}x{N}x{K}] mismatches: {bad} / {M * N}; '
              f'hazards: {len(errs)}', file=sys.stderr)
        for e in errs[:10]:
            print('  hazard:', e, file=sys.stderr)
        for k, v in stats.items():
            print(f'  bank conflicts, worst phase: {k}: {v}-way', file=sys.stderr)
        sys.exit(1 if bad or errs else 0)


if __name__ == '__main__':
    main()
