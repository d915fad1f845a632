/**
 * The random generator: MT19937 (Matsumoto & Nishimura 1998), the engine behind PyTorch's CPU
 * generator, seeded the same way (`torch.manual_seed(s)` -> mt19937(s)).
 *
 * Draws:
 * - `random()` 32-bit uint.
 * - `uniform()` in [0, 1) with 24 random bits for float32 (x & (2^24-1)) * 2^-24, the formula of
 *   torch's CPU `uniform_` for float; `uniform53()` with 53 bits for float64.
 * - `normal()` by Box-Muller on (1 - u1, u2).
 * Sequences are deterministic per seed and documented here; they are not guaranteed to equal
 * torch's beyond `rand` on small float32 tensors (torch vectorizes normal_ differently).
 */
import { LoomValueError } from "./errors.ts";

const N = 624;
const M = 397;
/** Bytes of Generator.get_state: N words, the position, the seed, the kept normal (flag + value). */
export const STATE_BYTES = 4 * N + 4 + 8 + 1 + 8;

export class Generator {
  private mt = new Uint32Array(N);
  private mti = N + 1;
  private _seed = 0;
  private spare: number | null = null;

  constructor(seed = 5489) {
    this.manual_seed(seed);
  }

  /** Reseed; returns this (as torch.Generator.manual_seed). */
  manual_seed(seed: number): this {
    this._seed = seed;
    const mt = this.mt;
    mt[0] = seed >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      // 1812433253 * prev + i, in 32-bit arithmetic
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.mti = N;
    this.spare = null;
    return this;
  }

  initial_seed(): number {
    return this._seed;
  }

  /**
   * The whole state as bytes (torch.Generator.get_state, which returns them as a uint8 tensor):
   * the Mersenne Twister words, the position, the seed and Box-Muller's kept value. Little-endian,
   * STATE_BYTES long; `set_state` restores it exactly.
   */
  get_state(): Uint8Array {
    const out = new Uint8Array(STATE_BYTES);
    const v = new DataView(out.buffer);
    for (let i = 0; i < N; i++) v.setUint32(4 * i, this.mt[i]!, true);
    v.setUint32(4 * N, this.mti, true);
    v.setFloat64(4 * N + 4, this._seed, true);
    v.setUint8(4 * N + 12, this.spare === null ? 0 : 1);
    v.setFloat64(4 * N + 13, this.spare ?? 0, true);
    return out;
  }

  /**
   * Restore a state from `get_state` (torch.Generator.set_state).
   * @throws LoomValueError for bytes of another length or a position outside the state
   */
  set_state(state: Uint8Array): this {
    if (state.length !== STATE_BYTES) throw new LoomValueError(`[Generator.set_state] expected ${STATE_BYTES} bytes, got ${state.length}`);
    const v = new DataView(state.buffer, state.byteOffset, state.byteLength);
    const mti = v.getUint32(4 * N, true);
    if (mti > N + 1) throw new LoomValueError(`[Generator.set_state] position ${mti} is outside the state (at most ${N + 1})`);
    for (let i = 0; i < N; i++) this.mt[i] = v.getUint32(4 * i, true);
    this.mti = mti;
    this._seed = v.getFloat64(4 * N + 4, true);
    this.spare = v.getUint8(4 * N + 12) ? v.getFloat64(4 * N + 13, true) : null;
    return this;
  }

  /** Next 32-bit unsigned integer. */
  random(): number {
    if (this.mti >= N) this.twist();
    let y = this.mt[this.mti++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** Regenerate the N words of state (MT19937's twist); the next draw reads word 0. */
  private twist(): void {
    const mt = this.mt;
    let kk = 0;
    for (; kk < N - M; kk++) {
      const y = (mt[kk]! & 0x80000000) | (mt[kk + 1]! & 0x7fffffff);
      mt[kk] = mt[kk + M]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    for (; kk < N - 1; kk++) {
      const y = (mt[kk]! & 0x80000000) | (mt[kk + 1]! & 0x7fffffff);
      mt[kk] = mt[kk + (M - N)]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    const y = (mt[N - 1]! & 0x80000000) | (mt[0]! & 0x7fffffff);
    mt[N - 1] = mt[M - 1]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    this.mti = 0;
  }

  /**
   * out[i] = mean + std·z_i for n standard normals z: the same values, in the same order, and the
   * same state afterwards as n calls of `normal()` (Box-Muller pairs, the spare kept), without a
   * method call per draw (model init fills millions: about 4× faster).
   */
  fill_normal(out: Float64Array, mean = 0, std = 1): void {
    const n = out.length;
    let i = 0;
    if (n > 0 && this.spare !== null) {
      out[i++] = mean + std * this.spare;
      this.spare = null;
    }
    const mt = this.mt;
    const u53 = (): number => {
      // uniform53 with random() inlined: two tempered words
      if (this.mti >= N) this.twist();
      let a = mt[this.mti++]!;
      a ^= a >>> 11; a ^= (a << 7) & 0x9d2c5680; a ^= (a << 15) & 0xefc60000; a ^= a >>> 18;
      if (this.mti >= N) this.twist();
      let b = mt[this.mti++]!;
      b ^= b >>> 11; b ^= (b << 7) & 0x9d2c5680; b ^= (b << 15) & 0xefc60000; b ^= b >>> 18;
      return ((a >>> 0) >>> 5) * 67108864 + ((b >>> 0) >>> 6);
    };
    const TWO53 = 9007199254740992, TWO_PI = 2 * Math.PI;
    for (; i < n; i += 2) {
      const u1 = 1 - u53() / TWO53;
      const u2 = u53() / TWO53;
      const r = Math.sqrt(-2 * Math.log(u1));
      out[i] = mean + std * (r * Math.cos(TWO_PI * u2));
      const second = r * Math.sin(TWO_PI * u2);
      if (i + 1 < n) out[i + 1] = mean + std * second;
      else this.spare = second;
    }
  }

  /** Uniform in [0, 1) with 24 bits (float32 resolution). */
  uniform(): number {
    return (this.random() & 0xffffff) * 5.960464477539063e-8; // 2^-24
  }

  /** Uniform in [0, 1) with 53 bits (float64 resolution). */
  uniform53(): number {
    const hi = this.random() >>> 5;
    const lo = this.random() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }

  /** Standard normal by Box-Muller; the second value of each pair is kept for the next call. */
  normal(): number {
    if (this.spare !== null) {
      const s = this.spare;
      this.spare = null;
      return s;
    }
    const u1 = 1 - this.uniform53(); // in (0, 1]: log is finite
    const u2 = this.uniform53();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spare = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }

  /** Uniform integer in [low, high). */
  randint(low: number, high: number): number {
    const span = high - low;
    if (span <= 0x100000000) return low + (this.random() % span);
    return low + Math.floor(this.uniform53() * span);
  }
}

/** The default generator used by rand/randn/randint/dropout/init when none is given. */
export const default_generator = new Generator(67280421310721 % 2 ** 32);

/** Seed the default generator (torch.manual_seed). */
export function manual_seed(seed: number): Generator {
  return default_generator.manual_seed(seed);
}

/**
 * mulberry32 (Tommy Ettinger's 32-bit generator): a tiny deterministic stream of floats in [0, 1)
 * for inputs that must repeat across runs (tuning inputs, fuzzing, test data) without touching
 * the default generator's state. Not Loom's sampling generator (that is Generator, MT19937).
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
