/**
 * Memory planning for a plan's transient buffers (values computed and consumed inside one plan):
 * liveness (the instruction that writes a buffer and the last one that reads it), in-place reuse
 * (an elementwise kernel may write over an input that dies at that instruction, read at the same
 * index), and greedy offset allocation into one workspace: buffers are placed largest first at
 * the lowest offset that does not overlap any placed buffer whose lifetime overlaps theirs.
 * Plan outputs and kept values are not transients: they get their own buffers (they escape).
 */

/** Byte alignment of every workspace offset (fits any typed array and a cache line). */
export const ALIGN = 64;

export interface TransientBuffer {
  readonly bytes: number;
  /** Instruction that writes it. */
  readonly def: number;
  /** Last instruction that reads it (>= def). */
  readonly last: number;
  /** Buffer whose storage this one reuses in place at instruction `def` (that buffer's last use). */
  readonly inplaceOf: number | null;
}

export interface MemoryPlan {
  /** Workspace byte offset of each buffer. */
  readonly offsets: readonly number[];
  /** Workspace bytes needed (the largest end offset). */
  readonly peak: number;
  /** Sum of all transient sizes: what allocating each one separately would take. */
  readonly naive: number;
  /** Largest sum of sizes live at one instruction: the bound any offset assignment reaches. */
  readonly liveBound: number;
}

const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

/** Greedy-by-size offset assignment (storages shared by in-place chains are placed once). */
export function planMemory(bufs: readonly TransientBuffer[]): MemoryPlan {
  // union in-place chains into storages
  const storageOf = bufs.map((_, i) => i);
  const find = (i: number): number => (storageOf[i] === i ? i : (storageOf[i] = find(storageOf[i]!)));
  bufs.forEach((b, i) => {
    if (b.inplaceOf !== null) storageOf[i] = find(b.inplaceOf);
  });
  const storages = new Map<number, { bytes: number; def: number; last: number; offset: number }>();
  bufs.forEach((b, i) => {
    const r = find(i);
    const s = storages.get(r);
    if (!s) storages.set(r, { bytes: b.bytes, def: b.def, last: b.last, offset: -1 });
    else {
      s.bytes = Math.max(s.bytes, b.bytes);
      s.def = Math.min(s.def, b.def);
      s.last = Math.max(s.last, b.last);
    }
  });
  const order = [...storages.values()].sort((a, b) => b.bytes - a.bytes || a.def - b.def);
  const placed: { bytes: number; def: number; last: number; offset: number }[] = [];
  let peak = 0;
  for (const s of order) {
    const clash = placed
      .filter((p) => p.def <= s.last && s.def <= p.last)
      .sort((a, b) => a.offset - b.offset);
    let off = 0;
    for (const p of clash) {
      if (off + s.bytes <= p.offset) break;
      off = Math.max(off, align(p.offset + p.bytes));
    }
    s.offset = off;
    placed.push(s);
    peak = Math.max(peak, off + s.bytes);
  }
  const offsets = bufs.map((_, i) => storages.get(find(i))!.offset);
  const naive = bufs.reduce((p, b) => p + align(b.bytes), 0);
  let liveBound = 0;
  const maxT = bufs.reduce((m, b) => Math.max(m, b.last), -1);
  const delta = new Float64Array(maxT + 2);
  for (const s of storages.values()) {
    delta[s.def]! += s.bytes;
    delta[s.last + 1]! -= s.bytes;
  }
  let live = 0;
  for (let t = 0; t <= maxT; t++) {
    live += delta[t]!;
    liveBound = Math.max(liveBound, live);
  }
  return { offsets, peak: align(peak), naive, liveBound };
}

/**
 * Brute-force check of a memory plan: any two buffers whose lifetimes overlap must not overlap in
 * bytes, except a buffer written in place over an input dying at that very instruction.
 * Returns the violations (empty when the plan is sound).
 */
export function validateMemoryPlan(bufs: readonly TransientBuffer[], plan: MemoryPlan): string[] {
  const bad: string[] = [];
  for (let i = 0; i < bufs.length; i++) {
    const a = bufs[i]!, ao = plan.offsets[i]!;
    if (ao < 0 || ao % ALIGN !== 0 || ao + a.bytes > plan.peak) bad.push(`buffer ${i} at ${ao} (+${a.bytes}) is outside the workspace of ${plan.peak}`);
    for (let j = i + 1; j < bufs.length; j++) {
      const b = bufs[j]!, bo = plan.offsets[j]!;
      const timeOverlap = a.def <= b.last && b.def <= a.last;
      const byteOverlap = ao < bo + b.bytes && bo < ao + a.bytes && a.bytes > 0 && b.bytes > 0;
      if (!timeOverlap || !byteOverlap) continue;
      const inplace = (x: TransientBuffer, y: TransientBuffer, yi: number, xi: number) =>
        y.inplaceOf === xi && y.def === x.last && plan.offsets[xi] === plan.offsets[yi];
      if (inplace(a, b, j, i) || inplace(b, a, i, j)) continue;
      bad.push(`buffers ${i} [${a.def},${a.last}] @${ao}+${a.bytes} and ${j} [${b.def},${b.last}] @${bo}+${b.bytes} are live together and overlap`);
    }
  }
  return bad;
}
