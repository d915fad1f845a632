var __require = /* @__PURE__ */ ((x) => typeof require !== "undefined" ? require : typeof Proxy !== "undefined" ? new Proxy(x, {
  get: (a, b) => (typeof require !== "undefined" ? require : a)[b]
}) : x)(function(x) {
  if (typeof require !== "undefined")
    return require.apply(this, arguments);
  throw Error('Dynamic require of "' + x + '" is not supported');
});

// src/runtime/globals.ts
var g = globalThis;
if (typeof g.process === "undefined") {
  g.process = {
    env: {},
    pid: 0,
    platform: "browser",
    arch: "",
    argv: [],
    versions: {},
    cwd: () => "/"
  };
}

// src/tensor/errors.ts
class LoomError extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

class LoomShapeError extends LoomError {
}

class LoomConstraintViolationError extends LoomShapeError {
}

class LoomDtypeError extends LoomError {
}

class LoomIndexError extends LoomError {
}

class LoomAutogradError extends LoomError {
}

class LoomFormatError extends LoomError {
}

class LoomValueError extends LoomError {
}
function fmtShape(s) {
  return `[${s.join(", ")}]`;
}

// src/graph/node.ts
var nextId = 0;

class Node {
  op;
  attrs;
  shape;
  dtype;
  id = nextId++;
  inputs;
  realized;
  constant = false;
  assigned = false;
  stale = false;
  tracked = null;
  walk = 0;
  index = 0;
  constructor(op, inputs, attrs, shape, dtype, realized = null) {
    this.op = op;
    this.attrs = attrs;
    this.shape = shape;
    this.dtype = dtype;
    this.inputs = inputs;
    this.realized = realized;
  }
  static source(data) {
    return new Node(null, [], null, data.shape, data.dtype, data);
  }
  static constant(data) {
    const n = Node.source(data);
    n.constant = true;
    return n;
  }
  get label() {
    if (!this.op)
      return this.realized && this.shape.length === 0 && this.realized.data.length > 0 ? `const ${this.realized.data[this.realized.offset]}` : "input";
    const d = this.op.describe?.(this.attrs);
    return d ? `${this.op.name}(${d})` : this.op.name;
  }
}
function staleError(n) {
  return new LoomValueError(`[lazy] a value (${n.dtype} ${fmtShape(n.shape)}) read inside a module forward or an optimizer/cache update was used after the tensor it read was written in place; its old contents are gone. Realize lazy values before writing the tensors they read, or read them through x.lazy() (which keeps a copy)`);
}
function toDot(roots, name = "loom") {
  const lines = [`digraph ${name} {`, "  rankdir=TB;", '  node [shape=box, fontname="monospace"];'];
  const seen = new Set;
  const stack = [...roots];
  while (stack.length) {
    const n = stack.pop();
    if (seen.has(n))
      continue;
    seen.add(n);
    const style = n.op ? "" : ", style=filled, fillcolor=lightgrey";
    lines.push(`  n${n.id} [label="${n.label}\\n${fmtShape(n.shape)} ${n.dtype}"${style}];`);
    for (const c of n.inputs) {
      lines.push(`  n${c.id} -> n${n.id};`);
      stack.push(c);
    }
  }
  lines.push("}");
  return lines.join(`
`);
}

// src/tensor/shape.ts
function numel(shape) {
  let n = 1;
  for (const s of shape)
    n *= s;
  return n;
}
function contiguousStrides(shape) {
  const st = new Array(shape.length);
  let acc = 1;
  for (let i = shape.length - 1;i >= 0; i--) {
    st[i] = acc;
    acc *= shape[i];
  }
  return st;
}
function isContiguous(shape, strides) {
  let acc = 1;
  for (let i = shape.length - 1;i >= 0; i--) {
    if (shape[i] === 1)
      continue;
    if (strides[i] !== acc)
      return false;
    acc *= shape[i];
  }
  return true;
}
function shapesEqual(a, b) {
  if (a.length !== b.length)
    return false;
  for (let i = 0;i < a.length; i++)
    if (a[i] !== b[i])
      return false;
  return true;
}
function normalizeDim(op, dim, ndim) {
  const n = Math.max(ndim, 1);
  if (!Number.isInteger(dim) || dim < -n || dim >= n) {
    throw new LoomIndexError(`[${op}] dim ${dim} is out of range for a tensor of ${ndim} dims (expected to be in range of [${-n}, ${n - 1}])`);
  }
  return dim < 0 ? dim + n : dim;
}
function normalizeDims(op, dim, ndim) {
  if (dim === undefined || dim === null)
    return Array.from({ length: ndim }, (_, i) => i);
  if (typeof dim === "number")
    return ndim === 0 ? (normalizeDim(op, dim, ndim), []) : [normalizeDim(op, dim, ndim)];
  const list = typeof dim === "number" ? [dim] : dim;
  if (list.length === 0)
    return Array.from({ length: ndim }, (_, i) => i);
  const out = list.map((d) => normalizeDim(op, d, ndim));
  if (ndim === 0)
    return [];
  const seen = new Set;
  for (const d of out) {
    if (seen.has(d))
      throw new LoomIndexError(`[${op}] dim ${d} appears multiple times in the list of dims`);
    seen.add(d);
  }
  return out.sort((a, b) => a - b);
}
function broadcastShapes(op, a, b) {
  const n = Math.max(a.length, b.length);
  const out = new Array(n);
  for (let i = 0;i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) {
      throw new LoomShapeError(`[${op}] shapes ${fmtShape(a)} and ${fmtShape(b)} cannot be broadcast together (dim ${i - n}: ${x} vs ${y})`);
    }
    out[i] = x === 1 ? y : x;
  }
  return out;
}
function broadcastStrides(shape, strides, target) {
  const n = target.length;
  const out = new Array(n).fill(0);
  const off = n - shape.length;
  for (let i = 0;i < shape.length; i++) {
    out[off + i] = shape[i] === 1 && target[off + i] !== 1 ? 0 : strides[i];
  }
  return out;
}
function inferShape(op, target, size) {
  let infer = -1;
  let known = 1;
  for (let i = 0;i < target.length; i++) {
    const s = target[i];
    if (s === -1) {
      if (infer >= 0)
        throw new LoomShapeError(`[${op}] only one dimension can be inferred`);
      infer = i;
    } else if (!Number.isInteger(s) || s < 0) {
      throw new LoomShapeError(`[${op}] invalid shape dimension ${s} in ${fmtShape(target)}`);
    } else
      known *= s;
  }
  const out = [...target];
  if (infer >= 0) {
    if (known === 0 || size % known !== 0) {
      throw new LoomShapeError(`[${op}] shape '${fmtShape(target)}' is invalid for input of size ${size}`);
    }
    out[infer] = size / known;
  } else if (known !== size) {
    throw new LoomShapeError(`[${op}] shape '${fmtShape(target)}' is invalid for input of size ${size}`);
  }
  return out;
}
function viewStrides(shape, strides, newShape) {
  if (numel(shape) === 0 || shape.length === 0)
    return contiguousStrides(newShape);
  const out = new Array(newShape.length);
  let viewD = newShape.length - 1;
  let chunkBase = strides[strides.length - 1] ?? 1;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let d = shape.length - 1;d >= 0; d--) {
    tensorNumel *= shape[d];
    if (d === 0 || shape[d - 1] !== 1 && strides[d - 1] !== tensorNumel * chunkBase) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        out[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD];
        viewD--;
      }
      if (viewNumel !== tensorNumel)
        return null;
      if (d > 0) {
        chunkBase = strides[d - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD !== -1)
    return null;
  return out;
}
function checkShape(op, shape) {
  for (const s of shape) {
    if (!Number.isInteger(s) || s < 0)
      throw new LoomValueError(`[${op}] invalid shape ${fmtShape(shape)}: sizes must be non-negative integers`);
  }
  return [...shape];
}

// src/tensor/dtype.ts
var DTYPES = [
  "float32",
  "float64",
  "float16",
  "bfloat16",
  "int32",
  "int64",
  "int8",
  "uint8",
  "bool"
];
var itemsize = {
  float32: 4,
  float64: 8,
  float16: 2,
  bfloat16: 2,
  int32: 4,
  int64: 8,
  int8: 1,
  uint8: 1,
  bool: 1
};
function isFloating(d) {
  return d === "float32" || d === "float64" || d === "float16" || d === "bfloat16";
}
function isIntegral(d) {
  return d === "int32" || d === "int64" || d === "int8" || d === "uint8";
}
function isHalf(d) {
  return d === "float16" || d === "bfloat16";
}
function allocArray(d, n) {
  switch (d) {
    case "float32":
      return new Float32Array(n);
    case "float64":
    case "int64":
      return new Float64Array(n);
    case "float16":
    case "bfloat16":
      return new Uint16Array(n);
    case "int32":
      return new Int32Array(n);
    case "int8":
      return new Int8Array(n);
    case "uint8":
    case "bool":
      return new Uint8Array(n);
  }
}
var CATEGORY = {
  bool: 0,
  uint8: 1,
  int8: 1,
  int32: 1,
  int64: 1,
  float16: 2,
  bfloat16: 2,
  float32: 2,
  float64: 2
};
var RANK = {
  bool: 0,
  uint8: 1,
  int8: 1,
  int32: 2,
  int64: 3,
  float16: 4,
  bfloat16: 4,
  float32: 5,
  float64: 6
};
function promoteTypes(a, b) {
  if (a === b)
    return a;
  if (a === "uint8" && b === "int8" || a === "int8" && b === "uint8")
    return "int32";
  if (isHalf(a) && isHalf(b))
    return "float32";
  return RANK[a] >= RANK[b] ? a : b;
}
var DEFAULT_FLOAT = "float32";
function promoteWithScalar(t, s) {
  const sc = typeof s === "boolean" ? 0 : Number.isInteger(s) ? 1 : 2;
  if (sc <= CATEGORY[t])
    return t;
  return sc === 1 ? "int64" : DEFAULT_FLOAT;
}
function canCast(from, to) {
  if (isFloating(from) && !isFloating(to))
    return false;
  return from === "bool" || to !== "bool";
}
function promoteFloat(d) {
  return isFloating(d) ? d : DEFAULT_FLOAT;
}
var f32 = new Float32Array(1);
var u32 = new Uint32Array(f32.buffer);
function halfToFloat(h) {
  const s = h & 32768 ? -1 : 1;
  const e = h >> 10 & 31;
  const m = h & 1023;
  if (e === 0)
    return s * m * 2 ** -24;
  if (e === 31)
    return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
function floatToHalf(v) {
  f32[0] = v;
  const x = u32[0];
  const sign = x >>> 16 & 32768;
  const exp = x >>> 23 & 255;
  let mant = x & 8388607;
  if (exp === 255)
    return sign | 31744 | (mant ? 512 : 0);
  let e = exp - 127 + 15;
  if (e >= 31)
    return sign | 31744;
  if (e <= 0) {
    if (e < -10)
      return sign;
    mant |= 8388608;
    const shift = 14 - e;
    const half = 1 << shift - 1;
    let r = mant >>> shift;
    const rem = mant & (1 << shift) - 1;
    if (rem > half || rem === half && r & 1)
      r++;
    return sign | r;
  }
  let r = mant >>> 13;
  const rem = mant & 8191;
  if (rem > 4096 || rem === 4096 && r & 1) {
    r++;
    if (r === 1024) {
      r = 0;
      e++;
      if (e >= 31)
        return sign | 31744;
    }
  }
  return sign | e << 10 | r;
}
function bf16ToFloat(h) {
  u32[0] = h << 16;
  return f32[0];
}
function floatToBf16(v) {
  f32[0] = v;
  const x = u32[0];
  if ((x & 2147483647) > 2139095040)
    return (x >>> 16 | 64) & 65535;
  const lsb = x >>> 16 & 1;
  return x + 32767 + lsb >>> 16 & 65535;
}
function decoder(d) {
  if (d === "float16")
    return (a, i) => halfToFloat(a[i]);
  if (d === "bfloat16")
    return (a, i) => bf16ToFloat(a[i]);
  return null;
}
function encoder(d) {
  switch (d) {
    case "float16":
      return floatToHalf;
    case "bfloat16":
      return floatToBf16;
    case "int64":
      return (v) => Math.trunc(v) || 0;
    case "bool":
      return (v) => v !== 0 ? 1 : 0;
    default:
      return null;
  }
}

// src/tensor/storage.ts
function allocData(dtype, shape) {
  return { dtype, shape: [...shape], strides: contiguousStrides(shape), offset: 0, data: allocArray(dtype, numel(shape)) };
}
function isDense(t) {
  return isContiguous(t.shape, t.strides);
}
function viewOf(t, shape, strides, offset) {
  return { dtype: t.dtype, shape, strides, offset, data: t.data };
}
function forEachStrided(shape, operands, fn) {
  const n = numel(shape);
  if (n === 0)
    return;
  const k = operands.length;
  const nd = shape.length;
  const idx = new Array(k);
  for (let j = 0;j < k; j++)
    idx[j] = operands[j].offset;
  if (nd === 0) {
    fn(0, idx);
    return;
  }
  const last = shape[nd - 1];
  const lastStride = operands.map((o) => o.strides[nd - 1]);
  const counter = new Array(nd).fill(0);
  const base = idx.slice();
  let out = 0;
  for (;; ) {
    for (let j = 0;j < k; j++)
      idx[j] = base[j];
    for (let t = 0;t < last; t++) {
      fn(out++, idx);
      for (let j = 0;j < k; j++)
        idx[j] += lastStride[j];
    }
    let d = nd - 2;
    for (;d >= 0; d--) {
      counter[d]++;
      for (let j = 0;j < k; j++)
        base[j] += operands[j].strides[d];
      if (counter[d] < shape[d])
        break;
      for (let j = 0;j < k; j++)
        base[j] -= operands[j].strides[d] * shape[d];
      counter[d] = 0;
    }
    if (d < 0)
      return;
  }
}
function toFloat64(t) {
  const n = numel(t.shape);
  const dec = decoder(t.dtype);
  const src = t.data;
  if (!dec && t.offset === 0 && src.length === n && isDense(t))
    return new Float64Array(src);
  const out = new Float64Array(n);
  if (dec)
    forEachStrided(t.shape, [t], (i, idx) => {
      out[i] = dec(src, idx[0]);
    });
  else if (isDense(t)) {
    out.set(src.subarray(t.offset, t.offset + n));
  } else
    forEachStrided(t.shape, [t], (i, idx) => {
      out[i] = src[idx[0]];
    });
  return out;
}
function toContiguous(t, dtype = t.dtype) {
  if (dtype === t.dtype && t.offset === 0 && isDense(t) && t.data.length === numel(t.shape))
    return t;
  const out = allocData(dtype, t.shape);
  const dst = out.data;
  const dec = decoder(t.dtype);
  const enc = encoder(dtype);
  const src = t.data;
  if (!dec && !enc && isHalf(dtype) === isHalf(t.dtype)) {
    forEachStrided(t.shape, [t], (i, idx) => {
      dst[i] = src[idx[0]];
    });
  } else {
    forEachStrided(t.shape, [t], (i, idx) => {
      const v = dec ? dec(src, idx[0]) : src[idx[0]];
      dst[i] = enc ? enc(v) : v;
    });
  }
  return out;
}
function scalarData(dtype, v) {
  const data = allocArray(dtype, 1);
  const enc = encoder(dtype);
  data[0] = enc ? enc(v) : v;
  return { dtype, shape: [], strides: [], offset: 0, data };
}
function fromValues(dtype, shape, values) {
  const out = allocData(dtype, shape);
  const enc = encoder(dtype);
  const dst = out.data;
  for (let i = 0;i < values.length; i++)
    dst[i] = enc ? enc(values[i]) : values[i];
  return out;
}

// src/autograd/grad_mode.ts
var enabled = true;
function is_grad_enabled() {
  return enabled;
}
class GradModeGuard {
  prev;
  constructor(mode) {
    this.prev = enabled;
    enabled = mode;
  }
  [Symbol.dispose]() {
    enabled = this.prev;
  }
}
function no_grad(fn) {
  return fn ? withGradMode(false, fn) : new GradModeGuard(false);
}
function enable_grad(fn) {
  return fn ? withGradMode(true, fn) : new GradModeGuard(true);
}
function withGradMode(mode, fn) {
  const prev = enabled;
  enabled = mode;
  let r;
  try {
    r = fn();
  } catch (e) {
    enabled = prev;
    throw e;
  }
  if (r instanceof Promise) {
    return r.finally(() => {
      enabled = prev;
    });
  }
  enabled = prev;
  return r;
}

// src/graph/infer.ts
function category(d) {
  return d === "bool" ? 0 : isIntegral(d) ? 1 : 2;
}
function resultType(inputs) {
  let dimmed = null;
  let zero = null;
  for (const m of inputs) {
    if (m.shape.length > 0)
      dimmed = dimmed === null ? m.dtype : promoteTypes(dimmed, m.dtype);
    else
      zero = zero === null ? m.dtype : promoteTypes(zero, m.dtype);
  }
  if (dimmed === null)
    return zero;
  if (zero === null)
    return dimmed;
  return category(zero) > category(dimmed) ? zero : dimmed;
}
function broadcastAll(op, inputs) {
  let s = [...inputs[0].shape];
  for (let i = 1;i < inputs.length; i++)
    s = broadcastShapes(op, s, inputs[i].shape);
  return s;
}
var sameShape = (inputs) => [...inputs[0].shape];
var sameDtype = (inputs) => inputs[0].dtype;
var floatDtype = (inputs) => promoteFloat(inputs[0].dtype);
var boolDtype = () => "bool";
function floatHint(d) {
  if (d === "bool")
    return "call .float() first";
  return 'pass { dtype: "float32" } to tensor() (or full, arange) or call .float() first (JavaScript numbers do not tell 1.0 from 1, so tensor([1.0, 2.0]) is int64)';
}
function requireFloat(op, d) {
  if (!isFloating(d))
    throw new LoomDtypeError(`[${op}] expected a floating point tensor, got ${d}: ${floatHint(d)}`);
  return d;
}
function requireIndex(op, d) {
  if (!isIntegral(d))
    throw new LoomDtypeError(`[${op}] expected an index tensor of dtype int64 or int32, got ${d}`);
}
function requireInt64Index(op, d) {
  if (d !== "int64")
    throw new LoomDtypeError(`[${op}] expected dtype int64 for index, got ${d}`);
}

// src/graph/op.ts
function defineOp(op) {
  return op;
}

// src/graph/ops/elementwise.ts
function unary(name, ref, dtype, grad) {
  return defineOp({ kind: "elementwise", arity: 1, name, shape: sameShape, dtype, ref, grad });
}
function binary(name, ref, dtype, grad) {
  return defineOp({
    kind: "elementwise",
    arity: 2,
    name,
    shape: (i) => broadcastAll(name, i),
    dtype,
    ref,
    grad
  });
}
var arith = (i) => resultType(i);
var noBool = (name) => (i) => {
  const d = resultType(i);
  if (d === "bool")
    throw new LoomDtypeError(`[${name}] is not supported for bool tensors; use logical ops`);
  return d;
};
var mask = (m, like) => m.to(like.dtype);
function erf(x) {
  if (Number.isNaN(x))
    return x;
  const ax = Math.abs(x);
  if (ax < 0.5) {
    const t = x * x;
    const p = (((0.18577770618460315 * t + 3.1611237438705655) * t + 113.86415415105016) * t + 377.485237685302) * t + 3209.3775891384694;
    const q = (((t + 23.601290952344122) * t + 244.02463793444417) * t + 1282.6165260773723) * t + 2844.236833439171;
    return x * p / q;
  }
  let r;
  if (ax < 4) {
    const p = ((((((0.5641884969886701 * ax + 8.883149794388377) * ax + 66.11919063714163) * ax + 298.6351381974001) * ax + 881.952221241769) * ax + 1712.0476126340707) * ax + 2051.0783778260716) * ax + 1230.3393547979972;
    const q = (((((((ax + 15.744926110709835) * ax + 117.6939508913125) * ax + 537.1811018620099) * ax + 1621.3895745666903) * ax + 3290.7992357334597) * ax + 4362.619090143247) * ax + 3439.3676741437216) * ax + 1230.3393548037495;
    r = 1 - Math.exp(-ax * ax) * p / q;
  } else if (ax < 27) {
    const z = 1 / (ax * ax);
    const p = ((((0.016315387137302097 * z + 0.30532663496123236) * z + 0.36034489994980445) * z + 0.12578172611122926) * z + 0.016083785148742275) * z + 0.0006587491615298378;
    const q = ((((z + 2.568520192289822) * z + 1.8729528499234673) * z + 0.5279051029514285) * z + 0.06051834131244132) * z + 0.0023352049762686918;
    r = 1 - Math.exp(-ax * ax) / ax * (0.5641895835477563 - z * p / q);
  } else
    r = 1;
  return x < 0 ? -r : r;
}
var TWO_OVER_SQRT_PI = 1.1283791670955126;
var neg = unary("neg", (x) => -x, noBool("neg"), (g) => [g.neg()]);
var abs = unary("abs", Math.abs, sameDtype, (g, [x]) => [g.mul(x.sign())]);
var sign = unary("sign", (x) => x > 0 ? 1 : x < 0 ? -1 : 0, sameDtype, (g) => [g.zeros_like()]);
var exp = unary("exp", Math.exp, floatDtype, (g, _, out) => [g.mul(out)]);
var log = unary("log", Math.log, floatDtype, (g, [x]) => [g.div(x)]);
var log1p = unary("log1p", Math.log1p, floatDtype, (g, [x]) => [g.div(x.add(1))]);
var sqrt = unary("sqrt", Math.sqrt, floatDtype, (g, _, out) => [g.div(out.mul(2))]);
var rsqrt = unary("rsqrt", (x) => 1 / Math.sqrt(x), floatDtype, (g, _, out) => [g.mul(out.pow(3)).mul(-0.5)]);
var reciprocal = unary("reciprocal", (x) => 1 / x, floatDtype, (g, _, out) => [g.mul(out.mul(out)).neg()]);
var sin = unary("sin", Math.sin, floatDtype, (g, [x]) => [g.mul(x.cos())]);
var cos = unary("cos", Math.cos, floatDtype, (g, [x]) => [g.mul(x.sin()).neg()]);
var tanh = unary("tanh", Math.tanh, floatDtype, (g, _, out) => [g.mul(out.mul(out).neg().add(1))]);
var sigmoid = unary("sigmoid", (x) => 1 / (1 + Math.exp(-x)), floatDtype, (g, _, out) => [g.mul(out.mul(out.neg().add(1)))]);
var relu = unary("relu", (x) => x > 0 || Number.isNaN(x) ? x : 0, noBool("relu"), (g, _, out) => [g.zeros_like().where(out.le(0), g)]);
var erf_ = unary("erf", erf, floatDtype, (g, [x]) => [g.mul(x.mul(x).neg().exp().mul(TWO_OVER_SQRT_PI))]);
var floor = unary("floor", Math.floor, sameDtype, (g) => [g.zeros_like()]);
var ceil = unary("ceil", Math.ceil, sameDtype, (g) => [g.zeros_like()]);
var round = unary("round", (x) => {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}, sameDtype, (g) => [g.zeros_like()]);
var isnan = unary("isnan", (x) => Number.isNaN(x) ? 1 : 0, boolDtype);
var logical_not = unary("logical_not", (x) => x === 0 ? 1 : 0, boolDtype);
var contiguous = unary("contiguous", (x) => x, sameDtype, (g) => [g]);
var cast = defineOp({
  kind: "elementwise",
  arity: 1,
  name: "cast",
  shape: sameShape,
  dtype: (_, a) => a.dtype,
  ref: (x) => x,
  grad: (g, [x]) => [isFloating(x.dtype) && isFloating(g.dtype) ? g.to(x.dtype) : null],
  describe: (a) => a.dtype
});
var add = binary("add", (a, b) => a + b, arith, (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.sum_to_size(a.shape) : null,
  needs[1] ? g.sum_to_size(b.shape) : null
]);
var sub = binary("sub", (a, b) => a - b, noBool("sub"), (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.sum_to_size(a.shape) : null,
  needs[1] ? g.neg().sum_to_size(b.shape) : null
]);
var mul = binary("mul", (a, b) => a * b, arith, (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.mul(b).sum_to_size(a.shape) : null,
  needs[1] ? g.mul(a).sum_to_size(b.shape) : null
]);
var div = binary("div", (a, b) => a / b, (i) => promoteFloat(resultType(i)), (g, [a, b], out, _a, needs) => [
  needs[0] ? g.div(b).sum_to_size(a.shape) : null,
  needs[1] ? g.mul(out).div(b).neg().sum_to_size(b.shape) : null
]);
var floor_divide = binary("floor_divide", (a, b) => Math.floor(a / b), noBool("floor_divide"));
var remainder = binary("remainder", (a, b) => {
  const m = a % b;
  return m !== 0 && b < 0 !== m < 0 ? m + b : m;
}, noBool("remainder"), (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.sum_to_size(a.shape) : null,
  needs[1] ? g.mul(a.div(b).floor()).neg().sum_to_size(b.shape) : null
]);
var pow = binary("pow", Math.pow, noBool("pow"), (g, [a, b], out, _a, needs) => [
  needs[0] ? g.mul(b).mul(a.pow(b.sub(1))).where(b.ne(0), 0).sum_to_size(a.shape) : null,
  needs[1] ? g.mul(out).mul(a.log()).where(a.ne(0).logical_or(b.lt(0)), 0).sum_to_size(b.shape) : null
]);
var maximum = binary("maximum", (a, b) => Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b), arith, (g, [a, b], _o, _a, needs) => {
  const half = mask(a.eq(b), g).mul(0.5);
  return [
    needs[0] ? g.mul(mask(a.gt(b), g).add(half)).sum_to_size(a.shape) : null,
    needs[1] ? g.mul(mask(a.lt(b), g).add(half)).sum_to_size(b.shape) : null
  ];
});
var minimum = binary("minimum", (a, b) => Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b), arith, (g, [a, b], _o, _a, needs) => {
  const half = mask(a.eq(b), g).mul(0.5);
  return [
    needs[0] ? g.mul(mask(a.lt(b), g).add(half)).sum_to_size(a.shape) : null,
    needs[1] ? g.mul(mask(a.gt(b), g).add(half)).sum_to_size(b.shape) : null
  ];
});
var eq = binary("eq", (a, b) => a === b ? 1 : 0, boolDtype);
var ne = binary("ne", (a, b) => a !== b ? 1 : 0, boolDtype);
var lt = binary("lt", (a, b) => a < b ? 1 : 0, boolDtype);
var le = binary("le", (a, b) => a <= b ? 1 : 0, boolDtype);
var gt = binary("gt", (a, b) => a > b ? 1 : 0, boolDtype);
var ge = binary("ge", (a, b) => a >= b ? 1 : 0, boolDtype);
var logical_and = binary("logical_and", (a, b) => a !== 0 && b !== 0 ? 1 : 0, boolDtype);
var logical_or = binary("logical_or", (a, b) => a !== 0 || b !== 0 ? 1 : 0, boolDtype);
function intResultCheck(op, dtype) {
  if (!isIntegral(dtype))
    return null;
  const finite = (r) => {
    if (Number.isFinite(r))
      return r;
    throw new LoomValueError(op === "cast" ? `[cast] cannot convert ${r} to ${dtype}: integer tensors hold integers only` : `[${op}] result ${r} cannot be stored in a ${dtype} tensor`);
  };
  switch (op) {
    case "floor_divide":
    case "remainder":
      return (r, _a, b) => {
        if (b === 0)
          throw new LoomValueError(`[${op}] ZeroDivisionError: integer division by zero (${dtype})`);
        return finite(r);
      };
    case "pow":
      return (r, a, b) => b < 0 ? a === 1 ? 1 : a === -1 ? b % 2 === 0 ? 1 : -1 : 0 : finite(r);
    default:
      return finite;
  }
}
var where = defineOp({
  kind: "elementwise",
  arity: 3,
  name: "where",
  shape: (i) => broadcastAll("where", i),
  dtype: (i) => {
    if (i[0].dtype !== "bool")
      throw new LoomDtypeError(`[where] condition must be a bool tensor, got ${i[0].dtype}`);
    return resultType(i.slice(1));
  },
  ref: (c, a, b) => c ? a : b,
  grad: (g, [c, a, b], _o, _a, needs) => [
    null,
    needs[1] ? g.where(c, 0).sum_to_size(a.shape) : null,
    needs[2] ? g.zeros_like().where(c, g).sum_to_size(b.shape) : null
  ]
});

// src/graph/ops/movement.ts
var reshape = defineOp({
  kind: "view",
  arity: 1,
  name: "reshape",
  shape: ([x], a) => {
    if (numel(x.shape) !== numel(a.shape)) {
      throw new LoomShapeError(`[reshape] shape '${fmtShape(a.shape)}' is invalid for input of size ${numel(x.shape)}`);
    }
    return [...a.shape];
  },
  dtype: sameDtype,
  ref: (x, a) => {
    const st = viewStrides(x.shape, x.strides, a.shape);
    return st ? viewOf(x, a.shape, st, x.offset) : null;
  },
  grad: (g, [x]) => [g.reshape(x.shape)],
  describe: (a) => fmtShape(a.shape)
});
var permute = defineOp({
  kind: "view",
  arity: 1,
  name: "permute",
  shape: ([x], a) => {
    const n = x.shape.length;
    const seen = new Set(a.dims);
    if (a.dims.length !== n || seen.size !== n || a.dims.some((d) => d < 0 || d >= n)) {
      throw new LoomShapeError(`[permute] dims ${fmtShape(a.dims)} are not a permutation of the ${n} dims of a tensor of shape ${fmtShape(x.shape)}`);
    }
    return a.dims.map((d) => x.shape[d]);
  },
  dtype: sameDtype,
  ref: (x, a) => viewOf(x, a.dims.map((d) => x.shape[d]), a.dims.map((d) => x.strides[d]), x.offset),
  grad: (g, _x, _o, a) => {
    const inv = new Array(a.dims.length);
    a.dims.forEach((d, i) => {
      inv[d] = i;
    });
    return [g.permute(inv)];
  },
  describe: (a) => fmtShape(a.dims)
});
var expand = defineOp({
  kind: "view",
  arity: 1,
  name: "expand",
  shape: ([x], a) => {
    const xs = x.shape;
    const off = a.shape.length - xs.length;
    const neg = a.shape.findIndex((s) => !Number.isInteger(s) || s < 0);
    if (neg >= 0) {
      const where = neg < off ? "in a leading, non-existing dimension" : "at dimension";
      throw new LoomShapeError(`[expand] the expanded size of the tensor (${a.shape[neg]}) isn't allowed ${where} ${neg}. Target sizes: ${fmtShape(a.shape)}. Tensor sizes: ${fmtShape(xs)}`);
    }
    const bad = off < 0 ? 0 : xs.findIndex((s, i) => s !== 1 && s !== a.shape[off + i]);
    if (off < 0 || bad >= 0) {
      const why = off < 0 ? `the number of sizes provided (${a.shape.length}) must be greater or equal to the number of dimensions in the tensor (${xs.length})` : `the expanded size of the tensor (${a.shape[off + bad]}) must match the existing size (${xs[bad]}) at non-singleton dimension ${off + bad}`;
      throw new LoomShapeError(`[expand] ${why}. Target sizes: ${fmtShape(a.shape)}. Tensor sizes: ${fmtShape(xs)}`);
    }
    return [...a.shape];
  },
  dtype: sameDtype,
  ref: (x, a) => {
    const off = a.shape.length - x.shape.length;
    const st = a.shape.map((s, i) => i < off ? 0 : x.shape[i - off] === 1 && s !== 1 ? 0 : x.strides[i - off]);
    return viewOf(x, a.shape, st, x.offset);
  },
  grad: (g, [x]) => [g.sum_to_size(x.shape)],
  describe: (a) => fmtShape(a.shape)
});
function sliceLen(a) {
  return Math.max(0, Math.ceil((a.end - a.start) / a.step));
}
function sliceView(x, a) {
  const shape = [...x.shape];
  shape[a.dim] = sliceLen(a);
  const strides = [...x.strides];
  strides[a.dim] = x.strides[a.dim] * a.step;
  return viewOf(x, shape, strides, x.offset + a.start * x.strides[a.dim]);
}
var slice = defineOp({
  kind: "view",
  arity: 1,
  name: "slice",
  shape: ([x], a) => {
    const s = [...x.shape];
    if (!(a.dim >= 0 && a.dim < s.length && a.step > 0 && a.start >= 0 && (a.start >= a.end || a.end <= s[a.dim]))) {
      throw new LoomIndexError(`[slice] dim ${a.dim} ${a.start}:${a.end}:${a.step} is out of range for shape ${fmtShape(x.shape)}`);
    }
    s[a.dim] = sliceLen(a);
    return s;
  },
  dtype: sameDtype,
  ref: sliceView,
  grad: (g, [x], _o, a) => [g._apply(slice_backward, [], { ...a, input_shape: x.shape })],
  describe: (a) => `dim=${a.dim} ${a.start}:${a.end}:${a.step}`
});
var slice_backward = defineOp({
  kind: "kernel",
  arity: 1,
  name: "slice_backward",
  shape: (_i, a) => [...a.input_shape],
  dtype: sameDtype,
  ref: ([g], a, out) => {
    const dst = sliceView(out, a);
    forEachStrided(dst.shape, [dst, g], (_i, idx) => {
      out.data[idx[0]] = g.data[idx[1]];
    });
  },
  grad: (gg, _i, _o, a) => [gg._apply(slice, [], { dim: a.dim, start: a.start, end: a.end, step: a.step })],
  describe: (a) => `${fmtShape(a.input_shape)} dim=${a.dim} ${a.start}:${a.end}:${a.step}`
});
var cat = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "cat",
  shape: (ins, a) => {
    if (ins.length === 0)
      throw new LoomShapeError("[cat] expected a non-empty list of tensors");
    const first = ins[0].shape;
    let total = 0;
    for (const m of ins) {
      const bad = m.shape.length !== first.length || m.shape.some((s, i) => i !== a.dim && s !== first[i]);
      if (bad) {
        throw new LoomShapeError(`[cat] sizes of tensors must match except in dimension ${a.dim}: got ${fmtShape(first)} and ${fmtShape(m.shape)}`);
      }
      total += m.shape[a.dim];
    }
    const out = [...first];
    out[a.dim] = total;
    return out;
  },
  dtype: (ins) => resultType(ins.map((m) => ({ shape: [1], dtype: m.dtype }))),
  ref: (ins, a, out) => {
    let start = 0;
    for (const x of ins) {
      const len = x.shape[a.dim];
      const dst = sliceView(out, { dim: a.dim, start, end: start + len, step: 1 });
      forEachStrided(dst.shape, [dst, x], (_i, idx) => {
        out.data[idx[0]] = x.data[idx[1]];
      });
      start += len;
    }
  },
  grad: (g, ins, _o, a, needs) => {
    let start = 0;
    return ins.map((x, i) => {
      const len = x.shape[a.dim];
      const r = needs[i] ? g.narrow(a.dim, start, len) : null;
      start += len;
      return r;
    });
  },
  describe: (a) => `dim=${a.dim}`
});

// src/graph/ops/linalg_index.ts
var matmul = defineOp({
  kind: "kernel",
  arity: 2,
  name: "matmul",
  shape: ([a, b]) => {
    const as = a.shape, bs = b.shape;
    if (as.length < 2 || bs.length < 2)
      throw new LoomShapeError(`[matmul] expected 2-D or batched operands, got ${fmtShape(as)} and ${fmtShape(bs)}`);
    const k1 = as[as.length - 1], k2 = bs[bs.length - 2];
    if (k1 !== k2)
      throw new LoomShapeError(`[matmul] shapes ${fmtShape(as)} and ${fmtShape(bs)}: ${k1} != ${k2}`);
    const batch = broadcastShapes("matmul", as.slice(0, -2), bs.slice(0, -2));
    return [...batch, as[as.length - 2], bs[bs.length - 1]];
  },
  dtype: ([a, b]) => {
    if (a.dtype !== b.dtype)
      throw new LoomDtypeError(`[matmul] expected both operands to have the same dtype, but got ${a.dtype} and ${b.dtype}`);
    if (a.dtype === "bool")
      throw new LoomDtypeError("[matmul] is not implemented for bool");
    return a.dtype;
  },
  ref: ([a, b], _attrs, out) => {
    const M = out.shape[out.shape.length - 2], N = out.shape[out.shape.length - 1];
    const K = a.shape[a.shape.length - 1];
    const batch = out.shape.slice(0, -2);
    const sa = broadcastStrides(a.shape.slice(0, -2), a.strides.slice(0, -2), batch);
    const sb = broadcastStrides(b.shape.slice(0, -2), b.strides.slice(0, -2), batch);
    const [am, ak] = a.strides.slice(-2);
    const [bk, bn] = b.strides.slice(-2);
    const Ap = new Float64Array(M * K), Bp = new Float64Array(K * N), Cp = new Float64Array(M * N);
    const C = out.data;
    forEachStrided(batch, [{ strides: sa, offset: a.offset }, { strides: sb, offset: b.offset }], (bi, idx) => {
      pack(a.data, idx[0], M, K, am, ak, Ap);
      pack(b.data, idx[1], K, N, bk, bn, Bp);
      gemm(Ap, Bp, Cp, M, N, K);
      C.set(Cp, bi * M * N);
    });
  },
  grad: (g, [a, b], _o, _a, needs) => [
    needs[0] ? g.matmul(b.transpose(-2, -1)).sum_to_size(a.shape) : null,
    needs[1] ? a.transpose(-2, -1).matmul(g).sum_to_size(b.shape) : null
  ]
});
function gemm(A, B, C, M, N, K) {
  C.fill(0);
  const KB = 128;
  for (let k0 = 0;k0 < K; k0 += KB) {
    const k1 = k0 + KB < K ? k0 + KB : K;
    let i = 0;
    for (;i + 4 <= M; i += 4) {
      const c0 = i * N, c1 = c0 + N, c2 = c1 + N, c3 = c2 + N;
      for (let k = k0;k < k1; k++) {
        const a0 = A[i * K + k], a1 = A[(i + 1) * K + k], a2 = A[(i + 2) * K + k], a3 = A[(i + 3) * K + k];
        const bo = k * N;
        for (let j = 0;j < N; j++) {
          const b = B[bo + j];
          C[c0 + j] += a0 * b;
          C[c1 + j] += a1 * b;
          C[c2 + j] += a2 * b;
          C[c3 + j] += a3 * b;
        }
      }
    }
    for (;i < M; i++) {
      const ci = i * N;
      for (let k = k0;k < k1; k++) {
        const av = A[i * K + k];
        const bo = k * N;
        for (let j = 0;j < N; j++)
          C[ci + j] += av * B[bo + j];
      }
    }
  }
}
function pack(src, off, R, Cn, sr, sc, dst) {
  if (sc === 1) {
    for (let r = 0;r < R; r++) {
      const o = off + r * sr, d = r * Cn;
      for (let c = 0;c < Cn; c++)
        dst[d + c] = src[o + c];
    }
    return;
  }
  for (let r = 0;r < R; r++)
    for (let c = 0;c < Cn; c++)
      dst[r * Cn + c] = src[off + r * sr + c * sc];
}
var INDEX_CALLERS = ["embedding", "cross_entropy", "one_hot", "nll_loss"];
function indexError(op, v, size, dim, caller) {
  if (caller === "cross_entropy" || caller === "nll_loss")
    return new LoomIndexError(`[${caller}] Target ${v} is out of bounds.`);
  if (caller === "one_hot") {
    return new LoomValueError(v < 0 ? "[one_hot] class values must be non-negative" : `[one_hot] class values must be smaller than num_classes (${size}), got ${v}`);
  }
  return new LoomIndexError(`[${caller ?? op}] index ${v} is out of bounds for dimension ${dim} with size ${size}`);
}
function checkIndex(op, v, size, dim, caller) {
  if (!(v >= 0 && v < size))
    throw indexError(op, v, size, dim, caller);
  return v;
}
function nd1(shape) {
  return shape.length ? shape : [1];
}
function as1d(t) {
  return t.shape.length ? t : { ...t, shape: [1], strides: [1] };
}
function gatherPairs(op, x0, index0, a, fn) {
  const x = as1d(x0), index = as1d(index0), dim = a.dim;
  const size = x.shape[dim];
  const xs = x.strides.map((s, d) => d === dim ? 0 : s);
  forEachStrided(index.shape, [{ strides: xs, offset: x.offset }, index], (i, idx) => {
    const k = checkIndex(op, index.data[idx[1]], size, dim, a.caller);
    fn(i, idx[0] + k * x.strides[dim], idx[1]);
  });
}
function checkGatherShapes(op, x, index, dim) {
  const xs = nd1(x), is = nd1(index);
  const bad = is.length !== xs.length || is.some((s, d) => d !== dim && s > xs[d]);
  if (bad)
    throw new LoomShapeError(`[${op}] index ${fmtShape(index)} does not fit input ${fmtShape(x)} at dim ${dim}: same number of dims, sizes must be <= except at dim`);
}
function padTo(g, want) {
  if (shapesEqual(g.shape, want))
    return g;
  let r = g.reshape(nd1(g.shape));
  const ws = nd1(want);
  ws.forEach((s, d) => {
    const have = r.shape[d];
    if (have !== s)
      r = r._apply(slice_backward, [], { dim: d, start: 0, end: have, step: 1, input_shape: [...r.shape.slice(0, d), s, ...r.shape.slice(d + 1)] });
  });
  return r.reshape(want);
}
var gather = defineOp({
  kind: "kernel",
  arity: 2,
  name: "gather",
  shape: ([x, index], a) => {
    requireInt64Index("gather", index.dtype);
    checkGatherShapes("gather", x.shape, index.shape, a.dim);
    return [...index.shape];
  },
  dtype: sameDtype,
  ref: ([x, index], a, out) => gatherPairs("gather", x, index, a, (i, xi) => {
    out.data[i] = x.data[xi];
  }),
  grad: (g, [x, index], _o, a) => [x.zeros_like()._apply(scatter_add, [index, g], { dim: a.dim }), null],
  describe: describeIndex
});
function sameSourceDtype(op, [x, _index, src]) {
  if (x.dtype !== src.dtype)
    throw new LoomDtypeError(`[${op}] self (${x.dtype}) and source (${src.dtype}) must have the same dtype`);
  return x.dtype;
}
var scatter_add = defineOp({
  kind: "kernel",
  arity: 3,
  name: "scatter_add",
  shape: ([x, index, src], a) => {
    requireInt64Index("scatter_add", index.dtype);
    checkGatherShapes("scatter_add", x.shape, index.shape, a.dim);
    const is = nd1(index.shape), ss = nd1(src.shape);
    if (ss.length !== is.length || is.some((s, d) => s > ss[d]))
      throw new LoomShapeError(`[scatter_add] index ${fmtShape(index.shape)} is larger than src ${fmtShape(src.shape)}`);
    return [...x.shape];
  },
  dtype: (ms) => sameSourceDtype("scatter_add", ms),
  ref: ([x, index, src], a, out0) => {
    const out = as1d(out0);
    forEachStrided(x.shape, [x], (i, idx) => {
      out.data[i] = x.data[idx[0]];
    });
    const srcView = as1d(src);
    const so = [];
    forEachStrided(nd1(index.shape), [srcView], (_i, idx) => {
      so.push(idx[0]);
    });
    gatherPairs("scatter_add", out, index, a, (i, oi) => {
      out.data[oi] += src.data[so[i]];
    });
  },
  grad: (g, [_x, index, src], _o, a, needs) => [needs[0] ? g : null, null, needs[2] ? padTo(g._apply(gather, [index], { dim: a.dim }), src.shape) : null],
  describe: describeIndex
});
var index_select = defineOp({
  kind: "kernel",
  arity: 2,
  name: "index_select",
  shape: ([x, index], a) => {
    requireIndex("index_select", index.dtype);
    if (index.shape.length > 1)
      throw new LoomShapeError(`[index_select] index must be 1-D, got ${fmtShape(index.shape)}`);
    const n = numel(index.shape);
    if (x.shape.length === 0) {
      if (n !== 1)
        throw new LoomIndexError(`[index_select] index to a 0-d tensor can have only 1 value, got ${n}`);
      return [];
    }
    const s = [...x.shape];
    s[a.dim] = n;
    return s;
  },
  dtype: sameDtype,
  ref: ([x0, index], a, out0) => {
    const x = as1d(x0), out = as1d(out0);
    const n = numel(index.shape);
    const ks = Array.from({ length: n }, (_, j) => checkIndex("index_select", index.data[index.offset + j * (index.strides[0] ?? 0)], x.shape[a.dim], a.dim, a.caller));
    const xs = x.strides.map((s, d) => d === a.dim ? 0 : s);
    forEachStrided(out.shape, [{ strides: xs, offset: x.offset }], (i, idx) => {
      let rem = i;
      let pos = 0;
      for (let d = out.shape.length - 1;d >= 0; d--) {
        const s = out.shape[d];
        if (d === a.dim) {
          pos = rem % s;
          break;
        }
        rem = Math.floor(rem / s);
      }
      out.data[i] = x.data[idx[0] + ks[pos] * x.strides[a.dim]];
    });
  },
  grad: (g, [x, index], _o, a) => [x.zeros_like()._apply(index_add, [index, g], { dim: a.dim }), null],
  describe: describeIndex
});
var index_add = defineOp({
  kind: "kernel",
  arity: 3,
  name: "index_add",
  shape: ([x, index, src], a) => {
    requireIndex("index_add", index.dtype);
    if (index.shape.length > 1)
      throw new LoomShapeError(`[index_add] index must be 1-D, got ${fmtShape(index.shape)}`);
    const n = numel(index.shape);
    const want = [...nd1(x.shape)];
    want[a.dim] = n;
    const ss = nd1(src.shape);
    if (ss.length !== want.length || ss.some((s, d) => s !== want[d])) {
      throw new LoomShapeError(`[index_add] source ${fmtShape(src.shape)} does not match input ${fmtShape(x.shape)} with ${n} indices at dim ${a.dim}`);
    }
    return [...x.shape];
  },
  dtype: (ms) => sameSourceDtype("index_add", ms),
  ref: ([x, index, src0], a, out0) => {
    const out = as1d(out0), src = as1d(src0);
    forEachStrided(x.shape, [x], (i, idx) => {
      out.data[i] = x.data[idx[0]];
    });
    const n = numel(index.shape);
    const size = out.shape[a.dim];
    const ks = Array.from({ length: n }, (_, j) => checkIndex("index_add", index.data[index.offset + j * (index.strides[0] ?? 0)], size, a.dim, a.caller));
    const os = out.strides.map((s, d) => d === a.dim ? 0 : s);
    const posStride = src.strides[a.dim];
    const srcShape = [...src.shape];
    for (let j = 0;j < n; j++) {
      const one = { strides: src.strides, offset: src.offset + j * posStride };
      srcShape[a.dim] = 1;
      forEachStrided(srcShape, [{ strides: os, offset: ks[j] * out.strides[a.dim] }, one], (_i, idx) => {
        out.data[idx[0]] += src.data[idx[1]];
      });
    }
  },
  grad: (g, [_x, index, src], _o, a, needs) => [
    needs[0] ? g : null,
    null,
    needs[2] ? g.reshape(nd1(g.shape))._apply(index_select, [index], { dim: a.dim }).reshape(src.shape) : null
  ],
  describe: describeIndex
});
function describeIndex(a) {
  return a.caller ? `dim=${a.dim} (${a.caller})` : `dim=${a.dim}`;
}
var tri = defineOp({
  kind: "kernel",
  arity: 1,
  name: "tri",
  shape: ([x], a) => {
    if (x.shape.length < 2)
      throw new LoomShapeError(`[${a.upper ? "triu" : "tril"}] input tensor must have at least 2 dimensions, got ${fmtShape(x.shape)}`);
    return sameShape([x]);
  },
  dtype: sameDtype,
  ref: ([x], a, out) => {
    const R = x.shape[x.shape.length - 2], C = x.shape[x.shape.length - 1];
    forEachStrided(x.shape, [x], (i, idx) => {
      const c = i % C, r = Math.floor(i / C) % R;
      const keep = a.upper ? c - r >= a.diagonal : c - r <= a.diagonal;
      out.data[i] = keep ? x.data[idx[0]] : 0;
    });
  },
  grad: (g, _x, _o, a) => [g._apply(tri, [], a)],
  describe: (a) => `${a.upper ? "triu" : "tril"} diagonal=${a.diagonal}`
});

// src/graph/passes/program.ts
function programDtype(p) {
  return p.code[p.out].dtype;
}
var f322 = Math.fround;
var id = (v) => v;
function roundTo(d) {
  switch (d) {
    case "float32":
      return f322;
    case "float64":
      return id;
    case "int32":
      return (v) => v | 0;
    case "int8":
      return (v) => v << 24 >> 24;
    case "uint8":
      return (v) => v & 255;
    case "float16":
      return (v) => halfToFloat(floatToHalf(v));
    case "bfloat16":
      return (v) => bf16ToFloat(floatToBf16(v));
    case "int64":
    case "bool":
      return encoder(d);
  }
}
function storeRound(d) {
  switch (d) {
    case "int64":
      return id;
    case "bool":
      return (v) => v & 255;
    default:
      return roundTo(d);
  }
}
function encodeStored(d) {
  return d === "float16" ? floatToHalf : d === "bfloat16" ? floatToBf16 : null;
}
function describeProgram(p) {
  return p.code.map((c, i) => {
    if (c.k === "load")
      return `t${i}=in${c.input}`;
    if (c.k === "acc")
      return `t${i}=acc`;
    return `t${i}=${c.op.name}(${c.args.map((a) => `t${a}`).join(",")})`;
  }).join("; ") + ` -> t${p.out} ${fmtShape(p.shape)}`;
}
function programOps(p) {
  return p.code.flatMap((c) => c.k === "op" ? [c.op.name] : []);
}
function evaluator(p, ins) {
  const n = p.code.length;
  const vals = new Float64Array(n);
  const steps = p.code.map((c) => {
    if (c.k === "load") {
      const t = ins[c.input];
      const dec = decoder(t.dtype);
      return { c, data: t.data, base: t.offset + c.offset, dec, round: null, ref: null };
    }
    if (c.k === "acc")
      return { c, data: null, base: 0, dec: null, round: null, ref: null };
    const chk = intResultCheck(c.op.name, c.dtype), ref = c.op.ref;
    return { c, data: null, base: 0, dec: null, round: roundTo(c.dtype), ref: chk ? (a, b, x) => chk(ref(a, b, x), a, b) : ref };
  });
  return (idx, acc) => {
    for (let i = 0;i < n; i++) {
      const s = steps[i];
      const c = s.c;
      if (c.k === "load") {
        let k = s.base;
        for (let d = 0;d < c.strides.length; d++)
          k += idx[d] * c.strides[d];
        vals[i] = s.dec ? s.dec(s.data, k) : s.data[k];
      } else if (c.k === "acc")
        vals[i] = acc;
      else {
        const a = c.args;
        vals[i] = s.round(s.ref(vals[a[0]], a.length > 1 ? vals[a[1]] : 0, a.length > 2 ? vals[a[2]] : 0));
      }
    }
    return vals[p.out];
  };
}
function forEachIndex(shape, fn) {
  const total = numel(shape);
  const idx = new Int32Array(shape.length);
  for (let flat = 0;flat < total; flat++) {
    fn(flat, idx);
    for (let d = shape.length - 1;d >= 0; d--) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}
function interpret(p, ins, out, acc) {
  const ev = evaluator(p, ins);
  const enc = encodeStored(out.dtype);
  const dst = out.data;
  forEachIndex(p.shape, (flat, idx) => {
    const v = ev(idx, acc ? acc(flat) : 0);
    dst[flat] = enc ? enc(v) : v;
  });
}

// src/graph/ops/lora.ts
function loraDecomposed(x, Wt, At, Bt, s, bias, out) {
  const D = out.dtype, R = roundTo(D);
  const mm = (p, q) => {
    const shape = [...broadcastShapes("matmul", p.shape.slice(0, -2), q.shape.slice(0, -2)), p.shape[p.shape.length - 2], q.shape[q.shape.length - 1]];
    const r = allocData(D, shape);
    matmul.ref([p, q], {}, r);
    return r;
  };
  const Y = mm(x, Wt), H = mm(x, At), Dl = mm(H, Bt);
  const N = out.shape[out.shape.length - 1];
  const b = bias ? toFloat64(bias) : null;
  for (let i = 0;i < out.data.length; i++) {
    const base = b ? R(Y.data[i] + b[i % N]) : Y.data[i];
    out.data[i] = R(base + R(Dl.data[i] * s));
  }
}
var lora_linear = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "lora_linear",
  shape: ([x, W, A, B, b], a) => {
    const fin = x.shape[x.shape.length - 1];
    const [out, win] = W.shape;
    const [r, ain] = A.shape;
    const [bout, br] = B.shape;
    const ok = W.shape.length === 2 && A.shape.length === 2 && B.shape.length === 2 && win === fin && ain === fin && bout === out && br === r && (!a.has_bias || b.shape.length === 1 && b.shape[0] === out);
    if (!ok) {
      throw new LoomShapeError(`[lora_linear] shapes x ${fmtShape(x.shape)}, W ${fmtShape(W.shape)}, A ${fmtShape(A.shape)}, B ${fmtShape(B.shape)}${a.has_bias ? `, b ${fmtShape(b.shape)}` : ""} do not fit x [..., in], W [out, in], A [r, in], B [out, r], b [out]`);
    }
    return [...x.shape.slice(0, -1), out];
  },
  dtype: (ins) => {
    const d = ins[0].dtype;
    if (ins.some((m) => m.dtype !== d))
      throw new LoomDtypeError(`[lora_linear] operands must share a dtype, got ${ins.map((m) => m.dtype).join(", ")}`);
    return d;
  },
  ref: ([x, W, A, B, b], a, out) => {
    const t = (m) => ({ ...m, shape: [m.shape[1], m.shape[0]], strides: [m.strides[1], m.strides[0]] });
    const row = (v) => v.shape.length === 1 ? { ...v, shape: [1, v.shape[0]], strides: [0, v.strides[0]] } : v;
    loraDecomposed(row(x), t(W), t(A), t(B), roundTo(out.dtype)(a.scaling), a.has_bias ? b : null, row(out));
  },
  grad: (g, [x, W, A, B, b], _o, a, needs) => {
    const fin = x.shape[x.shape.length - 1], fout = W.shape[0];
    const x2 = x.reshape([-1, fin]);
    const g2 = g.reshape([-1, fout]);
    const gB = g2.matmul(B);
    return [
      needs[0] ? g.matmul(W).add(gB.matmul(A).mul(a.scaling).reshape(x.shape)) : null,
      needs[1] ? g2.transpose(0, 1).matmul(x2) : null,
      needs[2] ? gB.transpose(0, 1).matmul(x2).mul(a.scaling) : null,
      needs[3] ? g2.transpose(0, 1).matmul(x2.matmul(A.transpose(0, 1))).mul(a.scaling) : null,
      a.has_bias && needs[4] ? g2.sum(0) : null
    ];
  },
  describe: (a) => `scaling=${a.scaling}${a.has_bias ? " bias" : ""}`
});

// src/graph/ops/reduce.ts
function reducedShape(shape, dim, keepdim) {
  const out = [];
  for (let i = 0;i < shape.length; i++) {
    if (dim.includes(i)) {
      if (keepdim)
        out.push(1);
    } else
      out.push(shape[i]);
  }
  return out;
}
function keepdimView(g, inShape, a) {
  return a.keepdim ? g : g.reshape(reducedShape(inShape, a.dim, true));
}
var reduceShape = (i, a) => reducedShape(i[0].shape, a.dim, a.keepdim);
function extremeShape(name) {
  return (i, a) => {
    const x = i[0].shape;
    const d = a.dim.find((k) => x[k] === 0);
    if (d !== undefined)
      throw new LoomIndexError(`[${name}] expected reduction dim ${d} to have non-zero size (input shape ${fmtShape(x)})`);
    return reducedShape(x, a.dim, a.keepdim);
  };
}
var describe = (a) => `dim=[${a.dim.join(",")}]${a.keepdim ? " keepdim" : ""}`;
var sum = defineOp({
  kind: "reduce",
  arity: 1,
  name: "sum",
  init: 0,
  step: (acc, x) => acc + x,
  shape: reduceShape,
  dtype: (i) => isFloating(i[0].dtype) ? i[0].dtype : "int64",
  grad: (g, [x], _o, a) => [keepdimView(g, x.shape, a).expand(x.shape)],
  describe
});
function extremeGrad(g, x, out, a) {
  const hit = x.eq(keepdimView(out, x.shape, a)).to(g.dtype);
  return hit.div(hit.sum(a.dim, true)).mul(keepdimView(g, x.shape, a));
}
var nanMax = (acc, x) => x > acc || Number.isNaN(x) ? x : acc;
var nanMin = (acc, x) => x < acc || Number.isNaN(x) ? x : acc;
var amax = defineOp({
  kind: "reduce",
  arity: 1,
  name: "amax",
  init: -Infinity,
  step: nanMax,
  shape: extremeShape("amax"),
  dtype: (i) => i[0].dtype,
  grad: (g, [x], out, a) => [extremeGrad(g, x, out, a)],
  describe
});
var amin = defineOp({
  kind: "reduce",
  arity: 1,
  name: "amin",
  init: Infinity,
  step: nanMin,
  shape: extremeShape("amin"),
  dtype: (i) => i[0].dtype,
  grad: (g, [x], out, a) => [extremeGrad(g, x, out, a)],
  describe
});
function lanes(x, dim, fn) {
  const outerShape = x.shape.filter((_, i) => i !== dim);
  const outerStrides = x.strides.filter((_, i) => i !== dim);
  const stride = x.strides[dim] ?? 0;
  forEachStrided(outerShape, [{ strides: outerStrides, offset: x.offset }], (lane, idx) => fn(lane, idx[0], stride));
}
function argOp(name, largest) {
  return defineOp({
    kind: "kernel",
    arity: 1,
    name,
    shape: ([x], a) => {
      const s = x.shape;
      if (a.dim === null) {
        if (s.includes(0))
          throw new LoomIndexError(`[${name}] expected reduction dim to be specified for input.numel() == 0 (input shape ${fmtShape(s)})`);
        return a.keepdim ? s.map(() => 1) : [];
      }
      const d = normalizeDim(name, a.dim, s.length);
      if (s[d] === 0)
        throw new LoomIndexError(`[${name}] expected reduction dim ${d} to have non-zero size (input shape ${fmtShape(s)})`);
      if (x.shape.length === 0)
        return [];
      return reducedShape(x.shape, [d], a.keepdim);
    },
    dtype: () => "int64",
    ref: ([x], a, out) => {
      const flat = a.dim === null || x.shape.length === 0;
      const n0 = x.shape.reduce((p, s) => p * s, 1);
      const src = flat ? { dtype: x.dtype, shape: [n0], strides: [1], offset: 0, data: contig(x) } : x;
      const dim = flat ? 0 : normalizeDim(name, a.dim, x.shape.length);
      const n = src.shape[dim];
      if (n === 0)
        throw new LoomIndexError(`[${name}] expected reduction dim ${dim} to have non-zero size`);
      const d = src.data;
      lanes(src, dim, (lane, base, stride) => {
        let best = 0;
        let bv = d[base];
        for (let k = 1;k < n && !Number.isNaN(bv); k++) {
          const v = d[base + k * stride];
          if (Number.isNaN(v) || (largest ? v > bv : v < bv)) {
            bv = v;
            best = k;
          }
        }
        out.data[lane] = best;
      });
    },
    describe: (a) => `dim=${a.dim}${a.keepdim ? " keepdim" : ""}`
  });
}
var argmax = argOp("argmax", true);
var argmin = argOp("argmin", false);
function contig(x) {
  const n = x.shape.reduce((p, s) => p * s, 1);
  const out = new Float64Array(n);
  forEachStrided(x.shape, [x], (i, idx) => {
    out[i] = x.data[idx[0]];
  });
  return out;
}
var cumsum = defineOp({
  kind: "kernel",
  arity: 1,
  name: "cumsum",
  shape: ([x], a) => {
    normalizeDim("cumsum", a.dim, x.shape.length);
    return [...x.shape];
  },
  dtype: ([x]) => isIntegral(x.dtype) || x.dtype === "bool" ? "int64" : requireFloat("cumsum", x.dtype),
  ref: ([x], a, out) => {
    if (x.shape.length === 0) {
      out.data[0] = x.data[x.offset];
      return;
    }
    const dim = normalizeDim("cumsum", a.dim, x.shape.length);
    const n = x.shape[dim];
    const ostride = out.strides[dim];
    const outer = out.shape.filter((_, i) => i !== dim);
    const outerStrides = out.strides.filter((_, i) => i !== dim);
    const bases = [];
    forEachStrided(outer, [{ strides: outerStrides, offset: 0 }], (_l, idx) => {
      bases.push(idx[0]);
    });
    lanes(x, dim, (lane, base, stride) => {
      const ob = bases[lane];
      let acc = 0;
      for (let s = 0;s < n; s++) {
        const k = a.reverse ? n - 1 - s : s;
        acc += x.data[base + k * stride];
        out.data[ob + k * ostride] = acc;
      }
    });
  },
  grad: (g, _x, _o, a) => [g._apply(cumsum, [], { dim: a.dim, reverse: !a.reverse })],
  describe: (a) => `dim=${a.dim}${a.reverse ? " reverse" : ""}`
});

// src/graph/ops/sort.ts
function ascending(a, b) {
  if (a !== a)
    return b !== b ? 0 : 1;
  if (b !== b)
    return -1;
  return a < b ? -1 : a > b ? 1 : 0;
}
var argsort = defineOp({
  kind: "kernel",
  arity: 1,
  name: "argsort",
  shape: ([x], a) => {
    const s = x.shape.length ? [...x.shape] : [1];
    const n = s[a.dim];
    if (!Number.isInteger(a.k) || a.k < 0 || a.k > n) {
      throw new LoomIndexError(`[argsort] selected index k out of range: k = ${a.k} for dim ${a.dim} of size ${n} (input ${fmtShape(x.shape)})`);
    }
    s[a.dim] = a.k;
    return x.shape.length ? s : [];
  },
  dtype: () => "int64",
  ref: ([x], a, out) => {
    const v = toFloat64(x);
    const s = x.shape.length ? x.shape : [1];
    const n = s[a.dim];
    let outer = 1, inner = 1;
    for (let d = 0;d < a.dim; d++)
      outer *= s[d];
    for (let d = a.dim + 1;d < s.length; d++)
      inner *= s[d];
    const k = a.k;
    const idx = new Array(n);
    const key = new Float64Array(n);
    const cmp = a.descending ? (p, q) => ascending(key[q], key[p]) || p - q : (p, q) => ascending(key[p], key[q]) || p - q;
    for (let o = 0;o < outer; o++) {
      for (let i = 0;i < inner; i++) {
        const base = o * n * inner + i;
        for (let j = 0;j < n; j++) {
          idx[j] = j;
          key[j] = v[base + j * inner];
        }
        const ob = o * k * inner + i;
        if (k * 16 < n) {
          const top = firstK(idx, n, k, cmp);
          for (let r = 0;r < k; r++)
            out.data[ob + r * inner] = top[r];
        } else {
          idx.sort(cmp);
          for (let r = 0;r < k; r++)
            out.data[ob + r * inner] = idx[r];
        }
      }
    }
  },
  describe: (a) => `dim=${a.dim}${a.descending ? " descending" : ""} k=${a.k}`
});
function firstK(scratch, n, k, cmp) {
  if (k === 0)
    return [];
  const h = scratch;
  let size = 0;
  const down = (i) => {
    for (;; ) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < size && cmp(h[l], h[m]) > 0)
        m = l;
      if (r < size && cmp(h[r], h[m]) > 0)
        m = r;
      if (m === i)
        return;
      const t = h[i];
      h[i] = h[m];
      h[m] = t;
      i = m;
    }
  };
  for (let j = 0;j < n; j++) {
    if (size < k) {
      let i = size++;
      h[i] = j;
      while (i > 0) {
        const p = i - 1 >> 1;
        if (cmp(h[i], h[p]) <= 0)
          break;
        const t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
      }
    } else if (cmp(j, h[0]) < 0) {
      h[0] = j;
      down(0);
    }
  }
  return h.slice(0, k).sort(cmp);
}

// src/graph/passes/fused_ops.ts
var fused_elementwise = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_elementwise",
  shape: (_i, a) => [...a.program.shape],
  dtype: (_i, a) => programDtype(a.program),
  ref: (ins, a, out) => interpret(a.program, ins, out),
  describe: (a) => programOps(a.program).join(" ") || "copy"
});
function foldPrologue(a, ins) {
  const shape = a.prologue.shape;
  const kept = shape.map((_, i) => i).filter((i) => !a.dim.includes(i));
  const ev = evaluator(a.prologue, ins);
  const accs = new Float64Array(numel(kept.map((d) => shape[d])));
  const idx = new Int32Array(shape.length);
  const step = a.reduce.step;
  const round = storeRound(a.dtype);
  forEachIndex(kept.map((d) => shape[d]), (o, kidx) => {
    kept.forEach((d, i) => {
      idx[d] = kidx[i];
    });
    let acc = a.reduce.init;
    forEachIndex(a.dim.map((d) => shape[d]), (_r, ridx) => {
      a.dim.forEach((d, i) => {
        idx[d] = ridx[i];
      });
      acc = step(acc, ev(idx, 0));
    });
    accs[o] = round(acc);
  });
  return accs;
}
var fused_reduce = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_reduce",
  shape: (_i, a) => a.epilogue ? [...a.epilogue.shape] : reducedShape(a.prologue.shape, a.dim, a.keepdim),
  dtype: (_i, a) => a.epilogue ? programDtype(a.epilogue) : a.dtype,
  ref: (ins, a, out) => {
    const accs = foldPrologue(a, ins);
    if (a.epilogue)
      interpret(a.epilogue, ins, out, (f) => accs[f]);
    else {
      const enc = encodeStored(a.dtype);
      for (let i = 0;i < accs.length; i++)
        out.data[i] = enc ? enc(accs[i]) : accs[i];
    }
  },
  describe: (a) => [...programOps(a.prologue), `${a.reduce.name}[${a.dim.join(",")}]`, ...a.epilogue ? programOps(a.epilogue) : []].join(" ")
});
var fused_matmul = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_matmul",
  shape: (_i, a) => [...a.epilogue.shape],
  dtype: (_i, a) => programDtype(a.epilogue),
  ref: (ins, a, out) => {
    const prod = allocData(a.dtype, a.shape);
    matmul.ref([ins[0], ins[1]], {}, prod);
    interpret(a.epilogue, ins, out, (f) => prod.data[f]);
  },
  describe: (a) => ["matmul", ...programOps(a.epilogue)].join(" ")
});
var values = (t) => toFloat64(t);
function softmaxRows(shape, dim, D, value, store) {
  const R = roundTo(D), S = storeRound(D);
  const n = shape[dim];
  const outer = shape.map((_, i) => i).filter((i) => i !== dim);
  const idx = new Int32Array(shape.length);
  const inner = shape.slice(dim + 1).reduce((p, s) => p * s, 1);
  const v = new Float64Array(n), e = new Float64Array(n);
  forEachIndex(outer.map((d) => shape[d]), (_o, oidx) => {
    outer.forEach((d, i) => {
      idx[d] = oidx[i];
    });
    let m = amax.init;
    for (let j = 0;j < n; j++) {
      idx[dim] = j;
      v[j] = value(idx);
      m = amax.step(m, v[j]);
    }
    m = S(m);
    let z = sum.init;
    for (let j = 0;j < n; j++) {
      e[j] = R(exp.ref(R(sub.ref(v[j], m, 0)), 0, 0));
      z = sum.step(z, e[j]);
    }
    z = S(z);
    let base = 0;
    for (let d = 0;d < shape.length; d++)
      if (d !== dim)
        base = base * shape[d] + idx[d];
      else
        base = base * shape[d];
    for (let j = 0;j < n; j++)
      store(base + j * inner, R(div.ref(e[j], z, 0)));
  });
}
function softmaxDenseRows(v, rows, n, D, out, outOffset = 0) {
  const R = roundTo(D), S = storeRound(D);
  const e = new Float64Array(n);
  for (let r = 0;r < rows; r++) {
    const o = r * n;
    let m = amax.init;
    for (let j = 0;j < n; j++)
      m = amax.step(m, v[o + j]);
    m = S(m);
    let z = sum.init;
    for (let j = 0;j < n; j++) {
      e[j] = R(exp.ref(R(sub.ref(v[o + j], m, 0)), 0, 0));
      z = sum.step(z, e[j]);
    }
    z = S(z);
    for (let j = 0;j < n; j++)
      out[outOffset + o + j] = R(div.ref(e[j], z, 0));
  }
}
var fused_softmax = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_softmax",
  shape: (_i, a) => [...a.prologue.shape],
  dtype: (_i, a) => programDtype(a.prologue),
  ref: (ins, a, out) => {
    const ev = evaluator(a.prologue, ins);
    softmaxRows(a.prologue.shape, a.dim, out.dtype, (idx) => ev(idx, 0), (f, v) => {
      out.data[f] = v;
    });
  },
  describe: (a) => `dim=${a.dim} ${describeProgram(a.prologue)}`
});
var fused_layer_norm = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_layer_norm",
  shape: ([x]) => [...x.shape],
  dtype: ([x]) => x.dtype,
  ref: ([x, n1, n2, n3, eps, ...wb], a, out) => {
    const R = roundTo(out.dtype), S = storeRound(out.dtype);
    const X = values(x);
    const N = x.shape.slice(x.shape.length - a.dims).reduce((p, s) => p * s, 1);
    const c1 = values(n1)[0], c2 = values(n2)[0], c3 = values(n3)[0], ce = values(eps)[0];
    const W = a.has_weight ? values(wb[0]) : null;
    const B = a.has_bias ? values(wb[a.has_weight ? 1 : 0]) : null;
    const d = new Float64Array(N);
    for (let r = 0;r * N < X.length; r++) {
      const o = r * N;
      let s1 = sum.init;
      for (let j = 0;j < N; j++)
        s1 = sum.step(s1, X[o + j]);
      const m0 = R(div.ref(S(s1), c1, 0));
      let s2 = sum.init;
      for (let j = 0;j < N; j++) {
        d[j] = R(sub.ref(X[o + j], m0, 0));
        s2 = sum.step(s2, d[j]);
      }
      const c = R(div.ref(S(s2), c2, 0));
      let s3 = sum.init;
      for (let j = 0;j < N; j++) {
        d[j] = R(sub.ref(d[j], c, 0));
        s3 = sum.step(s3, R(mul.ref(d[j], d[j], 0)));
      }
      const rs = R(rsqrt.ref(R(add.ref(R(div.ref(S(s3), c3, 0)), ce, 0)), 0, 0));
      for (let j = 0;j < N; j++) {
        let y = R(mul.ref(d[j], rs, 0));
        if (W)
          y = R(mul.ref(y, W[j], 0));
        if (B)
          y = R(add.ref(y, B[j], 0));
        out.data[o + j] = y;
      }
    }
  },
  describe: (a) => `dims=${a.dims}${a.has_weight ? " weight" : ""}${a.has_bias ? " bias" : ""}`
});
var fused_rms_norm = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_rms_norm",
  shape: ([x]) => [...x.shape],
  dtype: ([x]) => x.dtype,
  ref: ([x, n, eps, w], a, out) => {
    const R = roundTo(out.dtype), S = storeRound(out.dtype);
    const X = values(x);
    const N = x.shape.slice(x.shape.length - a.dims).reduce((p, s) => p * s, 1);
    const cn = values(n)[0], ce = values(eps)[0];
    const W = a.has_weight ? values(w) : null;
    for (let r = 0;r * N < X.length; r++) {
      const o = r * N;
      let s = sum.init;
      for (let j = 0;j < N; j++)
        s = sum.step(s, R(mul.ref(X[o + j], X[o + j], 0)));
      const rs = R(rsqrt.ref(R(add.ref(R(div.ref(S(s), cn, 0)), ce, 0)), 0, 0));
      for (let j = 0;j < N; j++) {
        const y = R(mul.ref(X[o + j], rs, 0));
        out.data[o + j] = W ? R(mul.ref(y, W[j], 0)) : y;
      }
    }
  },
  describe: (a) => `dims=${a.dims}${a.has_weight ? " weight" : ""}`
});
var fused_lora_linear = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_lora_linear",
  shape: ([x, wt]) => [...broadcastShapes("fused_lora_linear", x.shape.slice(0, -2), wt.shape.slice(0, -2)), x.shape[x.shape.length - 2], wt.shape[wt.shape.length - 1]],
  dtype: ([x]) => x.dtype,
  ref: ([x, wt, at, bt, s, b], a, out) => loraDecomposed(x, wt, at, bt, values(s)[0], a.has_bias ? b : null, out),
  describe: (a) => a.has_bias ? "bias" : ""
});
var fused_attention = defineOp({
  kind: "kernel",
  arity: "variadic",
  name: "fused_attention",
  shape: ([q, _kt, v], a) => [...a.prologue.shape.slice(0, -1), v.shape[v.shape.length - 1]],
  dtype: (_i, a) => programDtype(a.prologue),
  ref: (ins, a, out) => {
    const [q, kt, v] = ins;
    const D = out.dtype, S = storeRound(D);
    const sshape = a.prologue.shape;
    const nd = sshape.length;
    const L = sshape[nd - 2], Sk = sshape[nd - 1], E = q.shape[q.shape.length - 1], Ev = v.shape[v.shape.length - 1];
    const batch = sshape.slice(0, -2);
    const st = (t) => broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch);
    const Qp = new Float64Array(L * E), Kp = new Float64Array(E * Sk), Sc = new Float64Array(L * Sk);
    const P = new Float64Array(L * Sk), Vp = new Float64Array(Sk * Ev), O = new Float64Array(L * Ev);
    const ev = evaluator(a.prologue, ins);
    const idx = new Int32Array(nd);
    forEachStrided(batch, [{ strides: st(q), offset: q.offset }, { strides: st(kt), offset: kt.offset }, { strides: st(v), offset: v.offset }], (bi, off) => {
      pack(q.data, off[0], L, E, q.strides[q.shape.length - 2], q.strides[q.shape.length - 1], Qp);
      pack(kt.data, off[1], E, Sk, kt.strides[kt.shape.length - 2], kt.strides[kt.shape.length - 1], Kp);
      gemm(Qp, Kp, Sc, L, Sk, E);
      let rem = bi;
      for (let d = batch.length - 1;d >= 0; d--) {
        idx[d] = rem % batch[d];
        rem = Math.floor(rem / batch[d]);
      }
      softmaxRows([L, Sk], 1, D, (ij) => {
        idx[nd - 2] = ij[0];
        idx[nd - 1] = ij[1];
        return ev(idx, S(Sc[ij[0] * Sk + ij[1]]));
      }, (f, p) => {
        P[f] = p;
      });
      pack(v.data, off[2], Sk, Ev, v.strides[v.shape.length - 2], v.strides[v.shape.length - 1], Vp);
      gemm(P, Vp, O, L, Ev, Sk);
      out.data.set(O, bi * L * Ev);
    });
  },
  describe: (a) => describeProgram(a.prologue)
});
function patternDtype(d) {
  return isFloating(d) && (d === "float32" || d === "float64");
}

// src/graph/registry.ts
var OPS = {
  neg,
  abs,
  sign,
  exp,
  log,
  log1p,
  sqrt,
  rsqrt,
  reciprocal,
  sin,
  cos,
  tanh,
  sigmoid,
  relu,
  erf: erf_,
  floor,
  ceil,
  round,
  isnan,
  logical_not,
  contiguous,
  cast,
  add,
  sub,
  mul,
  div,
  floor_divide,
  remainder,
  pow,
  maximum,
  minimum,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  logical_and,
  logical_or,
  where,
  sum,
  amax,
  amin,
  argmax,
  argmin,
  cumsum,
  reshape,
  permute,
  expand,
  slice,
  slice_backward,
  cat,
  matmul,
  gather,
  scatter_add,
  index_select,
  index_add,
  tri,
  argsort,
  lora_linear
};
var FUSED_OPS = {
  fused_elementwise,
  fused_reduce,
  fused_matmul,
  fused_softmax,
  fused_layer_norm,
  fused_rms_norm,
  fused_lora_linear,
  fused_attention
};
for (const [k, op] of [...Object.entries(OPS), ...Object.entries(FUSED_OPS)]) {
  if (k !== op.name)
    throw new Error(`op registry: key '${k}' holds op '${op.name}'`);
}

// src/backends/js/codegen.ts
var INLINE = {
  add: (a, b) => `(${a} + ${b})`,
  sub: (a, b) => `(${a} - ${b})`,
  mul: (a, b) => `(${a} * ${b})`,
  div: (a, b) => `(${a} / ${b})`,
  neg: (a) => `(-${a})`,
  exp: (a) => `Math.exp(${a})`,
  log: (a) => `Math.log(${a})`,
  sqrt: (a) => `Math.sqrt(${a})`,
  tanh: (a) => `Math.tanh(${a})`,
  abs: (a) => `Math.abs(${a})`,
  contiguous: (a) => a,
  cast: (a) => a,
  where: (c, a, b) => `(${c} ? ${a} : ${b})`
};
function round2(d, e) {
  switch (d) {
    case "float32":
      return `Math.fround(${e})`;
    case "float64":
      return e;
    case "int32":
      return `(${e} | 0)`;
    case "int8":
      return `((${e} << 24) >> 24)`;
    case "uint8":
      return `(${e} & 255)`;
    default:
      return `RND_${d}(${e})`;
  }
}
var cache = new Map;
var codegenStats = { compiled: 0, reused: 0 };
function collapse(shape, strides) {
  const keep = shape.map((_, i) => i).filter((i) => shape[i] !== 1);
  const outShape = [];
  const outStrides = strides.map(() => []);
  for (const d of keep) {
    const last = outShape.length - 1;
    if (last >= 0 && strides.every((s, k) => outStrides[k][last] === s[d] * shape[d])) {
      outShape[last] *= shape[d];
      strides.forEach((s, k) => {
        outStrides[k][last] = s[d];
      });
    } else {
      outShape.push(shape[d]);
      strides.forEach((s, k) => outStrides[k].push(s[d]));
    }
  }
  return { shape: outShape, strides: outStrides };
}
function loopNest(shape, acc, strides, body, prefix) {
  const nd = shape.length;
  if (nd === 0) {
    return `{ ${acc.map((a, k) => `const ${prefix}${k} = o${a.input} + ${a.offset};`).join(" ")}
${body}
}`;
  }
  let src = "";
  for (let d = 0;d < nd - 1; d++)
    src += `for (let ${prefix}i${d} = 0; ${prefix}i${d} < ${shape[d]}; ${prefix}i${d}++) {
`;
  const ptrInit = acc.map((a, k) => {
    let e = `o${a.input} + ${a.offset}`;
    for (let d = 0;d < nd - 1; d++)
      if (strides[k][d] !== 0)
        e += ` + ${prefix}i${d} * ${strides[k][d]}`;
    return `let ${prefix}${k} = ${e};`;
  }).join(" ");
  const inc = acc.map((_, k) => strides[k][nd - 1] !== 0 ? `${prefix}${k} += ${strides[k][nd - 1]};` : "").join(" ");
  src += `${ptrInit}
for (let ${prefix}j = 0; ${prefix}j < ${shape[nd - 1]}; ${prefix}j++) {
${body}
${inc}
}
`;
  for (let d = 0;d < nd - 1; d++)
    src += `}
`;
  return src;
}
function emitCode(p, loads, ptr, accExpr, invariant) {
  const pre = [];
  const body = [];
  p.code.forEach((c, i) => {
    let e;
    if (c.k === "load") {
      const at = invariant[i] ? `o${c.input} + ${c.offset}` : ptr(loads.get(i));
      e = decoder(c.dtype) ? `DEC_${c.dtype}(d${c.input}, ${at})` : `d${c.input}[${at}]`;
    } else if (c.k === "acc")
      e = accExpr;
    else {
      const args = c.args.map((a) => `t${a}`);
      const inl = INLINE[c.op.name];
      const v = inl ? inl(args[0], args[1], args[2]) : `F_${c.op.name}(${args[0]}, ${args[1] ?? 0}, ${args[2] ?? 0})`;
      e = round2(c.dtype, intResultCheck(c.op.name, c.dtype) ? `CHK_${c.op.name}_${c.dtype}(${v}, ${args[0]}, ${args[1] ?? 0})` : v);
    }
    (invariant[i] ? pre : body).push(`const t${i} = ${e};`);
  });
  return { pre, body };
}
function invariants(p) {
  const inv = [];
  p.code.forEach((c, i) => {
    inv[i] = c.k === "load" ? c.strides.every((s) => s === 0) : c.k === "op" ? c.args.every((a) => inv[a]) : false;
  });
  return inv;
}
function storeExpr(d, v) {
  return d === "float16" || d === "bfloat16" ? `ENC_${d}(${v})` : v;
}
function environment(progs, extra = {}) {
  const env = { ...extra };
  for (const p of progs) {
    for (const c of p.code) {
      if (c.k === "op" && !INLINE[c.op.name])
        env[`F_${c.op.name}`] = c.op.ref;
      if (c.k === "op" && intResultCheck(c.op.name, c.dtype))
        env[`CHK_${c.op.name}_${c.dtype}`] = intResultCheck(c.op.name, c.dtype);
      if (c.k !== "load" && !["float32", "float64", "int32", "int8", "uint8"].includes(c.dtype))
        env[`RND_${c.dtype}`] = roundTo(c.dtype);
      if (c.k === "load" && decoder(c.dtype))
        env[`DEC_${c.dtype}`] = decoder(c.dtype);
    }
  }
  env.ENC_float16 = floatToHalf;
  env.ENC_bfloat16 = floatToBf16;
  return [Object.keys(env), Object.values(env)];
}
function compile(src, progs, extra = {}) {
  const hit = cache.get(src);
  if (hit) {
    codegenStats.reused++;
    return hit;
  }
  const [names, vals] = environment(progs, extra);
  const k = new Function(...names, src)(...vals);
  codegenStats.compiled++;
  cache.set(src, k);
  return k;
}
function inputsPrelude(n) {
  return Array.from({ length: n }, (_, i) => `const d${i} = ins[${i}].data, o${i} = ins[${i}].offset;`).join(`
`);
}
function maxInput(progs) {
  let m = -1;
  for (const p of progs)
    for (const c of p?.code ?? [])
      if (c.k === "load")
        m = Math.max(m, c.input);
  return m + 1;
}
function elementwiseKernel(p) {
  const inv = invariants(p);
  const loadIdx = p.code.map((c, i) => c.k === "load" && !inv[i] ? i : -1).filter((i) => i >= 0);
  const acc = loadIdx.map((i) => p.code[i]);
  const col = collapse(p.shape, acc.map((a) => a.strides));
  const loads = new Map(loadIdx.map((i, k) => [i, k]));
  const { pre, body } = emitCode(p, loads, (k) => `q${k}`, "A[p]", inv);
  const store = `dst[p++] = ${storeExpr(programDtype(p), `t${p.out}`)};`;
  const src = `return function fused(ins, out, A) {
${inputsPrelude(maxInput([p]))}
const dst = out.data;
let p = 0;
${pre.join(`
`)}
${loopNest(col.shape, acc, col.strides, `${body.join(`
`)}
${store}`, "q")}
};`;
  return compile(src, [p]);
}
function reduceKernel(r) {
  const pro = r.prologue;
  const shape = pro.shape;
  const kept = shape.map((_, i) => i).filter((i) => !r.dim.includes(i));
  const inv = invariants(pro);
  const proLoads = pro.code.map((c, i) => c.k === "load" && !inv[i] ? i : -1).filter((i) => i >= 0);
  const acc = proLoads.map((i) => pro.code[i]);
  const outer = collapse(kept.map((d) => shape[d]), acc.map((a) => kept.map((d) => a.strides[d])));
  const inner = collapse(r.dim.map((d) => shape[d]), acc.map((a) => r.dim.map((d) => a.strides[d])));
  const proC = emitCode(pro, new Map(proLoads.map((i, k) => [i, k])), (k) => `r${k}`, "0", inv);
  const innerBody = `${proC.body.join(`
`)}
acc = STEP(acc, t${pro.out});`;
  const nd = inner.shape.length;
  let innerLoops;
  if (nd === 0)
    innerLoops = `{ ${acc.map((_, k) => `const r${k} = q${k};`).join(" ")}
${innerBody}
}`;
  else {
    innerLoops = "";
    for (let d = 0;d < nd - 1; d++)
      innerLoops += `for (let ri${d} = 0; ri${d} < ${inner.shape[d]}; ri${d}++) {
`;
    const init = acc.map((_, k) => {
      let e = `q${k}`;
      for (let d = 0;d < nd - 1; d++)
        if (inner.strides[k][d] !== 0)
          e += ` + ri${d} * ${inner.strides[k][d]}`;
      return `let r${k} = ${e};`;
    }).join(" ");
    const inc = acc.map((_, k) => inner.strides[k][nd - 1] !== 0 ? `r${k} += ${inner.strides[k][nd - 1]};` : "").join(" ");
    innerLoops += `${init}
for (let rj = 0; rj < ${inner.shape[nd - 1]}; rj++) {
${innerBody}
${inc}
}
`;
    for (let d = 0;d < nd - 1; d++)
      innerLoops += `}
`;
  }
  const body = `let acc = ${r.reduce.init};
${innerLoops}
ACC[p++] = ACC_ROUND(acc);`;
  const src = `/* ${r.reduce.name} -> ${r.dtype} */
return function fusedReduce(ins, ACC) {
${inputsPrelude(maxInput([pro]))}
let p = 0;
${proC.pre.join(`
`)}
${loopNest(outer.shape, acc, outer.strides, body, "q")}
};`;
  const fold = compile(src, [pro], { STEP: r.reduce.step, ACC_ROUND: storeRound(r.dtype) });
  const epi = r.epilogue ? elementwiseKernel(r.epilogue) : null;
  const enc = r.dtype === "float16" ? floatToHalf : r.dtype === "bfloat16" ? floatToBf16 : null;
  let accs = new Float64Array(0);
  return (ins, out) => {
    const n = out.data.length;
    if (accs.length < n)
      accs = new Float64Array(n);
    fold(ins, accs);
    if (epi)
      epi(ins, out, accs);
    else if (enc)
      for (let i = 0;i < n; i++)
        out.data[i] = enc(accs[i]);
    else
      for (let i = 0;i < n; i++)
        out.data[i] = accs[i];
  };
}
function matmulKernel(epilogue, dtype, shape, matmul) {
  const epi = elementwiseKernel(epilogue);
  const same = programDtype(epilogue) === dtype;
  const strides = contiguousStrides(shape);
  return (ins, out) => {
    const n = out.data.length;
    const prod = { dtype, shape, strides, offset: 0, data: same ? out.data : allocArray(dtype, n) };
    matmul([ins[0], ins[1]], prod);
    epi(ins, out, prod.data);
  };
}
function softmaxKernel(prologue, dim, softmax, fallback) {
  if (dim !== prologue.shape.length - 1)
    return fallback;
  const pro = elementwiseKernel(prologue);
  const n = prologue.shape[dim];
  const D = programDtype(prologue);
  let v = new Float64Array(0);
  return (ins, out) => {
    const total = out.data.length;
    if (v.length < total)
      v = new Float64Array(total);
    pro(ins, { dtype: "float64", shape: prologue.shape, strides: [], offset: 0, data: v });
    softmax(v, n === 0 ? 0 : total / n, n, D, out.data);
  };
}
function attentionKernel(prologue, gemmOps) {
  const nd = prologue.shape.length;
  const L = prologue.shape[nd - 2], S = prologue.shape[nd - 1];
  const batch = prologue.shape.slice(0, -2);
  const D = programDtype(prologue);
  const round = storeRound(D);
  const loads = prologue.code.map((c, i) => c.k === "load" ? i : -1).filter((i) => i >= 0);
  const slab = {
    shape: [L, S],
    out: prologue.out,
    code: prologue.code.map((c, i) => c.k === "load" ? { ...c, input: loads.indexOf(i), strides: c.strides.slice(-2) } : c)
  };
  const pro = elementwiseKernel(slab);
  const batchStrides = loads.map((i) => prologue.code[i].strides.slice(0, -2));
  const inputOf = loads.map((i) => prologue.code[i].input);
  return (ins, out) => {
    const [q, kt, v] = ins;
    const E = q.shape[q.shape.length - 1], Ev = v.shape[v.shape.length - 1];
    const st = (t) => broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch);
    const [sq, sk, sv] = [st(q), st(kt), st(v)];
    const Qp = new Float64Array(L * E), Kp = new Float64Array(E * S), Sc = new Float64Array(L * S);
    const Vals = new Float64Array(L * S), P = new Float64Array(L * S), Vp = new Float64Array(S * Ev), O = new Float64Array(L * Ev);
    const nb = batch.reduce((p, x) => p * x, 1);
    const idx = new Array(batch.length).fill(0);
    const slabOut = { dtype: "float64", shape: [L, S], strides: [S, 1], offset: 0, data: Vals };
    for (let bi = 0;bi < nb; bi++) {
      let oq = q.offset, ok = kt.offset, ov = v.offset;
      for (let d = 0;d < batch.length; d++) {
        oq += idx[d] * sq[d];
        ok += idx[d] * sk[d];
        ov += idx[d] * sv[d];
      }
      gemmOps.pack(q.data, oq, L, E, q.strides[q.shape.length - 2], q.strides[q.shape.length - 1], Qp);
      gemmOps.pack(kt.data, ok, E, S, kt.strides[kt.shape.length - 2], kt.strides[kt.shape.length - 1], Kp);
      gemmOps.gemm(Qp, Kp, Sc, L, S, E);
      for (let i = 0;i < Sc.length; i++)
        Sc[i] = round(Sc[i]);
      const slabIns = inputOf.map((k, j) => {
        const t = ins[k];
        let off = t.offset;
        for (let d = 0;d < batch.length; d++)
          off += idx[d] * batchStrides[j][d];
        return { ...t, offset: off };
      });
      pro(slabIns, slabOut, Sc);
      gemmOps.softmax(Vals, L, S, D, P);
      gemmOps.pack(v.data, ov, S, Ev, v.strides[v.shape.length - 2], v.strides[v.shape.length - 1], Vp);
      gemmOps.gemm(P, Vp, O, L, Ev, S);
      out.data.set(O, bi * L * Ev);
      for (let d = batch.length - 1;d >= 0; d--) {
        if (++idx[d] < batch[d])
          break;
        idx[d] = 0;
      }
    }
  };
}

// src/backends/js/backend.ts
function runElementwise(op, ins, out) {
  const chk = intResultCheck(op.name, out.dtype);
  const ref = op.ref;
  const f = chk ? (a, b, c) => chk(ref(a, b, c), a, b) : ref;
  const dst = out.data;
  const n = dst.length;
  const enc = out.dtype === "int64" || out.dtype === "bool" ? encoder(out.dtype) : null;
  const dense = ins.every((x) => isDense(x) && numel(x.shape) === n);
  if (dense && !enc) {
    if (op.arity === 1) {
      const a = ins[0].data, ao = ins[0].offset;
      for (let i = 0;i < n; i++)
        dst[i] = f(a[ao + i], 0, 0);
    } else if (op.arity === 2) {
      const a = ins[0].data, ao = ins[0].offset, b = ins[1].data, bo = ins[1].offset;
      for (let i = 0;i < n; i++)
        dst[i] = f(a[ao + i], b[bo + i], 0);
    } else {
      const a = ins[0].data, b = ins[1].data, c = ins[2].data;
      const ao = ins[0].offset, bo = ins[1].offset, co = ins[2].offset;
      for (let i = 0;i < n; i++)
        dst[i] = f(a[ao + i], b[bo + i], c[co + i]);
    }
    return;
  }
  const views = ins.map((x) => ({ strides: broadcastStrides(x.shape, x.strides, out.shape), offset: x.offset }));
  const [a, b, c] = ins.map((x) => x.data);
  const put = enc ? (i, v) => {
    dst[i] = enc(v);
  } : (i, v) => {
    dst[i] = v;
  };
  if (op.arity === 1)
    forEachStrided(out.shape, views, (i, idx) => put(i, f(a[idx[0]], 0, 0)));
  else if (op.arity === 2)
    forEachStrided(out.shape, views, (i, idx) => put(i, f(a[idx[0]], b[idx[1]], 0)));
  else
    forEachStrided(out.shape, views, (i, idx) => put(i, f(a[idx[0]], b[idx[1]], c[idx[2]])));
}
function runReduce(op, x, dims, out) {
  const kept = x.shape.map((_, i) => i).filter((i) => !dims.includes(i));
  const order = [...kept, ...dims];
  const perm = viewOf(x, order.map((d) => x.shape[d]), order.map((d) => x.strides[d]), x.offset);
  const src = toContiguous(perm).data;
  const r = dims.reduce((p, d) => p * x.shape[d], 1);
  const dst = out.data;
  const step = op.step;
  for (let o = 0;o < dst.length; o++) {
    let acc = op.init;
    const base = o * r;
    for (let k = 0;k < r; k++)
      acc = step(acc, src[base + k]);
    dst[o] = acc;
  }
}

class JsBackend {
  name = "js";
  stats = { ops: 0, byOp: new Map };
  run(op, inputs, attrs, shape, dtype) {
    this.stats.ops++;
    this.stats.byOp.set(op.name, (this.stats.byOp.get(op.name) ?? 0) + 1);
    return this.runUncounted(op, inputs, attrs, shape, dtype);
  }
  runUncounted(op, inputs, attrs, shape, dtype) {
    if (op.kind === "view") {
      const v = op.ref(inputs[0], attrs) ?? op.ref(toContiguous(inputs[0]), attrs);
      if (!v)
        throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const ins = inputs.map((x) => isHalf(x.dtype) ? toContiguous(x, "float32") : x);
    const half = isHalf(dtype);
    const out = allocData(half ? "float32" : dtype, shape);
    switch (op.kind) {
      case "elementwise":
        runElementwise(op, ins, out);
        break;
      case "reduce":
        runReduce(op, ins[0], attrs.dim, out);
        break;
      case "kernel":
        op.ref(ins, attrs, out);
        break;
    }
    return half ? toContiguous(out, dtype) : out;
  }
  fusedOps = Object.keys(FUSED_OPS);
  prepare(op, inputs, attrs, shape, dtype) {
    const k = this.kernelFor(op, inputs, attrs, shape, dtype);
    const stats = this.stats;
    const name = op.name;
    return (ins, out) => {
      stats.ops++;
      stats.byOp.set(name, (stats.byOp.get(name) ?? 0) + 1);
      k(ins, out);
    };
  }
  kernelFor(op, inputs, attrs, shape, dtype) {
    switch (op.name) {
      case "fused_elementwise":
        return elementwiseKernel(attrs.program);
      case "fused_reduce":
        return reduceKernel(attrs);
      case "fused_softmax": {
        const a = attrs;
        return softmaxKernel(a.prologue, a.dim, softmaxDenseRows, (ins, out) => FUSED_OPS.fused_softmax.ref(ins, a, out));
      }
      case "fused_attention":
        return attentionKernel(attrs.prologue, { pack, gemm, softmax: softmaxDenseRows });
      case "fused_matmul": {
        const mm = OPS.matmul;
        const a = attrs;
        return matmulKernel(a.epilogue, a.dtype, a.shape, (ins, out) => mm.ref(ins, {}, out));
      }
    }
    const loads = inputs.map((x, i) => ({ k: "load", input: i, strides: op.kind === "reduce" ? x.strides : broadcastStrides(x.shape, x.strides, shape), offset: 0, dtype: x.dtype }));
    if (op.kind === "elementwise") {
      return elementwiseKernel({ shape, code: [...loads, { k: "op", op, args: loads.map((_, i) => i), dtype }], out: loads.length });
    }
    if (op.kind === "reduce") {
      const prologue = { shape: inputs[0].shape, code: loads, out: 0 };
      return reduceKernel({ prologue, reduce: op, dim: attrs.dim, dtype, epilogue: null });
    }
    if (op.kind === "view")
      throw new Error(`[${op.name}] views are resolved by the plan, not run`);
    const half = isHalf(dtype) || inputs.some((x) => isHalf(x.dtype));
    if (half || op.name.startsWith("fused_") === false && !OVERWRITES.has(op.name)) {
      const run = (ins, out) => {
        if (half) {
          const r = this.runUncounted(op, ins, attrs, shape, dtype);
          out.data.set(r.data.subarray(r.offset, r.offset + out.data.length));
        } else {
          out.data.fill(0);
          op.ref(ins, attrs, out);
        }
      };
      return run;
    }
    return (ins, out) => op.ref(ins, attrs, out);
  }
  static op(name) {
    return OPS[name];
  }
}
var OVERWRITES = new Set(["matmul", "gather", "index_select", "cat", "tri", "cumsum", "argmax", "argmin"]);
var jsBackend = new JsBackend;

// src/graph/passes/ir.ts
var nextId2 = 0;
function mkNode(op, inputs, attrs, shape, dtype, origins = [], retain = false) {
  return { id: nextId2++, op, inputs, attrs, shape, dtype, leaf: null, constant: false, origins, retain };
}
function mkLeaf(data, constant, origins = []) {
  return { id: nextId2++, op: null, inputs: [], attrs: null, shape: data.shape, dtype: data.dtype, leaf: data, constant, origins, retain: false };
}
function withInputs(n, inputs) {
  return { ...n, id: nextId2++, inputs };
}
function topo(outputs) {
  const order = [];
  const seen = new Set;
  const stack = [];
  for (const r of outputs) {
    if (seen.has(r))
      continue;
    seen.add(r);
    stack.push([r, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const n = top[0];
      if (top[1] < n.inputs.length) {
        const c = n.inputs[top[1]++];
        if (!seen.has(c)) {
          seen.add(c);
          stack.push([c, 0]);
        }
      } else {
        stack.pop();
        order.push(n);
      }
    }
  }
  return order;
}
function makeGraph(outputs) {
  return { nodes: topo(outputs), outputs };
}
function fromLazy(roots, retainAll = false) {
  const map = new Map;
  const stack = [];
  const visit = (r) => {
    if (map.has(r))
      return;
    stack.push([r, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const n = top[0];
      if (!n.realized && top[1] < n.inputs.length) {
        const c = n.inputs[top[1]++];
        if (!map.has(c))
          stack.push([c, 0]);
        continue;
      }
      stack.pop();
      if (map.has(n))
        continue;
      if (n.stale)
        throw staleError(n);
      if (n.realized)
        map.set(n, mkLeaf(n.realized, n.constant, [n]));
      else {
        const keep = retainAll || n.tracked !== null && !n.tracked.released;
        map.set(n, mkNode(n.op, n.inputs.map((c) => map.get(c)), n.attrs, n.shape, n.dtype, [n], keep));
      }
    }
  };
  for (const r of roots)
    visit(r);
  return makeGraph(roots.map((r) => map.get(r)));
}
function rewrite(g, rule) {
  const map = new Map;
  let changed = false;
  for (const n of g.nodes) {
    const ins = n.inputs.map((c) => map.get(c));
    const r = rule(n, ins);
    if (r) {
      map.set(n, r);
      if (r !== n)
        changed = true;
    } else
      map.set(n, ins.every((c, i) => c === n.inputs[i]) ? n : withInputs(n, ins));
  }
  if (!changed)
    return g;
  return { ...makeGraph(g.outputs.map((o) => map.get(o))), changed };
}
function usersOf(g) {
  const users = new Map;
  for (const n of g.nodes)
    users.set(n, []);
  for (const n of g.nodes)
    for (const c of n.inputs)
      users.get(c).push(n);
  return users;
}
var canonCache = new WeakMap;
function canon(v, cache = true) {
  if (v === null || v === undefined)
    return "_";
  if (typeof v === "number")
    return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v === "string")
    return JSON.stringify(v);
  if (typeof v === "boolean")
    return v ? "T" : "F";
  if (typeof v !== "object")
    return String(v);
  if (!Array.isArray(v)) {
    let empty = true;
    for (const _k in v) {
      empty = false;
      break;
    }
    if (empty)
      return "{}";
  }
  const hit = canonCache.get(v);
  if (hit !== undefined)
    return hit;
  let s;
  if (Array.isArray(v)) {
    s = "[";
    for (let i = 0;i < v.length; i++)
      s += (i ? "," : "") + canon(v[i], cache);
    s += "]";
  } else if ("name" in v && "kind" in v && typeof v.kind === "string")
    s = `@${v.name}`;
  else {
    s = "{";
    for (const k in v)
      s += `${k}:${canon(v[k], cache)},`;
    s += "}";
  }
  if (cache)
    canonCache.set(v, s);
  return s;
}
function leafKey(d) {
  return `${d.dtype}[${d.shape.join(",")}]/[${d.strides.map((s, k) => d.shape[k] === 1 ? 0 : s).join(",")}]`;
}
function structuralKey(g, extra = "") {
  const index = new Map;
  const parts = [extra];
  g.nodes.forEach((n, i) => {
    index.set(n, i);
    if (!n.op)
      parts.push(`L${n.constant ? "c" : ""}${leafKey(n.leaf)}`);
    else
      parts.push(`${n.op.name}${canon(n.attrs)}(${n.inputs.map((c) => index.get(c)).join(",")})${n.retain ? "!" : ""}`);
  });
  parts.push(`->${g.outputs.map((o) => index.get(o)).join(",")}`);
  return parts.join(";");
}
function leavesOf(g) {
  return g.nodes.filter((n) => !n.op);
}
function baseOf(n) {
  let b = n;
  while (b.op?.kind === "view")
    b = b.inputs[0];
  return b;
}

// src/graph/passes/layout.ts
var NO_DATA = new Float32Array(0);
function applyView(n, l) {
  if (n.op?.kind !== "view")
    throw new Error(`[layout] ${n.op?.name ?? "leaf"} is not a view`);
  const fake = { dtype: n.dtype, shape: l.shape, strides: l.strides, offset: l.offset, data: NO_DATA };
  const v = n.op.ref(fake, n.attrs);
  return v ? { base: l.base, shape: v.shape, strides: v.strides, offset: v.offset } : null;
}
function baseLayout(n) {
  if (n.leaf)
    return { base: n, shape: n.shape, strides: n.leaf.strides, offset: 0 };
  return { base: n, shape: n.shape, strides: contiguousStrides(n.shape), offset: 0 };
}
function layouts(g) {
  const out = new Map;
  for (const n of g.nodes) {
    if (n.op?.kind !== "view")
      out.set(n, baseLayout(n));
    else {
      const inner = out.get(n.inputs[0]);
      out.set(n, inner ? applyView(n, inner) : null);
    }
  }
  return out;
}
function legalizeViews(g) {
  const lay = new Map;
  const record = (n, l) => {
    lay.set(n, l);
    return n;
  };
  return rewrite(g, (n, ins) => {
    const same = ins.every((c, i) => c === n.inputs[i]);
    if (n.op?.kind !== "view") {
      const res = same ? n : withInputs(n, ins);
      record(res, baseLayout(res));
      return same ? null : res;
    }
    const l = applyView(n, lay.get(ins[0]));
    if (l) {
      const res = same ? n : withInputs(n, ins);
      record(res, l);
      return same ? null : res;
    }
    const x = ins[0];
    const node = mkNode(contiguous, [x], {}, x.shape, x.dtype);
    const copy = record(node, baseLayout(node));
    const res = withInputs(n, [copy]);
    return record(res, applyView(res, lay.get(copy)));
  });
}

// src/graph/passes/program_builder.ts
function stepsKey(steps) {
  return steps.map((s) => s.kind === "view" ? `${s.node.op.name}${canon(s.node.attrs)}` : `b${s.to.join(",")}`).join("|");
}
function safeView(v) {
  if (v.op?.name !== "reshape")
    return v.op?.kind === "view";
  const a = v.inputs[0].shape.filter((s) => s !== 1);
  const b = v.shape.filter((s) => s !== 1);
  return shapesEqual(a, b);
}
function applySteps(l, steps) {
  let cur = l;
  for (const s of steps) {
    if (s.kind === "bcast")
      cur = { base: cur.base, shape: s.to, strides: broadcastStrides(cur.shape, cur.strides, s.to), offset: cur.offset };
    else {
      const r = applyView(s.node, cur);
      if (!r)
        throw new Error(`[fusion] internal: view ${s.node.op.name} failed on a mapped load`);
      cur = r;
    }
  }
  return cur;
}
function isIdentityMapping(shape, steps, space) {
  if (numel(shape) !== numel(space))
    return false;
  const l = applySteps({ base: null, shape, strides: contiguousStrides(shape), offset: 0 }, steps);
  const want = contiguousStrides(space);
  return l.offset === 0 && space.every((s, i) => s === 1 || l.strides[i] === want[i]);
}
function viewChain(n) {
  const views = [];
  let b = n;
  while (b.op?.kind === "view") {
    views.push(b);
    b = b.inputs[0];
  }
  return { base: b, views: views.reverse() };
}
function buildProgram(ctx, root, steps = []) {
  const code = [];
  const memo = new Map;
  const emitInput = (inp, consumer, tail) => {
    const { base, views } = viewChain(inp);
    const toConsumer = consumer ? [{ kind: "bcast", to: consumer.shape }] : [];
    if (base === ctx.acc) {
      const key = "acc";
      let i = memo.get(key);
      if (i === undefined) {
        i = code.push({ k: "acc", dtype: base.dtype }) - 1;
        memo.set(key, i);
      }
      return i;
    }
    if (ctx.member(base))
      return emit(base, [...views.map((v) => ({ kind: "view", node: v })), ...toConsumer, ...tail]);
    const l = applySteps(ctx.layout(inp), [...toConsumer, ...tail]);
    const input = ctx.inputOf(l.base);
    const key = `L${input}:${l.strides.join(",")}@${l.offset}`;
    let i = memo.get(key);
    if (i === undefined) {
      i = code.push({ k: "load", input, strides: l.strides, offset: l.offset, dtype: l.base.dtype }) - 1;
      memo.set(key, i);
    }
    return i;
  };
  const emit = (n, st) => {
    const key = `${n.id}#${stepsKey(st)}`;
    const hit = memo.get(key);
    if (hit !== undefined)
      return hit;
    const args = n.inputs.map((c) => emitInput(c, n, st));
    const i = code.push({ k: "op", op: n.op, args, dtype: n.dtype }) - 1;
    memo.set(key, i);
    return i;
  };
  const out = ctx.member(root) ? emit(root, steps) : emitInput(root, null, steps);
  return { shape: ctx.shape, code, out };
}

// src/graph/passes/fuse.ts
var MAX_MEMBERS = 192;
var MAX_INSTANCES = 4;
var EXPENSIVE = new Set(["exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "pow"]);
function usesOf(n, users, outputs) {
  if (outputs.has(n))
    return null;
  const out = [];
  const stack = [[n, []]];
  while (stack.length) {
    const [v, chain] = stack.pop();
    for (const u of users.get(v)) {
      if (u.op?.kind === "view") {
        if (outputs.has(u))
          return null;
        stack.push([u, [...chain, u]]);
      } else
        out.push({ consumer: u, views: chain });
    }
  }
  return out;
}
var DUP = { kind: "single", root: null, core: null, members: new Map };
function fuse(g, caps) {
  const users = usersOf(g);
  const outputs = new Set(g.outputs);
  const lay = layouts(g);
  const groupOf = new Map;
  const can = (name) => caps.fused.has(name);
  const newGroup = (n, kind, core = null) => {
    const grp = { kind, root: n, core, members: new Map };
    if (kind === "ew")
      grp.members.set(n, { space: "main", maps: new Map([["", []]]) });
    groupOf.set(n, grp);
    return grp;
  };
  const mappingsInto = (n, uses) => {
    let grp = null;
    let space = null;
    const maps = new Map;
    for (const u of uses) {
      const cg = groupOf.get(u.consumer);
      if (!cg || grp && cg !== grp || !u.views.every(safeView))
        return null;
      grp = cg;
      const vsteps = u.views.map((v) => ({ kind: "view", node: v }));
      let s;
      if (cg.members.has(u.consumer)) {
        const m = cg.members.get(u.consumer);
        s = m.space;
        for (const cm of m.maps.values()) {
          const st = [...vsteps, { kind: "bcast", to: u.consumer.shape }, ...cm];
          maps.set(stepsKey(st), st);
        }
      } else if (cg.core === u.consumer && cg.kind === "reduce" && u.consumer.inputs[0] === (u.views[u.views.length - 1] ?? n)) {
        s = "pro";
        maps.set(stepsKey(vsteps), vsteps);
      } else
        return null;
      if (space && s !== space)
        return null;
      space = s;
    }
    return grp && space ? { grp, space, maps } : null;
  };
  const inputCount = (grp, extra) => {
    const inside = (x) => x === extra || x === grp.core || grp.members.has(x);
    const bases = new Set;
    for (const m of [...grp.members.keys(), ...grp.core ? [grp.core] : [], extra]) {
      for (const c of m.inputs) {
        const b = viewChain(c).base;
        if (!inside(b))
          bases.add(lay.get(c)?.base ?? b);
      }
    }
    return bases.size;
  };
  const fits = (grp, extra) => caps.maxInputs === undefined || inputCount(grp, extra) <= caps.maxInputs;
  const spaceShape = (grp, space) => space === "main" ? grp.root.shape : grp.core.inputs[0].shape;
  const tryJoin = (n) => {
    if (!can("fused_elementwise"))
      return false;
    const uses = usesOf(n, users, outputs);
    if (!uses || uses.length === 0)
      return false;
    const m = mappingsInto(n, uses);
    if (!m || m.maps.size > MAX_INSTANCES || m.grp.members.size >= MAX_MEMBERS || !fits(m.grp, n))
      return false;
    if (EXPENSIVE.has(n.op.name) && numel(spaceShape(m.grp, m.space)) > numel(n.shape))
      return false;
    m.grp.members.set(n, { space: m.space, maps: m.maps });
    groupOf.set(n, m.grp);
    return true;
  };
  const tryDuplicate = (n) => {
    if (!can("fused_elementwise") || EXPENSIVE.has(n.op.name))
      return false;
    const uses = usesOf(n, users, outputs);
    if (!uses || uses.length === 0)
      return false;
    const per = new Map;
    for (const u of uses) {
      const cg = groupOf.get(u.consumer);
      if (!cg || cg === DUP)
        return false;
      per.set(cg, [...per.get(cg) ?? [], u]);
    }
    if (per.size < 2 || per.size > 4)
      return false;
    const joins = [...per.values()].map((us) => mappingsInto(n, us));
    if (joins.some((m) => !m || m.maps.size > MAX_INSTANCES || m.grp.members.size >= MAX_MEMBERS || !fits(m.grp, n)))
      return false;
    for (const m of joins)
      m.grp.members.set(n, { space: m.space, maps: m.maps });
    groupOf.set(n, DUP);
    return true;
  };
  const tryAttach = (n, kind) => {
    const uses = usesOf(n, users, outputs);
    if (!uses || uses.length === 0)
      return false;
    const grp = groupOf.get(uses[0].consumer);
    if (!grp || grp.kind !== "ew" || grp.members.size >= MAX_MEMBERS || !fits(grp, n))
      return false;
    for (const u of uses) {
      const m = grp.members.get(u.consumer);
      if (groupOf.get(u.consumer) !== grp || !m || !u.views.every(safeView))
        return false;
      for (const cm of m.maps.values()) {
        const st = [...u.views.map((v) => ({ kind: "view", node: v })), { kind: "bcast", to: u.consumer.shape }, ...cm];
        if (!isIdentityMapping(n.shape, st, grp.root.shape))
          return false;
      }
    }
    grp.kind = kind;
    grp.core = n;
    groupOf.set(n, grp);
    return true;
  };
  for (let i = g.nodes.length - 1;i >= 0; i--) {
    const n = g.nodes[i];
    if (!n.op || n.op.kind === "view")
      continue;
    switch (n.op.kind) {
      case "elementwise":
        if (!tryJoin(n) && !tryDuplicate(n))
          newGroup(n, can("fused_elementwise") ? "ew" : "single");
        break;
      case "reduce":
        if (!can("fused_reduce"))
          newGroup(n, "single");
        else if (!tryAttach(n, "reduce"))
          newGroup(n, "reduce", n);
        break;
      default:
        if (n.op.name === "matmul" && can("fused_matmul") && isFloating(n.dtype) && n.dtype !== "float16" && n.dtype !== "bfloat16" && tryAttach(n, "matmul"))
          break;
        newGroup(n, "single", n);
    }
  }
  return materialize(g, groupOf, lay);
}
function materialize(g, groupOf, lay) {
  const done = new Map;
  const layout = (n) => lay.get(n);
  const map = (n) => done.get(n);
  for (const n of g.nodes) {
    if (!n.op) {
      done.set(n, n);
      continue;
    }
    if (n.op.kind === "view") {
      const x = done.get(n.inputs[0]);
      if (x)
        done.set(n, x === n.inputs[0] ? n : withInputs(n, [x]));
      continue;
    }
    const grp = groupOf.get(n);
    if (grp.root !== n)
      continue;
    const bases = [];
    const inputOf = (b) => {
      let i = bases.indexOf(b);
      if (i < 0)
        i = bases.push(b) - 1;
      return i;
    };
    const ctx = (shape, space) => ({
      shape,
      layout,
      inputOf,
      acc: grp.core,
      member: (m) => grp.members.get(m)?.space === space
    });
    const mk = (op, ins, attrs) => mkNode(op, ins.map(map), attrs, n.shape, n.dtype, n.origins, n.retain);
    switch (grp.kind) {
      case "single":
        done.set(n, n.inputs.every((c) => map(c) === c) ? n : withInputs(n, n.inputs.map(map)));
        break;
      case "ew": {
        const program = buildProgram(ctx(n.shape, "main"), n);
        done.set(n, mk(fused_elementwise, bases, { program }));
        break;
      }
      case "reduce": {
        const r = grp.core;
        const a = r.attrs;
        const prologue = buildProgram(ctx(r.inputs[0].shape, "pro"), r.inputs[0]);
        const epilogue = r === n ? null : buildProgram(ctx(n.shape, "main"), n);
        done.set(n, mk(fused_reduce, bases, { prologue, reduce: r.op, dim: a.dim, keepdim: a.keepdim, dtype: r.dtype, epilogue }));
        break;
      }
      case "matmul": {
        const m = grp.core;
        inputOf(m.inputs[0]);
        inputOf(m.inputs[1]);
        const epilogue = buildProgram(ctx(n.shape, "main"), n);
        done.set(n, mk(fused_matmul, bases, { epilogue, dtype: m.dtype, shape: m.shape }));
        break;
      }
    }
  }
  return makeGraph(g.outputs.map(map));
}

// src/graph/passes/patterns.ts
var op = (n, name) => n?.op?.name === name;
var isScalar = (n) => numel(n.shape) === 1 && n.shape.length === 0;
var dimsOf = (n) => n.attrs;
function onlyUsedBy(c, n, allowed) {
  if (c.outputs.has(n) || c.taken.has(n))
    return false;
  return c.users.get(n).every((u) => allowed.includes(u));
}
function other(n, x) {
  if (n.inputs[0] === x)
    return n.inputs[1];
  if (n.inputs[1] === x)
    return n.inputs[0];
  return null;
}
function absorb(c, x, inside, acc) {
  const members = new Set;
  const cand = new Set;
  const push = (n) => {
    const { base, views } = viewChain(n);
    if (views.every(safeView) && base.op?.kind === "elementwise" && base !== acc)
      cand.add(base);
  };
  push(x);
  const seen = new Set;
  while (true) {
    const next = [...cand].filter((n) => !seen.has(n)).sort((a, b) => c.order.get(b) - c.order.get(a));
    if (next.length === 0)
      break;
    const n = next[0];
    seen.add(n);
    if (c.outputs.has(n) || c.taken.has(n) || !shapesEqual(n.shape, x.shape) && numel(n.shape) > numel(x.shape))
      continue;
    const ok = c.users.get(n).every((u) => {
      if (inside.includes(u) || members.has(u))
        return true;
      let v = u;
      while (v.op?.kind === "view" && safeView(v) && !c.outputs.has(v)) {
        const us = c.users.get(v);
        if (us.length !== 1)
          return false;
        v = us[0];
      }
      return v !== u && (members.has(v) || inside.includes(v));
    });
    if (!ok)
      continue;
    members.add(n);
    n.inputs.forEach(push);
  }
  return members;
}
function prologueProgram(c, x, members, acc, bases) {
  return buildProgram({
    shape: x.shape,
    layout: c.layout,
    acc,
    member: (m) => members.has(m),
    inputOf: (b) => {
      let i = bases.indexOf(b);
      if (i < 0)
        i = bases.push(b) - 1;
      return i;
    }
  }, x);
}
function softmaxAt(c, dv) {
  if (!op(dv, "div"))
    return null;
  const [e, z] = dv.inputs;
  if (!op(e, "exp") || !op(z, "sum") || z.inputs[0] !== e)
    return null;
  const s = e.inputs[0];
  if (!op(s, "sub"))
    return null;
  const [x, m] = s.inputs;
  if (!op(m, "amax") || m.inputs[0] !== x)
    return null;
  const dz = dimsOf(z), dm = dimsOf(m);
  if (dz.dim.length !== 1 || dm.dim.length !== 1 || dz.dim[0] !== dm.dim[0] || !dz.keepdim || !dm.keepdim)
    return null;
  if (![dv, e, z, s, x, m].every((n) => n.dtype === dv.dtype) || !patternDtype(dv.dtype))
    return null;
  if (!onlyUsedBy(c, m, [s]) || !onlyUsedBy(c, s, [e]) || !onlyUsedBy(c, e, [z, dv]) || !onlyUsedBy(c, z, [dv]))
    return null;
  return { x, dim: dz.dim[0], internal: [m, s, e, z] };
}
function matchSoftmax(c, dv) {
  const sm = softmaxAt(c, dv);
  if (!sm)
    return null;
  const members = absorb(c, sm.x, [sm.internal[0], sm.internal[1]], null);
  const bases = [];
  const prologue = prologueProgram(c, sm.x, members, null, bases);
  const node = mkNode(fused_softmax, bases, { dim: sm.dim, prologue }, dv.shape, dv.dtype, dv.origins, dv.retain);
  return { root: dv, node, internal: [...sm.internal, ...members] };
}
function matchAttention(c, out) {
  if (!op(out, "matmul"))
    return null;
  const [p, v] = out.inputs;
  const sm = softmaxAt(c, p);
  if (!sm || sm.dim !== p.shape.length - 1 || !onlyUsedBy(c, p, [out]) || out.dtype !== p.dtype)
    return null;
  const inside = [sm.internal[0], sm.internal[1]];
  const members = absorb(c, sm.x, inside, null);
  const scores = op(sm.x, "matmul") ? sm.x : [...members].flatMap((m) => m.inputs).find((i) => op(i, "matmul") && shapesEqual(i.shape, p.shape));
  if (!scores || scores.dtype !== p.dtype || !onlyUsedBy(c, scores, [...inside, ...members]))
    return null;
  const onPath = new Set;
  for (const m of [...members].sort((a, b) => c.order.get(a) - c.order.get(b))) {
    if (m.inputs.some((i) => i === scores || onPath.has(i)))
      onPath.add(m);
  }
  for (const m of onPath) {
    if (!shapesEqual(m.shape, p.shape) || c.users.get(m).some((u) => u.op?.kind === "view"))
      return null;
  }
  if (c.users.get(scores).some((u) => u.op?.kind === "view"))
    return null;
  if (!shapesEqual(out.shape.slice(0, -2), p.shape.slice(0, -2)))
    return null;
  const bases = [scores.inputs[0], scores.inputs[1], v];
  const prologue = prologueProgram(c, sm.x, members, scores, bases);
  const node = mkNode(fused_attention, bases, { prologue }, out.shape, out.dtype, out.origins, out.retain);
  return { root: out, node, internal: [p, scores, ...sm.internal, ...members] };
}
function meanOf(n, x) {
  if (!op(n, "div"))
    return null;
  const [s, k] = n.inputs;
  if (!op(s, "sum") || s.inputs[0] !== x || !isScalar(k) || !dimsOf(s).keepdim)
    return null;
  const d = dimsOf(s).dim;
  const nd = x.shape.length;
  if (d.length === 0 || !d.every((v, i) => v === nd - d.length + i))
    return null;
  return [s, k];
}
function rsqrtEps(r) {
  if (!op(r, "rsqrt"))
    return null;
  const a = r.inputs[0];
  if (!op(a, "add"))
    return null;
  const [p, q] = a.inputs;
  if (isScalar(q) && op(p, "div"))
    return { mean: p, eps: q, add: a };
  if (isScalar(p) && op(q, "div"))
    return { mean: q, eps: p, add: a };
  return null;
}
function affineTail(c, y, normShape, withBias) {
  let last = y;
  let w = null, b = null;
  const nodes = [];
  const step = (name) => {
    const us = c.users.get(last);
    const u = us[0];
    if (us.length !== 1 || c.outputs.has(last) || !op(u, name) || u.dtype !== y.dtype)
      return null;
    const o = other(u, last);
    if (!o || o === last || !shapesEqual(o.shape, normShape) || o.dtype !== y.dtype)
      return null;
    nodes.push(u);
    last = u;
    return o;
  };
  w = step("mul");
  if (withBias)
    b = step("add");
  return { last, w, b, nodes };
}
function matchLayerNorm(c, r) {
  const re = rsqrtEps(r);
  if (!re)
    return null;
  const vr = re.mean;
  const q = vr.inputs[0].inputs[0];
  if (!op(q, "mul") || q.inputs[0] !== q.inputs[1])
    return null;
  const d = q.inputs[0];
  if (!op(d, "sub"))
    return null;
  const [d0, cm] = d.inputs;
  if (!op(d0, "sub"))
    return null;
  const [x, m0] = d0.inputs;
  const m1 = meanOf(m0, x), m2 = meanOf(cm, d0), m3 = meanOf(vr, q);
  if (!m1 || !m2 || !m3 || !shapesEqual(dimsOf(m1[0]).dim, dimsOf(m3[0]).dim) || !shapesEqual(dimsOf(m2[0]).dim, dimsOf(m3[0]).dim))
    return null;
  const ry = c.users.get(r);
  const y = ry.length === 1 ? ry[0] : null;
  if (!y || !op(y, "mul") || other(y, r) !== d)
    return null;
  const D = x.dtype;
  if (!patternDtype(D) || ![m0, d0, cm, d, q, vr, re.add, r, y].every((n) => n.dtype === D))
    return null;
  if (!onlyUsedBy(c, m1[0], [m0]) || !onlyUsedBy(c, m0, [d0]) || !onlyUsedBy(c, d0, [m2[0], d]) || !onlyUsedBy(c, m2[0], [cm]) || !onlyUsedBy(c, cm, [d]) || !onlyUsedBy(c, d, [q, y]) || !onlyUsedBy(c, q, [m3[0]]) || !onlyUsedBy(c, m3[0], [vr]) || !onlyUsedBy(c, vr, [re.add]) || !onlyUsedBy(c, re.add, [r]) || !onlyUsedBy(c, r, [y]))
    return null;
  const nd = dimsOf(m1[0]).dim.length;
  const tail = affineTail(c, y, x.shape.slice(x.shape.length - nd), true);
  const ins = [x, m1[1], m2[1], m3[1], re.eps, ...tail.w ? [tail.w] : [], ...tail.b ? [tail.b] : []];
  const node = mkNode(fused_layer_norm, ins, { dims: nd, has_weight: !!tail.w, has_bias: !!tail.b }, x.shape, D, tail.last.origins, tail.last.retain);
  return { root: tail.last, node, internal: [m1[0], m0, d0, m2[0], cm, d, q, m3[0], vr, re.add, r, y, ...tail.nodes] };
}
function matchRmsNorm(c, r) {
  const re = rsqrtEps(r);
  if (!re)
    return null;
  const ms = re.mean;
  const q = ms.inputs[0].inputs[0];
  if (!op(q, "mul") || q.inputs[0] !== q.inputs[1])
    return null;
  const x = q.inputs[0];
  const m = meanOf(ms, q);
  const ry = c.users.get(r);
  const y = ry.length === 1 ? ry[0] : null;
  if (!m || !y || !op(y, "mul") || other(y, r) !== x)
    return null;
  const D = x.dtype;
  if (!patternDtype(D) || ![q, ms, re.add, r, y].every((n) => n.dtype === D))
    return null;
  if (!onlyUsedBy(c, q, [m[0]]) || !onlyUsedBy(c, m[0], [ms]) || !onlyUsedBy(c, ms, [re.add]) || !onlyUsedBy(c, re.add, [r]) || !onlyUsedBy(c, r, [y]))
    return null;
  const nd = dimsOf(m[0]).dim.length;
  const tail = affineTail(c, y, x.shape.slice(x.shape.length - nd), false);
  const ins = [x, m[1], re.eps, ...tail.w ? [tail.w] : []];
  const node = mkNode(fused_rms_norm, ins, { dims: nd, has_weight: !!tail.w, has_bias: false }, x.shape, D, tail.last.origins, tail.last.retain);
  return { root: tail.last, node, internal: [q, m[0], ms, re.add, r, y, ...tail.nodes] };
}
function matchLora(c, out) {
  if (!op(out, "add") || !patternDtype(out.dtype))
    return null;
  for (const [base, lora] of [[out.inputs[0], out.inputs[1]], [out.inputs[1], out.inputs[0]]]) {
    if (!op(lora, "mul"))
      continue;
    const dl = op(lora.inputs[0], "matmul") ? lora.inputs[0] : lora.inputs[1];
    const s = other(lora, dl);
    if (!op(dl, "matmul") || !s || !isScalar(s))
      continue;
    const h = dl.inputs[0];
    if (!op(h, "matmul"))
      continue;
    const x = h.inputs[0];
    let y = base, bias = null;
    if (op(base, "add")) {
      y = op(base.inputs[0], "matmul") ? base.inputs[0] : base.inputs[1];
      bias = other(base, y);
      if (!bias || bias.shape.length !== 1 || bias.shape[0] !== out.shape[out.shape.length - 1])
        continue;
    }
    if (!op(y, "matmul") || y.inputs[0] !== x || !shapesEqual(y.shape, out.shape) || !shapesEqual(dl.shape, out.shape))
      continue;
    const nodes = bias ? [lora, dl, h, y, base] : [lora, dl, h, y];
    if (!nodes.every((n) => n.dtype === out.dtype) || bias && bias.dtype !== out.dtype || s.dtype !== out.dtype)
      continue;
    if (!onlyUsedBy(c, lora, [out]) || !onlyUsedBy(c, dl, [lora]) || !onlyUsedBy(c, h, [dl]) || !onlyUsedBy(c, y, [bias ? base : out]) || bias && !onlyUsedBy(c, base, [out]))
      continue;
    const ins = [x, y.inputs[1], h.inputs[1], dl.inputs[1], s, ...bias ? [bias] : []];
    const node = mkNode(fused_lora_linear, ins, { has_bias: !!bias }, out.shape, out.dtype, out.origins, out.retain);
    return { root: out, node, internal: nodes };
  }
  return null;
}
var MATCHERS = [
  ["fused_attention", matchAttention],
  ["fused_softmax", matchSoftmax],
  ["fused_layer_norm", matchLayerNorm],
  ["fused_rms_norm", matchRmsNorm],
  ["fused_lora_linear", matchLora]
];
function matchPatterns(g, caps) {
  const lay = layouts(g);
  const c = {
    users: usersOf(g),
    outputs: new Set(g.outputs),
    order: new Map(g.nodes.map((n, i) => [n, i])),
    layout: (n) => lay.get(n),
    taken: new Set
  };
  const replace = new Map;
  for (const [name, match] of MATCHERS) {
    if (!caps.fused.has(name))
      continue;
    for (let i = g.nodes.length - 1;i >= 0; i--) {
      const n = g.nodes[i];
      if (c.taken.has(n) || !n.op)
        continue;
      const m = match(c, n);
      if (!m || m.internal.some((x) => c.taken.has(x)))
        continue;
      for (const x of [m.root, ...m.internal])
        c.taken.add(x);
      replace.set(m.root, m.node);
    }
  }
  if (replace.size === 0)
    return g;
  const map = new Map;
  for (const n of g.nodes) {
    const r = replace.get(n);
    if (r) {
      map.set(n, withInputs(r, r.inputs.map((x) => map.get(x) ?? x)));
      continue;
    }
    const ins = n.inputs.map((x) => map.get(x) ?? x);
    map.set(n, ins.every((x, k) => x === n.inputs[k]) ? n : withInputs(n, ins));
  }
  return makeGraph(g.outputs.map((o) => map.get(o)));
}

// src/graph/passes/simplify.ts
var same = (n, x) => x.dtype === n.dtype && shapesEqual(x.shape, n.shape);
function foldViews(g) {
  return rewrite(g, (n, ins) => {
    if (!n.op)
      return null;
    const x = ins[0];
    switch (n.op.name) {
      case "contiguous":
        return x.dtype === n.dtype ? x : null;
      case "reshape":
      case "expand": {
        if (shapesEqual(x.shape, n.shape))
          return x;
        if (x.op !== n.op)
          return null;
        const inner = x.inputs[0];
        return shapesEqual(inner.shape, n.shape) ? inner : mkNode(n.op, x.inputs, n.attrs, n.shape, n.dtype, n.origins, n.retain);
      }
      case "permute": {
        const dims = n.attrs.dims;
        if (dims.every((d, i) => d === i))
          return x;
        if (x.op === n.op) {
          const inner = x.attrs.dims;
          const composed = dims.map((d) => inner[d]);
          if (composed.every((d, i) => d === i))
            return x.inputs[0];
          return mkNode(n.op, x.inputs, { dims: composed }, n.shape, n.dtype, n.origins, n.retain);
        }
        return null;
      }
      case "slice": {
        const a = n.attrs;
        return a.start === 0 && a.step === 1 && a.end >= x.shape[a.dim] ? x : null;
      }
      default:
        return null;
    }
  });
}
function constantValue(n) {
  return n.leaf && n.constant ? uniformValue(n.leaf) : null;
}
function uniformValue(d) {
  if (numel(d.shape) === 0)
    return null;
  const dec = decoder(d.dtype);
  const first = dec ? dec(d.data, d.offset) : d.data[d.offset];
  if (numel(d.shape) === 1 || d.strides.every((s, i) => s === 0 || d.shape[i] === 1))
    return first;
  if (numel(d.shape) > 4096)
    return null;
  let same = true;
  forEachStrided(d.shape, [d], (_i, idx) => {
    const v = dec ? dec(d.data, idx[0]) : d.data[idx[0]];
    if (!Object.is(v, first))
      same = false;
  });
  return same ? first : null;
}
var is = (n, v) => {
  const c = constantValue(n);
  return c !== null && Object.is(c, v);
};
var integral = (d) => !isFloating(d);
function eliminateIdentities(g) {
  return rewrite(g, (n, ins) => {
    if (!n.op || n.op.kind !== "elementwise")
      return null;
    const [a, b, c] = ins;
    const pick = (x) => x && same(n, x) ? x : null;
    switch (n.op.name) {
      case "mul":
        return is(b, 1) && pick(a) || is(a, 1) && pick(b) || null;
      case "div":
        return is(b, 1) ? pick(a) : null;
      case "pow":
        if (is(b, 1))
          return pick(a);
        if (is(b, 2) && n.dtype === "float32" && a.dtype === "float32" && shapesEqual(a.shape, n.shape))
          return mkNode(mul, [a, a], {}, n.shape, n.dtype, n.origins, n.retain);
        return null;
      case "add": {
        const zeroB = is(b, -0) || integral(n.dtype) && is(b, 0);
        const zeroA = is(a, -0) || integral(n.dtype) && is(a, 0);
        return zeroB && pick(a) || zeroA && pick(b) || null;
      }
      case "sub":
        return is(b, 0) || integral(n.dtype) && is(b, -0) ? pick(a) : null;
      case "neg":
      case "logical_not":
        return a.op === n.op ? pick(a.inputs[0]) : null;
      case "where":
        return b === c ? pick(b) : null;
      default:
        return null;
    }
  });
}
function foldConstants(g, evaluate, limit = 4096) {
  return rewrite(g, (n, ins) => {
    if (!n.op || ins.length === 0 || !ins.every((x) => x.constant))
      return null;
    if (n.op.kind !== "view" && numel(n.shape) > limit)
      return null;
    const out = evaluate(n.op, ins.map((x) => x.leaf), n.attrs, n.shape, n.dtype);
    return mkLeaf(out, true, n.origins);
  });
}
function leafKey2(n) {
  const d = n.leaf;
  const v = constantValue(n);
  if (v === null || !Number.isInteger(v * 8))
    return null;
  return `c${d.dtype}[${d.shape.join(",")}]${Object.is(v, -0) ? "-0" : String(v)}`;
}
function cse(g) {
  const byKey = new Map;
  const byData = new Map;
  const rep = new Map;
  const merged = new Map;
  for (const n of g.nodes) {
    let r;
    if (!n.op) {
      const ck = leafKey2(n);
      if (ck !== null) {
        r = byKey.get(ck);
        if (!r)
          byKey.set(ck, n);
      } else {
        const d = n.leaf;
        const store = d.storage ?? d.data;
        const list = byData.get(store) ?? [];
        r = list.find((m) => m.leaf.offset === d.offset && m.dtype === d.dtype && shapesEqual(m.shape, d.shape) && shapesEqual(m.leaf.strides, d.strides));
        if (!r) {
          list.push(n);
          byData.set(store, list);
        }
      }
    } else {
      let key = n.op.name + canon(n.attrs) + "(";
      for (const x of n.inputs)
        key += rep.get(x).id + ",";
      r = byKey.get(key);
      if (!r)
        byKey.set(key, n);
    }
    r = r ?? n;
    rep.set(n, r);
    const list = merged.get(r);
    if (list)
      list.push(n);
    else
      merged.set(r, [n]);
  }
  let changed = false;
  for (const [r, all] of merged)
    if (all.length > 1 || r.inputs.some((c) => rep.get(c) !== c))
      changed = true;
  if (!changed)
    return g;
  const out = new Map;
  for (const n of g.nodes) {
    if (rep.get(n) !== n)
      continue;
    const all = merged.get(n);
    const ins = n.inputs.map((c) => out.get(rep.get(c)));
    if (all.length === 1 && ins.every((c, i) => c === n.inputs[i])) {
      out.set(n, n);
      continue;
    }
    out.set(n, {
      ...withInputs(n, ins),
      origins: all.flatMap((m) => m.origins),
      retain: all.some((m) => m.retain)
    });
  }
  return makeGraph(g.outputs.map((o) => out.get(rep.get(o))));
}
function protectOutputs(before, after) {
  let changed = false;
  const outs = after.outputs.map((o, i) => {
    if (baseOf(before.outputs[i]).op === null || baseOf(o).op !== null)
      return o;
    changed = true;
    return mkNode(contiguous, [o], {}, o.shape, o.dtype, o.origins);
  });
  return changed ? makeGraph(outs) : after;
}
function simplify(g, opts = {}) {
  let cur = g;
  for (let round = 0;round < 4; round++) {
    if (opts.evaluate)
      cur = foldConstants(cur, opts.evaluate, opts.foldLimit);
    cur = foldViews(cur);
    const a = cur;
    cur = eliminateIdentities(cur);
    const b = cur;
    cur = cse(cur);
    if (cur === b && b === a)
      break;
  }
  return protectOutputs(g, cur);
}

// src/scheduler/memory.ts
var ALIGN = 64;
var align = (n) => Math.ceil(n / ALIGN) * ALIGN;
function planMemory(bufs) {
  const storageOf = bufs.map((_, i) => i);
  const find = (i) => storageOf[i] === i ? i : storageOf[i] = find(storageOf[i]);
  bufs.forEach((b, i) => {
    if (b.inplaceOf !== null)
      storageOf[i] = find(b.inplaceOf);
  });
  const storages = new Map;
  bufs.forEach((b, i) => {
    const r = find(i);
    const s = storages.get(r);
    if (!s)
      storages.set(r, { bytes: b.bytes, def: b.def, last: b.last, offset: -1 });
    else {
      s.bytes = Math.max(s.bytes, b.bytes);
      s.def = Math.min(s.def, b.def);
      s.last = Math.max(s.last, b.last);
    }
  });
  const order = [...storages.values()].sort((a, b) => b.bytes - a.bytes || a.def - b.def);
  const placed = [];
  let peak = 0;
  for (const s of order) {
    const clash = placed.filter((p) => p.def <= s.last && s.def <= p.last).sort((a, b) => a.offset - b.offset);
    let off = 0;
    for (const p of clash) {
      if (off + s.bytes <= p.offset)
        break;
      off = Math.max(off, align(p.offset + p.bytes));
    }
    s.offset = off;
    placed.push(s);
    peak = Math.max(peak, off + s.bytes);
  }
  const offsets = bufs.map((_, i) => storages.get(find(i)).offset);
  const naive = bufs.reduce((p, b) => p + align(b.bytes), 0);
  let liveBound = 0;
  const maxT = bufs.reduce((m, b) => Math.max(m, b.last), -1);
  const delta = new Float64Array(maxT + 2);
  for (const s of storages.values()) {
    delta[s.def] += s.bytes;
    delta[s.last + 1] -= s.bytes;
  }
  let live = 0;
  for (let t = 0;t <= maxT; t++) {
    live += delta[t];
    liveBound = Math.max(liveBound, live);
  }
  return { offsets, peak: align(peak), naive, liveBound };
}

// src/runtime/detect.ts
var g2 = globalThis;
function detect() {
  if (typeof g2.Bun !== "undefined")
    return "bun";
  if (typeof g2.Deno !== "undefined" && g2.Deno?.version?.deno)
    return "deno";
  if (typeof g2.document !== "undefined" || typeof globalThis.importScripts === "function")
    return "browser";
  if (g2.process?.versions?.node)
    return "node";
  return "browser";
}
var RUNTIME = detect();
function runtimeDescription() {
  if (RUNTIME === "bun")
    return `bun ${g2.Bun.version}`;
  if (RUNTIME === "deno")
    return `deno ${g2.Deno.version.deno}`;
  if (RUNTIME === "node")
    return `node ${g2.process.versions.node}`;
  return typeof navigator !== "undefined" ? `browser (${navigator.userAgent})` : "browser";
}

// src/runtime/ffi_deno.ts
var DENO_TYPE = { void: "void", i32: "i32", u32: "u32", f64: "f64", f32: "f32", ptr: "usize" };
function denoFfi() {
  const D = globalThis.Deno;
  if (!D || typeof D.dlopen !== "function")
    throw new Error("Deno.dlopen is not available");
  const ptrOf = (a) => {
    a.buffer;
    return Number(D.UnsafePointer.value(D.UnsafePointer.of(a)));
  };
  const toAddr = (v) => v === null || v === undefined ? 0 : typeof v === "number" ? v : ptrOf(v);
  let libc = null;
  const dl = () => {
    if (libc)
      return libc;
    const enc = new TextEncoder;
    const cstr = (s) => enc.encode(`${s}\x00`);
    let l = null;
    for (const name of ["libc.so.6", "libdl.so.2", "libSystem.B.dylib"]) {
      try {
        l = D.dlopen(name, { dlopen: { parameters: ["buffer", "i32"], result: "usize" }, dlsym: { parameters: ["usize", "buffer"], result: "usize" } });
        break;
      } catch {}
    }
    if (!l)
      throw new Error("no libc with dlopen/dlsym found");
    const s = l.symbols;
    libc = {
      dlopen: (path, mode) => Number(s.dlopen(cstr(path), mode)) || null,
      dlsym: (h, name) => Number(s.dlsym(h, cstr(name))) || null
    };
    return libc;
  };
  return {
    name: "Deno.dlopen",
    dlopen(path, symbols) {
      const spec = {};
      for (const [k, v] of Object.entries(symbols))
        spec[k] = { parameters: v.args.map((t) => DENO_TYPE[t]), result: DENO_TYPE[v.returns] };
      const lib = D.dlopen(path, spec);
      const bound = {};
      for (const [k, v] of Object.entries(symbols)) {
        const f = lib.symbols[k];
        const ptrArgs = v.args.map((t) => t === "ptr");
        const anyPtr = ptrArgs.some(Boolean);
        const ret = v.returns === "ptr" ? (r) => Number(r) || null : null;
        bound[k] = (...a) => {
          if (anyPtr) {
            for (let i = 0;i < a.length; i++)
              if (ptrArgs[i])
                a[i] = toAddr(a[i]);
          }
          const r = f(...a);
          return ret ? ret(r) : r;
        };
      }
      let handle = null;
      return {
        symbols: bound,
        address: (name) => {
          handle ??= dl().dlopen(path, 2 | 4) ?? dl().dlopen(path, 2);
          const a = handle ? dl().dlsym(handle, name) : null;
          if (!a)
            throw new Error(`symbol ${name} not found in ${path}`);
          return a;
        },
        close: () => lib.close()
      };
    },
    ptr: ptrOf,
    cstring: (p) => p ? D.UnsafePointerView.getCString(D.UnsafePointer.create(BigInt(p))) : "",
    adopt: () => null
  };
}

// src/runtime/ffi.ts
var loaded;
var why = "";
function ffi() {
  if (loaded !== undefined)
    return loaded;
  try {
    if (RUNTIME === "bun") {
      const spec = "./ffi_" + "bun.ts";
      loaded = import.meta.require(spec).bunFfi();
    } else if (RUNTIME === "deno") {
      loaded = denoFfi();
    } else {
      why = RUNTIME === "browser" ? "a browser has no FFI (the native backend needs Bun or Deno)" : "Node has no built-in FFI (the native backend needs Bun or Deno)";
      loaded = null;
    }
  } catch (e) {
    why = `the ${RUNTIME} FFI could not be loaded: ${e.message}`;
    loaded = null;
  }
  return loaded;
}
function ffiUnavailableReason() {
  ffi();
  return why;
}

// src/backends/native/program.ts
var DTYPE_CODE = {
  float32: 0,
  float64: 1,
  float16: 2,
  bfloat16: 3,
  int32: 4,
  int64: 5,
  int8: 6,
  uint8: 7,
  bool: 8
};
var MAX_DIMS = 16;
var MAX_INPUTS = 64;
var MAX_CODE = 2048;
var RAW = Symbol("loom.native.raw");
function rawData(t) {
  return t[RAW] ?? t.data;
}
var ptr = (a) => (ptrFn ??= ffi().ptr)(a);
var ptrFn;
var none = () => [];
var dimAttr = (a) => [a.dim];
var indexAttr = (a) => [a.dim, a.caller ? INDEX_CALLERS.indexOf(a.caller) + 1 : 0];
var reduceAttr = (a) => [a.dim.length, ...a.dim];
var argAttr = (a, [x]) => [a.dim === null || x.shape.length === 0 ? -1 : normalizeDim("arg", a.dim, x.shape.length)];
var REDUCE_KIND = { sum: 0, amax: 1, amin: 2 };
var ATTR_ENCODERS = {
  sum: reduceAttr,
  amax: reduceAttr,
  amin: reduceAttr,
  argmax: argAttr,
  argmin: argAttr,
  cumsum: (a, [x]) => [x.shape.length === 0 ? 0 : normalizeDim("cumsum", a.dim, x.shape.length), a.reverse ? 1 : 0],
  slice_backward: (a) => [a.dim, a.start, a.end, a.step],
  cat: dimAttr,
  gather: indexAttr,
  scatter_add: indexAttr,
  index_select: indexAttr,
  index_add: indexAttr,
  tri: (a) => [a.diagonal, a.upper ? 1 : 0],
  lora_linear: (a) => [a.scaling, a.has_bias ? 1 : 0],
  matmul: none,
  fused_elementwise: (a, _i, c) => encodeProgram(a.program, c),
  fused_reduce: (a, _i, c) => {
    const nd = a.prologue.shape.length;
    const dims = [...new Set(a.dim.map((d) => normalizeDim("fused_reduce", d, nd)))].sort((p, q) => p - q);
    const kind = REDUCE_KIND[a.reduce.name];
    if (kind === undefined)
      throw new Error(`[native] fused_reduce: no kernel for ${a.reduce.name}`);
    return [kind, DTYPE_CODE[a.dtype], dims.length, ...dims, a.epilogue ? 1 : 0, ...encodeProgram(a.prologue, c), ...a.epilogue ? encodeProgram(a.epilogue, c) : []];
  },
  fused_matmul: (a, _i, c) => [DTYPE_CODE[a.dtype], a.shape.length, ...a.shape, ...encodeProgram(a.epilogue, c)],
  fused_softmax: (a, _i, c) => [normalizeDim("softmax", a.dim, a.prologue.shape.length), ...encodeProgram(a.prologue, c)],
  fused_layer_norm: (a) => [a.dims, a.has_weight ? 1 : 0, a.has_bias ? 1 : 0],
  fused_rms_norm: (a) => [a.dims, a.has_weight ? 1 : 0, 0],
  fused_lora_linear: (a) => [a.has_bias ? 1 : 0],
  fused_attention: (a, _i, c) => encodeProgram(a.prologue, c)
};
function encodeAttrs(op, attrs, inputs, codes) {
  if (op.kind === "elementwise")
    return [];
  return (ATTR_ENCODERS[op.name] ?? none)(attrs, inputs, codes);
}
function encodeProgram(p, codes) {
  const n = p.code.length;
  if (n > MAX_CODE)
    throw new Error(`[native] program of ${n} codes (most ${MAX_CODE})`);
  const lastUse = new Array(n).fill(-1);
  p.code.forEach((c, i) => {
    if (c.k === "op")
      for (const a of c.args)
        lastUse[a] = i;
  });
  lastUse[p.out] = n;
  const reg = new Array(n);
  const free = [];
  const isConst = p.code.map((c) => c.k === "load" && c.strides.every((s) => s === 0));
  let nregs = 0;
  p.code.forEach((_c, i) => {
    if (isConst[i])
      reg[i] = nregs++;
  });
  const body = [];
  p.code.forEach((c, i) => {
    if (c.k === "op") {
      for (const a of new Set(c.args))
        if (lastUse[a] === i && !isConst[a])
          free.push(reg[a]);
    }
    const r = isConst[i] ? reg[i] : free.length ? free.pop() : nregs++;
    reg[i] = r;
    if (c.k === "load")
      body.push(isConst[i] ? 3 : 0, r, c.input, c.offset, ...c.strides);
    else if (c.k === "acc")
      body.push(2, r);
    else {
      const code = codes.get(c.op.name);
      if (code === undefined)
        throw new Error(`[native] no kernel for elementwise op ${c.op.name}`);
      const [a = 0, b = a, d = a] = c.args.map((x) => reg[x]);
      body.push(1, r, code, DTYPE_CODE[c.dtype], a, b, d);
    }
    if (lastUse[i] === -1 && !isConst[i])
      free.push(r);
  });
  return [p.shape.length, ...p.shape, Math.max(nregs, 1), n, p.out, ...body];
}
function chainProgram(chain, inputs, out) {
  const code = inputs.map((x, i) => ({
    k: "load",
    input: i,
    strides: broadcastStrides(x.shape, x.strides, out.shape),
    offset: 0,
    dtype: x.dtype
  }));
  for (const f of chain)
    code.push({ k: "op", op: f.op, args: f.args, dtype: f.dtype });
  return { shape: out.shape, code, out: code.length - 1 };
}

class ProgramWriter {
  retain;
  buf;
  bufAddr;
  n = 0;
  keep = [];
  count = 0;
  constructor(capacity = 256, retain = false) {
    this.retain = retain;
    this.buf = new Float64Array(capacity);
    this.bufAddr = ptr(this.buf);
  }
  reset() {
    this.n = 0;
    this.count = 0;
    if (this.keep.length)
      this.keep.length = 0;
  }
  reserve(words) {
    if (this.n + words <= this.buf.length)
      return;
    const b = new Float64Array(Math.max(this.buf.length * 2, this.n + words));
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
    this.bufAddr = ptr(b);
  }
  tensor(t, at) {
    const nd = t.shape.length;
    const b = this.buf;
    const data = rawData(t);
    b[at] = data.length === 0 ? 0 : ptr(data);
    b[at + 1] = DTYPE_CODE[t.dtype];
    b[at + 2] = nd;
    b[at + 3] = t.offset;
    const { shape: sh, strides: st } = t;
    for (let i = 0;i < nd; i++) {
      b[at + 4 + i] = sh[i];
      b[at + 4 + nd + i] = st[i];
    }
    if (this.retain)
      this.keep.push(data);
    return at + 4 + 2 * nd;
  }
  instr(opcode, attrs, out, ins) {
    const na = attrs.length;
    let words = 8 + na + 2 * out.shape.length;
    for (let k = 0;k < ins.length; k++)
      words += 4 + 2 * ins[k].shape.length;
    this.reserve(words);
    const start = this.n;
    const b = this.buf;
    b[start] = opcode;
    b[start + 1] = words;
    b[start + 2] = ins.length;
    b[start + 3] = na;
    for (let i = 0;i < na; i++)
      b[start + 4 + i] = attrs[i];
    let at = this.tensor(out, start + 4 + na);
    for (let k = 0;k < ins.length; k++)
      at = this.tensor(ins[k], at);
    this.n = at;
    this.count++;
  }
}

// src/scheduler/fingerprint.ts
var words = new Float64Array(1024);
var epoch = 0;
var stackN = [];
var stackI = [];
var leafStorages = [];
var leafFirst = [];
var leafMap = new Map;
var SCAN_MAX = 16;
function firstOver(s, x) {
  const n = leafStorages.length;
  if (n < SCAN_MAX) {
    for (let k = 0;k < n; k++)
      if (leafStorages[k] === s)
        return leafFirst[k];
    leafStorages.push(s);
    leafFirst.push(x);
    if (n + 1 === SCAN_MAX)
      for (let k = 0;k <= n; k++)
        leafMap.set(leafStorages[k], leafFirst[k]);
    return;
  }
  const f = leafMap.get(s);
  if (f === undefined)
    leafMap.set(s, x);
  return f;
}
function clearLeaves() {
  leafStorages.length = 0;
  leafFirst.length = 0;
  if (leafMap.size)
    leafMap.clear();
}
function grow(need) {
  let n = words.length;
  while (n < need)
    n *= 2;
  const w = new Float64Array(n);
  w.set(words);
  words = w;
}
var opIds = new Map;
var texts = new Map;
var MAX_TEXTS = 1 << 16;
function opId(op) {
  let id = opIds.get(op);
  if (id === undefined)
    opIds.set(op, id = opIds.size);
  return id;
}
function textId(t) {
  let id = texts.get(t);
  if (id === undefined)
    texts.set(t, id = texts.size);
  return id;
}
var T_NUM = 1;
var T_NEG0 = 2;
var T_NAN = 3;
var T_TRUE = 4;
var T_FALSE = 5;
var T_NULL = 6;
var T_UNDEF = 7;
var T_STR = 8;
var T_TEXT = 9;
var T_ARR = 10;
var T_OBJ = 11;
function attrWords(v, n) {
  if (n + 3 > words.length)
    grow(n + 3);
  switch (typeof v) {
    case "number":
      if (v !== v)
        words[n++] = T_NAN;
      else if (v === 0 && 1 / v < 0)
        words[n++] = T_NEG0;
      else {
        words[n++] = T_NUM;
        words[n++] = v;
      }
      return n;
    case "boolean":
      words[n++] = v ? T_TRUE : T_FALSE;
      return n;
    case "undefined":
      words[n++] = T_UNDEF;
      return n;
    case "string":
      words[n++] = T_STR;
      words[n++] = textId(v);
      return n;
    case "object": {
      if (v === null) {
        words[n++] = T_NULL;
        return n;
      }
      if (Array.isArray(v)) {
        words[n++] = T_ARR;
        words[n++] = v.length;
        for (let i = 0;i < v.length; i++)
          n = attrWords(v[i], n);
        return n;
      }
      if ("name" in v && "kind" in v)
        break;
      words[n++] = T_OBJ;
      const count = n++;
      let k = 0;
      for (const key in v) {
        if (n + 1 > words.length)
          grow(n + 1);
        words[n++] = textId(key);
        n = attrWords(v[key], n);
        k++;
      }
      words[count] = k;
      return n;
    }
  }
  words[n++] = T_TEXT;
  words[n++] = textId(canon(v, false));
  return n;
}
var DTYPE_CODE2 = {
  float32: 0,
  float64: 1,
  float16: 2,
  bfloat16: 3,
  int32: 4,
  int64: 5,
  int8: 6,
  uint8: 7,
  bool: 8
};
var ROOTS = -100;
function storageOf(d) {
  return d.storage ?? rawData(d);
}
function valueClass(d, at) {
  const v = uniformValue(d);
  if (v === null) {
    words[at] = 0;
    words[at + 1] = 0;
  } else if (Object.is(v, -0)) {
    words[at] = 3;
    words[at + 1] = 0;
  } else if (Number.isInteger(v * 8)) {
    words[at] = 2;
    words[at + 1] = v;
  } else {
    words[at] = 1;
    words[at + 1] = 0;
  }
}
function walk(roots, context, retainAll) {
  if (texts.size > MAX_TEXTS)
    clearRecipes();
  const ep = ++epoch;
  const nodes = [];
  stackN.length = 0;
  stackI.length = 0;
  clearLeaves();
  let n = 0;
  let h = 2166136261 ^ context;
  if (words.length < 64)
    grow(64);
  words[n++] = context;
  for (const r of roots) {
    if (r.walk === ep)
      continue;
    r.walk = ep;
    stackN.push(r);
    stackI.push(0);
    while (stackN.length) {
      const top = stackN.length - 1;
      const x = stackN[top];
      const i = stackI[top];
      if (!x.realized && i < x.inputs.length) {
        stackI[top] = i + 1;
        const c = x.inputs[i];
        if (c.walk !== ep) {
          c.walk = ep;
          stackN.push(c);
          stackI.push(0);
        }
        continue;
      }
      stackN.pop();
      stackI.pop();
      x.index = nodes.length;
      nodes.push(x);
      const d = x.realized;
      if (x.stale)
        throw staleError(x);
      if (d) {
        const nd = d.shape.length;
        if (n + 12 + 2 * nd > words.length)
          grow(n + 12 + 2 * nd);
        const start = n;
        words[n++] = -1 - DTYPE_CODE2[d.dtype];
        words[n++] = nd;
        for (let k = 0;k < nd; k++)
          words[n++] = d.shape[k];
        for (let k = 0;k < nd; k++)
          words[n++] = d.shape[k] === 1 ? 0 : d.strides[k];
        words[n++] = x.constant ? 1 : 0;
        if (x.constant)
          valueClass(d, n);
        else {
          words[n] = 0;
          words[n + 1] = 0;
        }
        n += 2;
        const first = firstOver(storageOf(d), x);
        if (first === undefined) {
          words[n++] = -1;
          words[n++] = 0;
        } else {
          words[n++] = first.index;
          words[n++] = d.offset - first.realized.offset;
        }
        for (let k = start;k < n; k++)
          h = Math.imul(h ^ (words[k] | 0), 16777619);
      } else {
        const ins = x.inputs;
        const ni = ins.length;
        const start = n;
        if (n + 1 > words.length)
          grow(n + 1);
        words[n++] = opId(x.op);
        n = attrWords(x.attrs, n);
        if (n + 2 + ni > words.length)
          grow(n + 2 + ni);
        words[n++] = retainAll || x.tracked !== null && !x.tracked.released ? 1 : 0;
        words[n++] = ni;
        for (let k = 0;k < ni; k++)
          words[n++] = ins[k].index;
        for (let k = start;k < n; k++)
          h = Math.imul(h ^ (words[k] | 0), 16777619);
      }
    }
  }
  clearLeaves();
  if (n + 3 + roots.length > words.length)
    grow(n + 3 + roots.length);
  words[n++] = ROOTS;
  words[n++] = retainAll ? 1 : 0;
  for (const r of roots) {
    words[n++] = r.index;
    h = Math.imul(h ^ r.index, 16777619);
  }
  return { nodes, words, length: n, hash: h >>> 0 };
}
var contexts = new Map;
function contextId(text) {
  let c = contexts.get(text);
  if (c === undefined)
    contexts.set(text, c = contexts.size);
  return c;
}
var NO_FOLDS = [];

class Recipe {
  plan;
  words;
  folds;
  leaves;
  outputs;
  kept;
  constructor(plan, words, folds, leaves, outputs, kept) {
    this.plan = plan;
    this.words = words;
    this.folds = folds;
    this.leaves = leaves;
    this.outputs = outputs;
    this.kept = kept;
  }
  matches(w) {
    const a = this.words, b = w.words;
    if (a.length !== w.length)
      return false;
    for (let i = 0;i < a.length; i++)
      if (a[i] !== b[i])
        return false;
    return true;
  }
  bind(w, evaluate) {
    const nodes = w.nodes;
    const folded = this.folds.length ? [] : NO_FOLDS;
    if (this.folds.length) {
      if (!evaluate)
        return null;
      const at = (r) => r >= 0 ? nodes[r].realized : folded[-1 - r];
      for (const f of this.folds) {
        const ins = f.inputs.map(at);
        const out = evaluate(f.op, ins, f.attrs, f.shape, f.dtype);
        const cls = foldClass(out);
        if (cls[0] !== f.cls[0] || !Object.is(cls[1], f.cls[1]) || !sameNumbers(out.strides, f.strides) || out.dtype !== f.dtype)
          return null;
        const shared = storageOf(out) === storageOf(ins[0]) ? out.offset - ins[0].offset : NaN;
        if (!Object.is(shared, f.sharedOffset))
          return null;
        folded.push(out);
      }
    }
    const leaves = new Array(this.leaves.length);
    for (let i = 0;i < leaves.length; i++) {
      const r = this.leaves[i];
      leaves[i] = r >= 0 ? nodes[r].realized : folded[-1 - r];
    }
    const pick = (ix) => {
      const out = new Array(ix.length);
      for (let i = 0;i < ix.length; i++)
        out[i] = nodes[ix[i]];
      return out;
    };
    return { leaves, outputs: this.outputs.map(pick), kept: this.kept.map(pick) };
  }
  static make(w, plan, graph, recorder) {
    if (!recorder.ok)
      return null;
    const index = new Map;
    w.nodes.forEach((n, i) => index.set(n, i));
    const leaves = [];
    for (const n of graph.nodes) {
      if (n.op)
        continue;
      const r = recorder.refs.get(n.leaf);
      if (r === undefined)
        return null;
      leaves.push(r);
    }
    const origins = (ns) => ns.map((n) => index.get(n) ?? -1);
    const outputs = graph.outputs.map((o) => origins(o.origins));
    const kept = plan.keep.map((k) => origins(graph.nodes[k.node].origins));
    if ([...outputs, ...kept].some((l) => l.includes(-1)))
      return null;
    return new Recipe(plan, w.words.length === w.length ? w.words : w.words.slice(0, w.length), recorder.folds, leaves, outputs, kept);
  }
}
function sameNumbers(a, b) {
  if (a.length !== b.length)
    return false;
  for (let i = 0;i < a.length; i++)
    if (a[i] !== b[i])
      return false;
  return true;
}
function foldClass(d) {
  const v = uniformValue(d);
  if (v === null)
    return [0, 0];
  if (Object.is(v, -0))
    return [3, 0];
  return Number.isInteger(v * 8) ? [2, v] : [1, 0];
}

class FoldRecorder {
  folds = [];
  refs = new Map;
  ok = true;
  evaluate;
  constructor(w, inner) {
    w.nodes.forEach((n, i) => {
      if (n.realized && !this.refs.has(n.realized))
        this.refs.set(n.realized, i);
    });
    this.evaluate = inner && ((op, inputs, attrs, shape, dtype) => {
      const out = inner(op, inputs, attrs, shape, dtype);
      const refs = inputs.map((d) => this.refs.get(d));
      if (refs.some((r) => r === undefined) || inputs.length === 0)
        this.ok = false;
      else {
        const shared = storageOf(out) === storageOf(inputs[0]) ? out.offset - inputs[0].offset : NaN;
        this.folds.push({ op, attrs, shape, dtype, inputs: refs, cls: foldClass(out), strides: out.strides.slice(), sharedOffset: shared });
        if (!this.refs.has(out))
          this.refs.set(out, -this.folds.length);
      }
      return out;
    });
  }
}
var MAX_RECIPES = 256;
var MAX_WORDS = 1 << 22;
var byHash = new Map;
var order = [];
var heldWords = 0;
function findRecipe(w) {
  const list = byHash.get(w.hash);
  if (!list)
    return null;
  for (const r of list)
    if (r.matches(w))
      return r;
  return null;
}
function addRecipe(w, r) {
  const list = byHash.get(w.hash);
  if (list)
    list.push(r);
  else
    byHash.set(w.hash, [r]);
  order.push({ hash: w.hash, recipe: r });
  heldWords += r.words.length;
  while (order.length > MAX_RECIPES || heldWords > MAX_WORDS) {
    const old = order.shift();
    heldWords -= old.recipe.words.length;
    const l = byHash.get(old.hash);
    l.splice(l.indexOf(old.recipe), 1);
    if (l.length === 0)
      byHash.delete(old.hash);
  }
}
function removeRecipe(w, r) {
  const l = byHash.get(w.hash);
  const i = l ? l.indexOf(r) : -1;
  if (i < 0)
    return;
  l.splice(i, 1);
  if (l.length === 0)
    byHash.delete(w.hash);
  const k = order.findIndex((o) => o.recipe === r);
  if (k >= 0)
    order.splice(k, 1);
  heldWords -= r.words.length;
}
function clearRecipes() {
  byHash.clear();
  order.length = 0;
  heldWords = 0;
  texts.clear();
}

// src/scheduler/explain_html.ts
function escape_html(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function fmtBytes(b) {
  if (b < 1024)
    return `${b} B`;
  if (b < 1 << 20)
    return `${(b / 1024).toFixed(1)} KiB`;
  return `${(b / (1 << 20)).toFixed(2)} MiB`;
}
function slotNamer(plan) {
  return (s) => {
    const sl = plan.slots[s];
    if (sl.kind === "dest")
      return `dest${plan.destSlots.indexOf(s)}`;
    return sl.kind === "leaf" ? `in${plan.leafSlots.indexOf(s)}` : sl.kind === "own" ? `out${s}` : `ws${s}`;
  };
}
var KIND_COLOR = { leaf: "#9ecae1", own: "#a1d99b", ws: "#fdae6b", dest: "#bcbddc" };
var STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12.5px; }
tr.fused td.op { font-weight: 600; } .group { color: #555; font-family: ui-monospace, monospace; font-size: 12px; }
.kind { padding: 0 6px; border-radius: 3px; font-size: 12px; }
.summary td { border: none; padding: 1px 12px 1px 0; }
`;
function instructionRows(plan, name) {
  const argText = (a) => `${name(a.slot)}${a.view ? fmtShape(a.view.shape) : ""}`;
  return plan.instructions.map((I, i) => {
    const group = I.op.describe?.(I.attrs) ?? "";
    const out = plan.slots[I.out];
    const fused = I.op.name.startsWith("fused_");
    const flags = [I.inplace ? "in-place" : "", I.impl ? `impl ${I.impl}` : ""].filter(Boolean).join(", ");
    return `<tr id="i${i}" class="${fused ? "fused" : ""}"><td class="num">#${i}</td><td class="op"><code>${escape_html(I.op.name)}</code>` + `${group ? `<div class="group">${escape_html(group)}</div>` : ""}</td>` + `<td class="mono">${escape_html(I.args.map(argText).join(", "))}</td>` + `<td class="mono">${escape_html(name(I.out))}${out.kind === "ws" ? ` @${out.offset}` : ""}</td>` + `<td class="mono">${escape_html(fmtShape(I.shape))}</td><td>${escape_html(I.dtype)}</td>` + `<td class="num">${fmtBytes(out.bytes)}</td><td>${escape_html(flags)}</td></tr>`;
  }).join(`
`);
}
function bufferRows(plan, name) {
  const wsIndex = new Map;
  plan.slots.forEach((s, i) => {
    if (s.kind === "ws")
      wsIndex.set(i, wsIndex.size);
  });
  return plan.slots.map((s, i) => {
    const k = wsIndex.get(i);
    const t = k === undefined ? undefined : plan.transients[k];
    const life = t ? `#${t.def} – #${t.last}${t.inplaceOf !== null ? " (in place)" : ""}` : "";
    return `<tr><td class="mono">${escape_html(name(i))}</td><td><span class="kind" style="background:${KIND_COLOR[s.kind]}">${s.kind}</span></td>` + `<td class="mono">${escape_html(fmtShape(s.shape))}</td><td>${escape_html(s.dtype)}</td>` + `<td class="num">${s.kind === "leaf" || s.kind === "dest" ? `${fmtBytes(denseBytes(s.shape, s.dtype))}, bound per run` : fmtBytes(s.bytes)}</td>` + `<td class="num">${s.kind === "ws" ? s.offset : ""}</td><td>${life}</td></tr>`;
  }).join(`
`);
}
function memory_timeline_svg(plan) {
  const n = Math.max(plan.instructions.length, 1);
  const peak = Math.max(plan.memory.peak, 1);
  const W = Math.min(1000, Math.max(360, n * 28)), H = 260, left = 70, top = 10, bottom = 30;
  const cw = W / n, yScale = H / peak;
  const name = slotNamer(plan);
  const ws = plan.slots.map((s, i) => [s, i]).filter(([s]) => s.kind === "ws");
  const bars = plan.transients.map((t, k) => {
    const [slot, si] = ws[k];
    const x = left + t.def * cw, w = (t.last - t.def + 1) * cw;
    const y = top + slot.offset * yScale, h = Math.max(slot.bytes * yScale, 1);
    const label = `${name(si)} ${fmtShape(slot.shape)} ${slot.dtype} ${fmtBytes(slot.bytes)} @${slot.offset}, #${t.def}–#${t.last}${t.inplaceOf !== null ? ", in place" : ""}`;
    const text = w > 40 && h > 12 ? `<text x="${(x + 4).toFixed(1)}" y="${(y + Math.min(h, 24) / 2 + 4).toFixed(1)}" font-size="11">${escape_html(name(si))}</text>` : "";
    return `<g><title>${escape_html(label)}</title><rect class="transient" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" ` + `fill="${t.inplaceOf !== null ? "url(#hatch)" : KIND_COLOR.ws}" stroke="#c4661f" stroke-width="0.8"/>${text}</g>`;
  }).join(`
`);
  const ticks = Array.from({ length: n }, (_, i) => i).filter((i) => n <= 40 || i % Math.ceil(n / 40) === 0).map((i) => `<text x="${(left + (i + 0.5) * cw).toFixed(1)}" y="${top + H + 16}" font-size="10" text-anchor="middle">${i}</text>`).join("");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${left + W + 10}" height="${top + H + bottom}" font-family="sans-serif">` + `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` + `<rect width="6" height="6" fill="${KIND_COLOR.ws}"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c4661f" stroke-width="2"/></pattern></defs>` + `<rect x="${left}" y="${top}" width="${W}" height="${H}" fill="#fafafa" stroke="#ccc"/>` + `<text x="${left - 6}" y="${top + 10}" font-size="10" text-anchor="end">0</text>` + `<text x="${left - 6}" y="${top + H}" font-size="10" text-anchor="end">${escape_html(fmtBytes(plan.memory.peak))}</text>` + `<text x="12" y="${top + H / 2}" font-size="11" transform="rotate(-90 12 ${top + H / 2})" text-anchor="middle">workspace offset</text>` + `${ticks}<text x="${left + W / 2}" y="${top + H + 28}" font-size="11" text-anchor="middle">instruction</text>
${bars}</svg>`;
}
function explain_html(plan, title) {
  const name = slotNamer(plan);
  const m = plan.memory;
  const heading = title ?? `CompiledPlan ${shortHash(plan.key)}`;
  const sy = plan.symbolic;
  const summary = [
    ["device", plan.device],
    ["kernels", `${plan.kernelCount} (${plan.unfusedKernels} without patterns and fusion)`],
    ["workspace", `${fmtBytes(plan.workspaceBytes)} (naive ${fmtBytes(m.naive)}, live bound ${fmtBytes(m.liveBound)})${plan.planned ? "" : "; not used: this backend allocates per kernel"}`],
    ["outputs", `${plan.outputs.map((a) => name(a.slot)).join(", ")} (${fmtBytes(plan.outputBytes)})`],
    ["inputs", `${plan.leafSlots.filter((s) => s >= 0).length} leaves, bound by reference per run`]
  ];
  if (plan.destSlots.length)
    summary.push(["assigns", `${plan.destSlots.length} destination buffers written in place, after every read of their old values`]);
  if (sy)
    summary.push(["symbolic", `${sy.name} = ${sy.value}; one template for ${sy.name} in [${sy.lo}, ${sy.hi}] (workspace planned at ${sy.hi})`]);
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${escape_html(heading)}</title><style>${STYLE}</style></head>
<body>
<h1>${escape_html(heading)}</h1>
<table class="summary">${summary.map(([k, v]) => `<tr><td>${k}</td><td>${escape_html(v)}</td></tr>`).join("")}</table>
<h2>Instructions</h2>
<table class="instructions"><thead><tr><th>#</th><th>kernel (fused ops)</th><th>inputs</th><th>output</th><th>shape</th><th>dtype</th><th>bytes</th><th></th></tr></thead>
<tbody>
${instructionRows(plan, name)}
</tbody></table>
<h2>Buffers</h2>
<p>leaf: an input bound per run (in&lt;k&gt;); own: an output or kept value, fresh per run; ws: a transient in the shared workspace at a fixed offset; dest: a persistent buffer written in place.</p>
<table class="buffers"><thead><tr><th>buffer</th><th>kind</th><th>shape</th><th>dtype</th><th>bytes</th><th>workspace offset</th><th>lifetime</th></tr></thead>
<tbody>
${bufferRows(plan, name)}
</tbody></table>
<h2>Memory timeline</h2>
<p>One bar per workspace buffer, from the instruction that writes it to the last one that reads it, at its byte offset (hover for details; hatched: written in place over a dying input).</p>
${plan.transients.length ? memory_timeline_svg(plan) : "<p>No workspace buffers: every value is an input or an output.</p>"}
</body></html>
`;
}

// src/backends/catalog.ts
var FLOAT32_TOLERANCE = { atol: 0.00001, rtol: 0.0000013 };
function admits(t, c) {
  if (c.kind === "exact")
    return true;
  if (t === "exact")
    return false;
  return c.atol <= t.atol && c.rtol <= t.rtol;
}

// src/scheduler/options.ts
class LoomOutOfMemoryError extends LoomError {
}
var DEFAULTS = { simplify: true, patterns: true, fuse: true, inplace: true, cache: true, symbolic: true, tolerance: FLOAT32_TOLERANCE };
var current = { ...DEFAULTS };
function compilerOptions() {
  return current;
}
var keyOf = null;
var keyText = "";
function optionsKey() {
  const o = current;
  if (keyOf === o)
    return keyText;
  const t = o.tolerance;
  keyText = `${+o.simplify}${+o.patterns}${+o.fuse}${+o.inplace}${t === "exact" ? "x" : `${t.atol},${t.rtol}`}`;
  keyOf = o;
  return keyText;
}
var limits = new Map;
function get_memory_limit(device = "cpu") {
  return limits.get(device) ?? null;
}
function explainEnabled() {
  const env = globalThis.process?.env;
  return env?.LOOM_EXPLAIN === "1";
}

// src/scheduler/plan.ts
var workspaces = new Map;
function workspace(device, bytes) {
  let ws = workspaces.get(device);
  if (!ws)
    workspaces.set(device, ws = { buffer: new ArrayBuffer(0), generation: 0 });
  if (ws.buffer.byteLength < bytes) {
    ws.buffer = new ArrayBuffer(Math.max(bytes, Math.ceil(ws.buffer.byteLength * 1.25)));
    ws.generation++;
  }
  return ws;
}
function fmtBytes2(b) {
  if (b < 1024)
    return `${b} B`;
  if (b < 1 << 20)
    return `${(b / 1024).toFixed(1)} KiB`;
  return `${(b / (1 << 20)).toFixed(2)} MiB`;
}
function shortHash(s) {
  let h = 2166136261;
  for (let i = 0;i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}
var PRODUCTS = new Set(["matmul", "fused_matmul", "lora_linear", "fused_lora_linear"]);
function instructionWork(I) {
  const n = numel(I.shape);
  let w = n;
  for (const l of I.layouts)
    w += numel(l.shape);
  const x = I.layouts[0]?.shape;
  if (PRODUCTS.has(I.op.name) && x && x.length)
    w += n * x[x.length - 1];
  else if (I.op.name === "fused_attention" && x && x.length >= 2)
    w += 2 * n * (I.layouts[1]?.shape.at(-2) ?? 1);
  return w;
}

class CompiledPlan {
  key;
  device;
  instructions;
  slots;
  leafSlots;
  outputs;
  destSlots;
  keep;
  memory;
  transients;
  unfusedKernels;
  symbolic;
  work;
  planned;
  hasWorkspace;
  backend;
  bufs;
  wsGeneration = -1;
  wsViews = [];
  constructor(p) {
    this.key = p.key;
    this.device = p.device;
    this.backend = p.backend;
    this.instructions = p.instructions;
    this.slots = p.slots;
    this.leafSlots = p.leafSlots;
    this.outputs = p.outputs;
    this.destSlots = p.destSlots;
    this.keep = p.keep;
    this.memory = p.memory;
    this.transients = p.transients;
    this.unfusedKernels = p.unfusedKernels;
    this.symbolic = p.symbolic ?? null;
    this.bufs = new Array(p.slots.length).fill(null);
    this.work = p.instructions.reduce((w, I) => w + instructionWork(I), 0);
    this.planned = p.instructions.every((i) => i.kernel !== null);
    this.hasWorkspace = p.slots.some((sl) => sl.kind === "ws");
  }
  get kernelCount() {
    return this.instructions.length;
  }
  get outputBytes() {
    return this.slots.reduce((p, s) => p + (s.kind === "own" ? s.bytes : 0), 0);
  }
  get workspaceBytes() {
    return this.planned ? this.memory.peak : 0;
  }
  estimate_memory() {
    const transient = this.planned ? this.memory.peak : this.memory.naive;
    return { [this.device]: transient + this.outputBytes };
  }
  checkMemory() {
    const limit = get_memory_limit(this.device);
    if (limit === null)
      return;
    const need = this.estimate_memory()[this.device];
    if (need > limit) {
      throw new LoomOutOfMemoryError(`[plan] needs ${need} bytes on ${this.device} (workspace ${this.workspaceBytes}, outputs ${this.outputBytes}) but the memory limit is ${limit} bytes; nothing was run`);
    }
  }
  bindWorkspace() {
    if (!this.hasWorkspace)
      return;
    const dm = this.backend.deviceMemory;
    if (dm) {
      if (this.wsGeneration !== -2)
        this.wsViews = this.slots.map((s) => s.kind === "ws" ? dm.workspace(s.offset, s.bytes, s.dtype, s.shape) : null);
      this.wsGeneration = -2;
      return;
    }
    const ws = workspace(this.device, this.memory.peak);
    if (ws.generation === this.wsGeneration)
      return;
    this.wsViews = this.slots.map((s) => {
      if (s.kind !== "ws")
        return null;
      const n = numel(s.shape);
      const C = allocArray(s.dtype, 0).constructor;
      return { dtype: s.dtype, shape: s.shape, strides: contiguousStrides(s.shape), offset: 0, data: new C(ws.buffer, s.offset, n) };
    });
    this.wsGeneration = ws.generation;
  }
  run(leaves, dests = []) {
    this.checkMemory();
    const B = this.bufs;
    const planned = this.planned;
    for (let k = 0;k < this.leafSlots.length; k++) {
      const s = this.leafSlots[k];
      if (s >= 0)
        B[s] = leaves[k];
    }
    let late = null;
    for (let k = 0;k < this.destSlots.length; k++) {
      const d = dests[k], sl = this.destSlots[k];
      if (this.backend.writesViews || d.offset === 0 && (this.backend.deviceMemory !== undefined || d.data.length === numel(d.shape)))
        B[sl] = d;
      else {
        const tmp = this.backend.deviceMemory?.alloc(d.dtype, d.shape) ?? allocData(d.dtype, d.shape);
        (late ??= []).push([d, tmp]);
        B[sl] = tmp;
      }
    }
    this.backend.begin?.(this.work);
    if (planned) {
      this.bindWorkspace();
      for (let s = 0;s < this.slots.length; s++) {
        const sl = this.slots[s];
        if (sl.kind === "own")
          B[s] = this.backend.deviceMemory?.alloc(sl.dtype, sl.shape) ?? this.backend.allocOutput?.(sl.dtype, sl.shape) ?? allocData(sl.dtype, sl.shape);
        else if (sl.kind === "ws")
          B[s] = this.wsViews[s];
      }
    }
    const ins = this.instructions;
    for (let i = 0;i < ins.length; i++) {
      const I = ins[i];
      const args = I.args;
      const xs = new Array(args.length);
      for (let k = 0;k < args.length; k++)
        xs[k] = resolve(B, args[k], this.backend);
      if (I.kernel)
        I.kernel(xs, B[I.out]);
      else if (this.slots[I.out].kind === "dest")
        writeInto(this.backend, B[I.out], this.backend.run(I.op, xs, I.attrs, I.shape, I.dtype));
      else
        B[I.out] = this.backend.run(I.op, xs, I.attrs, I.shape, I.dtype);
    }
    if (late)
      for (const [d, tmp] of late)
        writeInto(this.backend, d, tmp);
    const outputs = this.outputs.map((a) => resolve(B, a, this.backend));
    const kept = this.keep.map((k) => B[k.slot]);
    for (let s = 0;s < B.length; s++)
      if (!planned || this.slots[s].kind !== "ws")
        B[s] = null;
    return { outputs, kept };
  }
  explain_html(title) {
    return explain_html(this, title);
  }
  explain() {
    const name = (s) => {
      const sl = this.slots[s];
      if (sl.kind === "dest")
        return `dest${this.destSlots.indexOf(s)}`;
      return sl.kind === "leaf" ? `in${this.leafSlots.indexOf(s)}` : sl.kind === "own" ? `out${s}` : `ws${s}`;
    };
    const argText = (a) => `${name(a.slot)}${a.view ? `${fmtShape(a.view.shape)}` : ""}`;
    const m = this.memory;
    const lines = [
      `CompiledPlan ${shortHash(this.key)} on ${this.device}: ${this.kernelCount} kernels (${this.unfusedKernels} unfused), ` + `workspace ${fmtBytes2(this.workspaceBytes)} (naive ${fmtBytes2(m.naive)}, live bound ${fmtBytes2(m.liveBound)}), outputs ${fmtBytes2(this.outputBytes)}`
    ];
    const sy = this.symbolic;
    if (sy)
      lines.push(`  symbolic: ${sy.name} = ${sy.value}, one template for ${sy.name} in [${sy.lo}, ${sy.hi}] (kernels prepared for this value, workspace planned at ${sy.hi})`);
    this.instructions.forEach((I, i) => {
      const d = I.op.describe?.(I.attrs);
      const s = this.slots[I.out];
      const where = s.kind === "ws" ? `@${s.offset}` : "";
      lines.push(`  #${i} ${I.op.name}${d ? ` [${d}]` : ""} (${I.args.map(argText).join(", ")}) -> ${name(I.out)}${where} ${fmtShape(I.shape)} ${I.dtype} ${fmtBytes2(s.bytes)}${I.inplace ? " in-place" : ""}${I.impl ? ` {${I.impl}}` : ""}`);
    });
    const leaves = this.leafSlots.filter((sl) => sl >= 0);
    const leafBytes = leaves.reduce((b, sl) => b + denseBytes(this.slots[sl].shape, this.slots[sl].dtype), 0);
    if (leaves.length)
      lines.push(`  inputs: ${leaves.length} persistent leaves in0..in${leaves.length - 1} (${fmtBytes2(leafBytes)}), bound by reference per run, no copy`);
    lines.push(`  outputs: ${this.outputs.map(argText).join(", ")}${this.destSlots.length ? `; assigns: ${this.destSlots.length} (dest<k>: a persistent buffer written in place, after every read of its old value)` : ""}`);
    return lines.join(`
`);
  }
}
function writeInto(backend, dst, src) {
  if (backend.write?.(dst, src))
    return;
  const v = toContiguous(src, dst.dtype).data;
  dst.data.set(v.subarray(0, numel(dst.shape)), dst.offset);
}
function resolve(B, a, backend) {
  const b = B[a.slot];
  const v = a.view;
  if (!v)
    return b;
  if (backend.view)
    return backend.view(b, v.shape, v.strides, b.offset + v.offset);
  return { dtype: b.dtype, shape: v.shape, strides: v.strides, offset: b.offset + v.offset, data: b.data };
}
function denseBytes(shape, dtype) {
  return numel(shape) * itemsize[dtype];
}

// loom-node-stub:node:fs
var no = (n) => () => {
  throw new Error(`${n}: node:fs is not available in a browser (Loom reads files only under Bun, Deno or Node)`);
};
var appendFile = no("fs.appendFile");
var appendFileSync = no("fs.appendFileSync");
var access = no("fs.access");
var accessSync = no("fs.accessSync");
var chown = no("fs.chown");
var chownSync = no("fs.chownSync");
var chmod = no("fs.chmod");
var chmodSync = no("fs.chmodSync");
var close = no("fs.close");
var closeSync = no("fs.closeSync");
var copyFile = no("fs.copyFile");
var copyFileSync = no("fs.copyFileSync");
var cp = no("fs.cp");
var cpSync = no("fs.cpSync");
var createReadStream = no("fs.createReadStream");
var createWriteStream = no("fs.createWriteStream");
var exists = no("fs.exists");
var existsSync = no("fs.existsSync");
var fchown = no("fs.fchown");
var fchownSync = no("fs.fchownSync");
var fchmod = no("fs.fchmod");
var fchmodSync = no("fs.fchmodSync");
var fdatasync = no("fs.fdatasync");
var fdatasyncSync = no("fs.fdatasyncSync");
var fstat = no("fs.fstat");
var fstatSync = no("fs.fstatSync");
var fsync = no("fs.fsync");
var fsyncSync = no("fs.fsyncSync");
var ftruncate = no("fs.ftruncate");
var ftruncateSync = no("fs.ftruncateSync");
var futimes = no("fs.futimes");
var futimesSync = no("fs.futimesSync");
var glob = no("fs.glob");
var globSync = no("fs.globSync");
var lchown = no("fs.lchown");
var lchownSync = no("fs.lchownSync");
var lchmod = no("fs.lchmod");
var lchmodSync = no("fs.lchmodSync");
var link = no("fs.link");
var linkSync = no("fs.linkSync");
var lstat = no("fs.lstat");
var lstatSync = no("fs.lstatSync");
var lutimes = no("fs.lutimes");
var lutimesSync = no("fs.lutimesSync");
var mkdir = no("fs.mkdir");
var mkdirSync = no("fs.mkdirSync");
var mkdtemp = no("fs.mkdtemp");
var mkdtempSync = no("fs.mkdtempSync");
var mkdtempDisposableSync = no("fs.mkdtempDisposableSync");
var open = no("fs.open");
var openSync = no("fs.openSync");
var read = no("fs.read");
var readFile = no("fs.readFile");
var readFileSync = no("fs.readFileSync");
var readSync = no("fs.readSync");
var readdir = no("fs.readdir");
var readdirSync = no("fs.readdirSync");
var readlink = no("fs.readlink");
var readlinkSync = no("fs.readlinkSync");
var readv = no("fs.readv");
var readvSync = no("fs.readvSync");
var realpath = no("fs.realpath");
var realpathSync = no("fs.realpathSync");
var rename = no("fs.rename");
var renameSync = no("fs.renameSync");
var rm = no("fs.rm");
var rmSync = no("fs.rmSync");
var rmdir = no("fs.rmdir");
var rmdirSync = no("fs.rmdirSync");
var stat = no("fs.stat");
var statfs = no("fs.statfs");
var statSync = no("fs.statSync");
var statfsSync = no("fs.statfsSync");
var symlink = no("fs.symlink");
var symlinkSync = no("fs.symlinkSync");
var truncate = no("fs.truncate");
var truncateSync = no("fs.truncateSync");
var unlink = no("fs.unlink");
var unlinkSync = no("fs.unlinkSync");
var unwatchFile = no("fs.unwatchFile");
var utimes = no("fs.utimes");
var utimesSync = no("fs.utimesSync");
var watch = no("fs.watch");
var watchFile = no("fs.watchFile");
var write = no("fs.write");
var writeFile = no("fs.writeFile");
var writeFileSync = no("fs.writeFileSync");
var writeSync = no("fs.writeSync");
var writev = no("fs.writev");
var writevSync = no("fs.writevSync");
var _toUnixTimestamp = no("fs._toUnixTimestamp");
var openAsBlob = no("fs.openAsBlob");
var Dirent = no("fs.Dirent");
var opendir = no("fs.opendir");
var opendirSync = no("fs.opendirSync");
var F_OK = no("fs.F_OK");
var R_OK = no("fs.R_OK");
var W_OK = no("fs.W_OK");
var X_OK = no("fs.X_OK");
var constants = no("fs.constants");
var Dir = no("fs.Dir");
var Stats = no("fs.Stats");
var ReadStream = no("fs.ReadStream");
var WriteStream = no("fs.WriteStream");
var FileReadStream = no("fs.FileReadStream");
var Utf8Stream = no("fs.Utf8Stream");
var FileWriteStream = no("fs.FileWriteStream");
var promises = no("fs.promises");

// loom-node-stub:node:path
var no2 = (n) => () => {
  throw new Error(`${n}: node:path is not available in a browser (Loom reads files only under Bun, Deno or Node)`);
};
var resolve2 = no2("path.resolve");
var normalize = no2("path.normalize");
var isAbsolute = no2("path.isAbsolute");
var join = no2("path.join");
var relative = no2("path.relative");
var toNamespacedPath = no2("path.toNamespacedPath");
var dirname = no2("path.dirname");
var basename = no2("path.basename");
var extname = no2("path.extname");
var format = no2("path.format");
var parse = no2("path.parse");
var sep = no2("path.sep");
var delimiter = no2("path.delimiter");
var win32 = no2("path.win32");
var posix = no2("path.posix");
var _makeLong = no2("path._makeLong");
var matchesGlob = no2("path.matchesGlob");

// loom-node-stub:node:os
var no3 = (n) => () => {
  throw new Error(`${n}: node:os is not available in a browser (Loom reads files only under Bun, Deno or Node)`);
};
var availableParallelism = no3("os.availableParallelism");
var arch = no3("os.arch");
var cpus = no3("os.cpus");
var endianness = no3("os.endianness");
var freemem = no3("os.freemem");
var getPriority = no3("os.getPriority");
var homedir = no3("os.homedir");
var hostname = no3("os.hostname");
var loadavg = no3("os.loadavg");
var networkInterfaces = no3("os.networkInterfaces");
var platform = no3("os.platform");
var release = no3("os.release");
var setPriority = no3("os.setPriority");
var tmpdir = no3("os.tmpdir");
var totalmem = no3("os.totalmem");
var type = no3("os.type");
var uptime = no3("os.uptime");
var userInfo = no3("os.userInfo");
var version = no3("os.version");
var machine = no3("os.machine");
var devNull = no3("os.devNull");
var EOL = no3("os.EOL");
var constants2 = no3("os.constants");

// src/io/files.ts
function fileKind(st) {
  if (st.isFile())
    return "a regular file";
  if (st.isDirectory())
    return "a directory";
  if (st.isFIFO())
    return "a FIFO (named pipe)";
  if (st.isSocket())
    return "a socket";
  if (st.isCharacterDevice())
    return "a character device";
  if (st.isBlockDevice())
    return "a block device";
  return "not a regular file";
}
function openRegularFile(path, fail) {
  const before = statSync(path);
  if (!before.isFile())
    throw fail(`is ${fileKind(before)}, expected a regular file`);
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const st = fstatSync(fd);
  if (!st.isFile()) {
    closeSync(fd);
    throw fail(`is ${fileKind(st)}, expected a regular file`);
  }
  return { fd, size: st.size };
}
function readAt(fd, position, length) {
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const got = readSync(fd, out, done, length - done, position + done);
    if (got <= 0)
      break;
    done += got;
  }
  return done === length ? out : out.subarray(0, done);
}
function readRegularFile(path, fail, max_bytes = Infinity) {
  const { fd, size } = openRegularFile(path, fail);
  try {
    if (size > max_bytes)
      throw fail(`${size} bytes exceeds the maximum of ${max_bytes}`);
    return readAt(fd, 0, size);
  } finally {
    closeSync(fd);
  }
}
function checkpointRoot(dir) {
  const real = realpathSync(dir);
  const parts = real.split(sep);
  for (let i = parts.length - 3;i >= 0; i--) {
    if (parts[i].startsWith("models--") && parts[i + 1] === "snapshots")
      return parts.slice(0, i + 1).join(sep) || sep;
  }
  return real;
}
function resolveCheckpointFile(dir, name, fail, root) {
  const full = resolve2(dir, name);
  let real;
  try {
    real = realpathSync(full);
  } catch {
    let link = false;
    try {
      link = lstatSync(full).isSymbolicLink();
    } catch {
      return null;
    }
    if (link)
      throw fail("is a symbolic link whose target does not exist (an incomplete download?)");
    return null;
  }
  root ??= checkpointRoot(dir);
  if (!real.startsWith(root.endsWith(sep) ? root : root + sep)) {
    const where = basename(root).startsWith("models--") ? `the Hugging Face cache folder ${root}` : `the checkpoint directory ${root}`;
    throw fail(`resolves to ${real}, outside ${where}`);
  }
  return full;
}
function readCheckpointFile(dir, name, tag, max_bytes = Infinity) {
  const fail = (reason) => new LoomFormatError(`${tag} ${join(dir, name)}: ${reason}`);
  const path = resolveCheckpointFile(dir, name, fail);
  return path === null ? null : readRegularFile(path, fail, max_bytes);
}
function loomCacheDir() {
  return process.env.LOOM_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "loom");
}

// src/scheduler/kernel_db.ts
function sizeClass(n) {
  return n <= 1 ? n : 2 ** Math.ceil(Math.log2(n));
}
function signatureOf(a) {
  const cls = (s) => s.map(sizeClass).join("x");
  const variant = a.op.describe ? a.op.describe(a.attrs) : a.attrs == null ? "" : JSON.stringify(a.attrs);
  const ins = a.inputs.map((i) => `${i.dtype}[${cls(i.shape)}]${isContiguous(i.shape, i.strides) ? "" : "s"}`).join(",");
  return `${a.op.name}:${a.dtype}[${cls(a.shape)}](${ins})${variant ? `#${variant}` : ""}`;
}
var db;
var dbPath = "";
var generation = 0;
function kernelDbGeneration() {
  return generation;
}
var cache2 = new Map;
function kernelDbPath() {
  const env = process.env.LOOM_KERNEL_DB;
  if (env === "off")
    return "";
  if (env)
    return env;
  return join(loomCacheDir(), "kernels.sqlite");
}
function open2() {
  const path = kernelDbPath();
  if (db !== undefined && path === dbPath)
    return db;
  db?.close();
  cache2.clear();
  dbPath = path;
  db = null;
  if (!path || typeof globalThis.Bun === "undefined")
    return null;
  try {
    mkdirSync(dirname(path), { recursive: true });
    const { Database } = (()=>{throw new Error("Cannot require module "+"bun:sqlite");})();
    const d = new Database(path);
    d.exec("PRAGMA busy_timeout = 2000");
    d.exec(`CREATE TABLE IF NOT EXISTS kernels_v1 (
      device TEXT NOT NULL, signature TEXT NOT NULL, impl TEXT NOT NULL,
      n INTEGER NOT NULL, median_ms REAL NOT NULL, min_ms REAL NOT NULL,
      max_abs_err REAL NOT NULL, max_rel_err REAL NOT NULL, within_contract INTEGER NOT NULL, measured_at INTEGER NOT NULL,
      PRIMARY KEY (device, signature, impl))`);
    db = d;
  } catch (e) {
    console.error(`[loom] kernel database unavailable at ${path}: ${e.message}; choosing kernels by rank`);
    db = null;
  }
  return db;
}
function lookupTimings(device, signature) {
  const key = `${device}\x00${signature}`;
  const hit = cache2.get(key);
  if (hit)
    return hit.size ? hit : null;
  const d = open2();
  if (!d)
    return null;
  const rows = d.query("SELECT impl, median_ms, max_abs_err, max_rel_err, within_contract FROM kernels_v1 WHERE device = ? AND signature = ?").all(device, signature);
  const m = new Map(rows.map((r) => [r.impl, r]));
  cache2.set(key, m);
  return m.size ? m : null;
}

// src/scheduler/select.ts
var selectionStats = { chosen: new Map, fromDatabase: 0, fromRank: 0 };
function measuredWithin(tol, m) {
  if (!m.within_contract)
    return false;
  if (tol === "exact")
    return true;
  return m.max_abs_err <= tol.atol || m.max_rel_err <= tol.rtol;
}
function candidates(backend, a, tol) {
  const all = backend.implementations?.(a.op.name) ?? [];
  let ok = all.filter((i) => admits(tol, i.contract) && i.applies(a));
  if (ok.length < 2)
    return ok;
  const db = lookupTimings(backend.name, signatureOf(a));
  if (db)
    ok = ok.filter((i) => i.contract.kind === "exact" || !db.has(i.id) || measuredWithin(tol, db.get(i.id)));
  if (db && ok.every((i) => db.has(i.id))) {
    selectionStats.fromDatabase++;
    return ok.sort((x, y) => db.get(x.id).median_ms - db.get(y.id).median_ms || x.rank - y.rank);
  }
  selectionStats.fromRank++;
  return ok.sort((x, y) => x.rank - y.rank);
}
function prepareKernel(backend, a, tol, force) {
  if (!backend.prepare)
    return null;
  if (backend.implementations) {
    const list = force ? backend.implementations(a.op.name).filter((i) => i.id === force && i.applies(a)) : candidates(backend, a, tol);
    const best = list[0];
    if (best) {
      selectionStats.chosen.set(best.id, (selectionStats.chosen.get(best.id) ?? 0) + 1);
      return { kernel: best.prepare(a), impl: best.id };
    }
  }
  return { kernel: backend.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype), impl: "" };
}

// src/scheduler/plan_template.ts
function isAtom(v) {
  return "name" in v && "kind" in v && typeof v.kind === "string";
}
function splitNumbers(v, nums, text) {
  switch (typeof v) {
    case "number":
      if (Number.isInteger(v) && !Object.is(v, -0)) {
        nums.push(v);
        text.push("#");
      } else
        text.push(Object.is(v, -0) ? "-0" : String(v));
      return true;
    case "string":
      text.push(JSON.stringify(v));
      return true;
    case "boolean":
      text.push(v ? "T" : "F");
      return true;
    case "undefined":
      text.push("u");
      return true;
    case "object": {
      if (v === null) {
        text.push("_");
        return true;
      }
      if (Array.isArray(v)) {
        text.push("[");
        for (const x of v)
          if (!splitNumbers(x, nums, text))
            return false;
        text.push("]");
        return true;
      }
      if (isAtom(v)) {
        text.push(`@${v.name}`);
        return true;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null)
        return false;
      text.push("{");
      for (const k in v) {
        text.push(k, ":");
        if (!splitNumbers(v[k], nums, text))
          return false;
      }
      text.push("}");
      return true;
    }
    default:
      return false;
  }
}
function withNumbers(v, next) {
  if (typeof v === "number")
    return Number.isInteger(v) && !Object.is(v, -0) ? next() : v;
  if (typeof v !== "object" || v === null)
    return v;
  if (Array.isArray(v))
    return v.map((x) => withNumbers(x, next));
  if (isAtom(v))
    return v;
  const out = {};
  for (const k in v)
    out[k] = withNumbers(v[k], next);
  return out;
}
function quadratic(f, s) {
  const [x0, x1, x2] = f.x.map(BigInt);
  const [y0, y1, y2] = f.y.map(BigInt);
  const S = BigInt(s);
  const d = (x1 - x0) * (x2 - x1) * (x2 - x0);
  const n = y0 * d + (S - x0) * (y1 - y0) * (x2 - x1) * (x2 - x0) + (S - x0) * (S - x1) * ((y2 - y1) * (x1 - x0) - (y1 - y0) * (x2 - x1));
  return n % d === 0n ? Number(n / d) : null;
}
function dataOf(p) {
  return {
    ins: p.instructions.map((I) => ({ op: I.op, attrs: I.attrs, args: I.args, layouts: I.layouts, out: I.out, shape: I.shape, dtype: I.dtype, inplace: I.inplace })),
    slots: p.slots.map((s) => ({ kind: s.kind, dtype: s.dtype, shape: s.shape, bytes: s.bytes })),
    leafSlots: p.leafSlots,
    outputs: p.outputs,
    destSlots: p.destSlots,
    keep: p.keep,
    unfused: p.unfusedKernels
  };
}
function samePlan(a, b) {
  const na = [], ta = [], nb = [], tb = [];
  const ok = splitNumbers(dataOf(a), na, ta) && splitNumbers(dataOf(b), nb, tb);
  return ok && ta.join(" ") === tb.join(" ") && na.length === nb.length && na.every((v, i) => v === nb[i]);
}

class PlanTemplate {
  symbol;
  forms;
  base;
  atMax;
  varying;
  large;
  constructor(symbol, forms, base, atMax) {
    this.symbol = symbol;
    this.forms = forms;
    this.base = base;
    this.atMax = atMax;
    this.varying = [];
    forms.forEach((f, i) => {
      if (typeof f !== "number")
        this.varying.push(i);
    });
    this.large = this.varying.map((i) => {
      const f = forms[i];
      return f.y.every((y) => Math.abs(y) >= 2);
    });
  }
  get varyingCount() {
    return this.varying.length;
  }
  static fit(symbol, probes) {
    if (probes.length < 4)
      return null;
    const split = probes.map((p) => {
      const nums = [], text = [];
      return splitNumbers(dataOf(p.plan), nums, text) ? { nums, text: text.join(" ") } : null;
    });
    if (split.some((x) => x === null || x.text !== split[0].text || x.nums.length !== split[0].nums.length))
      return null;
    const ns = split.map((x) => x.nums);
    const xs = [probes[0].s, probes[1].s, probes[2].s];
    const forms = new Array(ns[0].length);
    for (let i = 0;i < forms.length; i++) {
      const y0 = ns[0][i];
      if (ns.every((n) => n[i] === y0)) {
        forms[i] = y0;
        continue;
      }
      const f = { x: xs, y: [y0, ns[1][i], ns[2][i]] };
      for (let k = 3;k < probes.length; k++)
        if (quadratic(f, probes[k].s) !== ns[k][i])
          return null;
      forms[i] = f;
    }
    const atMax = probes.reduce((m, p) => p.s > m.s ? p : m).plan;
    return new PlanTemplate(symbol, forms, dataOf(atMax), atMax);
  }
  instance(s, backend, tolerance) {
    if (s < this.symbol.lo || s > this.symbol.hi)
      return null;
    const values = new Map;
    for (let k = 0;k < this.varying.length; k++) {
      const i = this.varying[k];
      const v = quadratic(this.forms[i], s);
      if (v === null || this.large[k] && Math.abs(v) < 2)
        return null;
      values.set(i, v);
    }
    let pos = 0;
    const next = () => {
      const i = pos++;
      return values.get(i) ?? this.forms[i];
    };
    const d = withNumbers(this.base, next);
    const maxSlots = this.atMax.slots;
    const slots = d.slots.map((sl, i) => ({ ...sl, offset: maxSlots[i].offset }));
    if (slots.some((sl, i) => sl.kind === "ws" && sl.bytes > maxSlots[i].bytes))
      return null;
    const instructions = d.ins.map((I) => {
      const prepared = prepareKernel(backend, { op: I.op, inputs: I.layouts, attrs: I.attrs, shape: I.shape, dtype: I.dtype }, tolerance);
      return { ...I, kernel: prepared?.kernel ?? null, impl: prepared?.impl ?? "" };
    });
    return new CompiledPlan({
      key: `${this.atMax.key}|${this.symbol.name}=${s}`,
      device: this.atMax.device,
      backend,
      instructions,
      slots,
      leafSlots: [...d.leafSlots],
      outputs: [...d.outputs],
      destSlots: [...d.destSlots],
      keep: [...d.keep],
      memory: this.atMax.memory,
      transients: [...this.atMax.transients],
      unfusedKernels: d.unfused,
      symbolic: { name: this.symbol.name, value: s, lo: this.symbol.lo, hi: this.symbol.hi }
    });
  }
}

// src/scheduler/symbolic.ts
var PROBE_MIN = 4;
var PROBE_SPAN = 8;
var marks = new WeakMap;
function checkBound(sym, value, what) {
  if (value < sym.min || value > sym.max) {
    const side = value > sym.max ? `its maximum is ${sym.max}` : `its minimum is ${sym.min}`;
    throw new LoomConstraintViolationError(`[symbolic] ${sym.name} is bound to ${value} (${what()}) but ${side}; nothing was run`);
  }
}
function markDynamic(d, dim, sym) {
  const nd = d.shape.length;
  const k = dim < 0 ? dim + nd : dim;
  if (!Number.isInteger(k) || k < 0 || k >= nd)
    throw new LoomIndexError(`[mark_dynamic] dim ${dim} is out of range for a tensor of shape ${fmtShape(d.shape)}`);
  checkBound(sym, d.shape[k], () => `dim ${k} of a tensor of shape ${fmtShape(d.shape)}`);
  const key = storageOf(d);
  let m = marks.get(key);
  if (!m || m.shape.length !== nd || m.shape.some((s, i) => s !== d.shape[i]))
    marks.set(key, m = { shape: [...d.shape], dims: new Map });
  m.dims.set(k, sym);
}
function dynamicDims(d) {
  const m = marks.get(storageOf(d));
  if (!m || m.shape.length !== d.shape.length || m.shape.some((s, i) => s !== d.shape[i]))
    return new Map;
  return m.dims;
}
function symbolBinding(g) {
  let found = null;
  for (const n of g.nodes) {
    if (n.op)
      continue;
    const dims = dynamicDims(n.leaf);
    for (const [dim, sym] of dims) {
      const value = n.shape[dim];
      checkBound(sym, value, () => `dim ${dim} of an input of shape ${fmtShape(n.shape)}`);
      if (!found)
        found = { sym, value, shape: n.shape };
      else if (sym.key === found.sym.key && value !== found.value) {
        throw new LoomConstraintViolationError(`[symbolic] ${sym.name} is bound to ${found.value} (an input of shape ${fmtShape(found.shape)}) and to ${value} (dim ${dim} of an input of shape ${fmtShape(n.shape)}) in one graph; nothing was run`);
      }
    }
  }
  return found && { sym: found.sym, value: found.value };
}
function isDense2(d) {
  const c = contiguousStrides(d.shape);
  return d.shape.every((_, k) => d.strides[k] === c[k]);
}
var SYMBOL = 1;
var DIM = 2;
var FREE = 3;
function graphSplit(g, sym) {
  const index = new Map;
  const text = [];
  const nums = [];
  const roles = [];
  const starts = [];
  for (let i = 0;i < g.nodes.length; i++) {
    const n = g.nodes[i];
    index.set(n, i);
    starts.push(nums.length);
    if (!n.op) {
      const d = n.leaf, dense = isDense2(d);
      const marked = dynamicDims(d);
      text.push(`;L${n.constant ? "c" : ""}${d.dtype}${d.shape.length}${dense ? "d" : "s"}`);
      d.shape.forEach((s, k) => {
        nums.push(s);
        roles.push(marked.get(k)?.key === sym.key ? SYMBOL : n.constant ? FREE : DIM);
      });
      if (!dense)
        d.strides.forEach((st) => {
          nums.push(st);
          roles.push(FREE);
        });
      continue;
    }
    text.push(`;${n.op.name}(${n.inputs.map((c) => index.get(c)).join(",")})${n.retain ? "!" : ""}`);
    if (!splitNumbers(n.attrs, nums, text))
      return null;
    while (roles.length < nums.length)
      roles.push(FREE);
  }
  text.push(`->${g.outputs.map((o) => index.get(o)).join(",")}`);
  starts.push(nums.length);
  return { text: text.join(""), nums, roles, starts };
}
var valueAt = (f, i, s) => f.a[i] * s + f.b[i];
function guess(g, split, s, at) {
  const { nums, roles, starts } = split;
  const multiples = nums.map((v, i) => roles[i] === SYMBOL || roles[i] === DIM && v === s ? 1 : roles[i] === FREE && v !== 0 && v % s === 0 ? v / s : 0);
  const index = new Map(g.nodes.map((n, i) => [n, i]));
  const a = [...multiples];
  const b = nums.map((v, i) => v - a[i] * s);
  const f = { a, b };
  const shapes = at.map(() => new Map);
  const set = (p, k) => {
    a[p] = k;
    b[p] = nums[p] - k * s;
  };
  const leafShapes = (n, lo) => at.forEach((v, k) => shapes[k].set(n, n.shape.map((_, d) => valueAt(f, lo + d, v))));
  const infers = (n, lo) => {
    try {
      const out = at.map((v, k) => {
        let pos = lo;
        const attrs = withNumbers(n.attrs, () => valueAt(f, pos++, v));
        const shape = n.op.shape(n.inputs.map((c) => ({ shape: shapes[k].get(c), dtype: c.dtype })), attrs);
        return shape.some((d, j) => d < 1 && n.shape[j] >= 1) ? null : shape;
      });
      if (out.some((x) => x === null))
        return false;
      out.forEach((shape, k) => shapes[k].set(n, shape));
      return true;
    } catch {
      return false;
    }
  };
  const choose = (n, lo, hi, multiplesFirst = false) => {
    const exact = [], near = [], multiple = [];
    for (let p = lo;p < hi; p++) {
      exact.push(nums[p] === s ? 1 : 0);
      near.push(Math.abs(nums[p] - s) <= 1 ? 1 : 0);
      multiple.push(multiples[p]);
    }
    const butOne = (c) => c.flatMap((k, j) => k === 0 ? [] : [c.map((x, q) => q === j ? 0 : x)]).reverse();
    const choices = multiplesFirst ? [multiple, ...butOne(multiple)] : [exact, exact.map(() => 0), ...butOne(exact), near, multiple, ...butOne(multiple)];
    for (const c of choices) {
      c.forEach((k, j) => set(lo + j, k));
      if (infers(n, lo))
        return true;
    }
    return false;
  };
  g.nodes.forEach((n, i) => {
    const lo = starts[i], hi = starts[i + 1];
    if (!n.op)
      return leafShapes(n, lo);
    if (choose(n, lo, hi))
      return;
    let retry = false;
    for (const c of n.inputs) {
      const ci = index.get(c), cl = starts[ci];
      if (!c.op) {
        let changed = false;
        c.shape.forEach((v, d) => {
          if (roles[cl + d] === DIM && a[cl + d] === 0 && v !== 0 && v % s === 0) {
            set(cl + d, v / s);
            changed = true;
          }
        });
        if (changed)
          leafShapes(c, cl);
        retry ||= changed;
      } else if (multiples.slice(cl, starts[ci + 1]).some((k, j) => k !== a[cl + j]))
        retry = choose(c, cl, starts[ci + 1], true) || retry;
    }
    if (retry && choose(n, lo, hi))
      return;
    at.forEach((_, k) => shapes[k].set(n, n.shape));
  });
  return f;
}
function solve(n1, s1, n2, s2) {
  const a = [], b = [];
  for (let i = 0;i < n1.length; i++) {
    const slope = (n2[i] - n1[i]) / (s2 - s1);
    if (!Number.isInteger(slope))
      return null;
    a.push(slope);
    b.push(n1[i] - slope * s1);
  }
  return { a, b };
}
var matches = (f, nums, s) => f.a.length === nums.length && nums.every((v, i) => valueAt(f, i, s) === v);
function graphAt(g, f, s) {
  let pos = 0;
  const next = () => valueAt(f, pos++, s);
  const map = new Map;
  for (const n of g.nodes) {
    if (!n.op) {
      const d = n.leaf, dense = isDense2(d);
      const shape = d.shape.map(() => next());
      const strides = dense ? contiguousStrides(shape) : d.strides.map(() => next());
      map.set(n, mkLeaf({ dtype: d.dtype, shape, strides, offset: 0, data: allocArray(d.dtype, 0) }, n.constant, n.origins));
      continue;
    }
    const inputs = n.inputs.map((c) => map.get(c));
    const attrs = withNumbers(n.attrs, next);
    const shape = n.op.shape(inputs, attrs);
    map.set(n, mkNode(n.op, inputs, attrs, shape, n.dtype, n.origins, n.retain));
  }
  return { nodes: g.nodes.map((n) => map.get(n)), outputs: g.outputs.map((o) => map.get(o)) };
}
var MAX_FAMILIES = 64;
var MAX_INSTANCES2 = 32;
var families = new Map;
var symbolicStats = { templates: 0, probes: 0, instances: 0, fixed: 0 };
var symbolicOptions = { check: false };
function probeValues(sym, s) {
  const lo = Math.max(sym.min, PROBE_MIN), hi = sym.max;
  if (hi - lo < PROBE_SPAN)
    return null;
  const mid = Math.floor((lo + hi) / 2);
  const pts = [lo, mid, hi, Math.floor((lo + mid) / 2), Math.floor((mid + hi) / 2)];
  if (s >= lo && !pts.includes(s))
    pts.push(s);
  return pts;
}
function symbolicPlan(g, context, backend, tolerance, build) {
  const bound = symbolBinding(g);
  if (!bound)
    return null;
  const split = graphSplit(g, bound.sym);
  if (!split)
    return null;
  const { sym, value: s } = bound;
  if (s < Math.max(sym.min, PROBE_MIN))
    return fixed();
  const key = `${context}|${sym.key}|${split.text}`;
  let fam = families.get(key);
  if (!fam) {
    fam = { last: null, affine: null, template: null, builds: 0, dead: false, instances: new Map };
    families.set(key, fam);
    if (families.size > MAX_FAMILIES)
      families.delete(families.keys().next().value);
  }
  if (fam.dead)
    return fixed();
  if (fam.template && fam.affine && matches(fam.affine, split.nums, s)) {
    const plan = instanceOf(fam, s, g, backend, tolerance, build);
    return plan ? { plan, compiled: false } : fixed();
  }
  const prev = fam.last;
  fam.last = { s, nums: split.nums };
  const pts = probeValues(sym, s);
  const affine = prev && prev.s !== s && prev.nums.length === split.nums.length ? solve(prev.nums, prev.s, split.nums, s) : pts && guess(g, split, s, [pts[0], pts[2]]);
  if (!affine || !pts || fam.builds >= 2) {
    fam.dead = !affine || !pts || fam.builds >= 2;
    return fixed();
  }
  fam.builds++;
  fam.template = null;
  fam.instances.clear();
  symbolicStats.templates++;
  let template = null;
  try {
    const probes = pts.map((p) => {
      symbolicStats.probes++;
      return { s: p, plan: build(p === s ? g : graphAt(g, affine, p), `${key}|${sym.name}=${p}`) };
    });
    template = PlanTemplate.fit({ name: sym.name, lo: pts[0], hi: sym.max }, probes);
  } catch {
    template = null;
  }
  if (!template)
    return fixed();
  fam.affine = affine;
  fam.template = template;
  const plan = instanceOf(fam, s, g, backend, tolerance, build);
  return plan ? { plan, compiled: true } : fixed();
}
function fixed() {
  symbolicStats.fixed++;
  return null;
}
function instanceOf(fam, s, g, backend, tolerance, build) {
  let plan = fam.instances.get(s);
  if (plan)
    return plan;
  plan = fam.template.instance(s, backend, tolerance) ?? undefined;
  if (!plan)
    return null;
  if (symbolicOptions.check && !samePlan(plan, build(g, "check"))) {
    throw new Error(`[symbolic] the template's plan at ${plan.symbolic.name} = ${s} differs from the plan compiled for that value`);
  }
  symbolicStats.instances++;
  fam.instances.set(s, plan);
  if (fam.instances.size > MAX_INSTANCES2)
    fam.instances.delete(fam.instances.keys().next().value);
  return plan;
}

// src/scheduler/compile.ts
var MAX_PLANS = 256;
var plans = new Map;
var planCacheStats = { hits: 0, misses: 0, fastHits: 0, get size() {
  return plans.size;
} };
function capsOf(backend) {
  return { fused: new Set(backend.prepare ? backend.fusedOps ?? [] : []), maxInputs: backend.maxKernelInputs };
}
var evaluators = new WeakMap;
function evaluatorOf(backend) {
  if (evaluators.has(backend))
    return evaluators.get(backend);
  const e = !backend.prepare ? undefined : backend.deviceMemory ? jsBackend.run.bind(jsBackend) : backend.run.bind(backend);
  evaluators.set(backend, e);
  return e;
}
function bindingOf(graph, plan) {
  return {
    leaves: leavesOf(graph).map((n) => n.leaf),
    outputs: graph.outputs.map((o) => o.origins),
    kept: plan.keep.map((k) => graph.nodes[k.node].origins)
  };
}
var last = { backend: null, device: "", options: "", generation: -1, text: "", id: -1 };
function contextOf(backend, device) {
  const o = optionsKey(), g = kernelDbGeneration();
  if (backend !== last.backend || device !== last.device || o !== last.options || g !== last.generation) {
    last.text = `${backend.name}:${device}:${o}:${g}`;
    Object.assign(last, { backend, device, options: o, generation: g, id: contextId(last.text) });
  }
  return last.text;
}
function compile2(roots, backend, device = "cpu", retainAll = false, writes = 0) {
  const opts = compilerOptions();
  const evaluate = opts.simplify ? evaluatorOf(backend) : undefined;
  let context = contextOf(backend, device);
  let ctxId = last.id;
  if (writes > 0) {
    context += `|assigns ${writes}`;
    ctxId = contextId(context);
  }
  let w = null;
  if (opts.cache) {
    w = walk(roots, ctxId, retainAll);
    const r = findRecipe(w);
    if (r) {
      const binding = r.bind(w, evaluate);
      if (binding) {
        planCacheStats.hits++;
        planCacheStats.fastHits++;
        return { plan: r.plan, binding, hit: true };
      }
      removeRecipe(w, r);
    }
    w = { ...w, words: w.words.slice(0, w.length) };
  }
  const recorder = w ? new FoldRecorder(w, evaluate) : null;
  const raw = fromLazy(roots, retainAll);
  const graph = opts.simplify ? simplify(raw, { evaluate: recorder ? recorder.evaluate : evaluate }) : raw;
  if (opts.cache && opts.symbolic) {
    const sym = symbolicPlan(graph, context, backend, opts.tolerance, (g, k) => buildPlan(g, backend, device, k, writes));
    if (sym) {
      if (sym.compiled)
        planCacheStats.misses++;
      else
        planCacheStats.hits++;
      if (sym.compiled && explainEnabled())
        console.error(sym.plan.explain());
      if (w && recorder)
        remember(w, recorder, sym.plan, graph);
      return { plan: sym.plan, binding: bindingOf(graph, sym.plan), hit: !sym.compiled };
    }
  } else
    symbolBinding(graph);
  const key = structuralKey(graph, context);
  let plan = opts.cache ? plans.get(key) : undefined;
  const hit = plan !== undefined;
  if (plan) {
    planCacheStats.hits++;
    plans.delete(key);
    plans.set(key, plan);
  } else {
    planCacheStats.misses++;
    plan = buildPlan(graph, backend, device, key, writes);
    if (opts.cache) {
      plans.set(key, plan);
      if (plans.size > MAX_PLANS)
        plans.delete(plans.keys().next().value);
    }
    if (explainEnabled())
      console.error(plan.explain());
  }
  if (w && recorder)
    remember(w, recorder, plan, graph);
  return { plan, binding: bindingOf(graph, plan), hit };
}
function remember(w, recorder, plan, graph) {
  const recipe = Recipe.make(w, plan, graph, recorder);
  if (recipe)
    addRecipe(w, recipe);
}
function buildPlan(graph, backend, device, key, writes = 0) {
  const opts = compilerOptions();
  const caps = capsOf(backend);
  const legal = legalizeViews(graph);
  const unfused = legal.nodes.filter((n) => n.op && n.op.kind !== "view").length;
  let g = legal;
  if (opts.patterns)
    g = matchPatterns(g, caps);
  if (opts.fuse)
    g = fuse(g, caps);
  return schedule(g, graph, backend, device, key, unfused, opts.inplace, opts.tolerance, writes);
}
function readsInPlace(I, b, slots) {
  const dense = contiguousStrides(I.shape);
  const identity = (strides, offset) => offset === 0 && I.shape.every((s, d) => s === 1 || strides[d] === dense[d]);
  if (numel(slots[b].shape) !== numel(I.shape))
    return false;
  if (I.op.name === "fused_elementwise") {
    const p = I.attrs.program;
    return I.args.every((a, k) => a.slot !== b || a.view === null && p.code.every((c) => c.k !== "load" || c.input !== k || identity(c.strides, c.offset)));
  }
  if (I.op.kind === "elementwise") {
    return I.args.every((a) => a.slot !== b || (a.view === null ? slots[b].shape.length === I.shape.length && slots[b].shape.every((s, d) => s === I.shape[d]) : a.view.shape.length === I.shape.length && identity(a.view.strides, a.view.offset)));
  }
  return false;
}
function schedule(g, simplified, backend, device, key, unfused, inplace, tolerance, writes) {
  const lay = layouts(g);
  const slots = [];
  const slotOf = new Map;
  const leafIndex = new Map(leavesOf(simplified).map((n, i) => [n, i]));
  const leafSlots = new Array(leafIndex.size).fill(-1);
  const sIndex = new Map;
  simplified.nodes.forEach((n, i) => {
    for (const o of n.origins)
      sIndex.set(o, i);
  });
  const nOut = g.outputs.length - writes;
  const escapes = new Set(g.outputs.slice(0, nOut).map((o) => lay.get(o).base));
  const arg = (x) => {
    const l = lay.get(x);
    const slot = slotOf.get(l.base);
    return { slot, view: x === l.base ? null : { shape: l.shape, strides: l.strides, offset: l.offset } };
  };
  const leafStrides = new Map;
  const layoutOf = (a) => {
    const sl = slots[a.slot];
    if (a.view)
      return { shape: a.view.shape, strides: a.view.strides, dtype: sl.dtype };
    return { shape: sl.shape, strides: sl.kind === "leaf" ? leafStrides.get(a.slot) : contiguousStrides(sl.shape), dtype: sl.dtype };
  };
  const instructions = [];
  const keep = [];
  const def = [];
  const last = [];
  for (const n of g.nodes) {
    if (!n.op) {
      const s = slots.push({ kind: "leaf", dtype: n.dtype, shape: n.shape, bytes: 0, offset: 0 }) - 1;
      slotOf.set(n, s);
      leafStrides.set(s, n.leaf.strides);
      leafSlots[leafIndex.get(n)] = s;
      continue;
    }
    if (n.op.kind === "view")
      continue;
    const own = escapes.has(n) || n.retain;
    const s = slots.push({ kind: own ? "own" : "ws", dtype: n.dtype, shape: n.shape, bytes: backend.deviceMemory ? numel(n.shape) * backend.deviceMemory.elementBytes(n.dtype) : denseBytes(n.shape, n.dtype), offset: 0 }) - 1;
    slotOf.set(n, s);
    const args = n.inputs.map(arg);
    const i = instructions.length;
    for (const a of args)
      last[a.slot] = i;
    def[s] = i;
    last[s] = i;
    const layouts = args.map(layoutOf);
    const prepared = prepareKernel(backend, { op: n.op, inputs: layouts, attrs: n.attrs, shape: n.shape, dtype: n.dtype }, tolerance);
    instructions.push({ op: n.op, attrs: n.attrs, args, layouts, out: s, shape: n.shape, dtype: n.dtype, kernel: prepared?.kernel ?? null, impl: prepared?.impl ?? "", inplace: false });
    if (n.retain) {
      const idx = n.origins.length ? sIndex.get(n.origins[0]) : undefined;
      if (idx !== undefined)
        keep.push({ slot: s, node: idx });
    }
  }
  const outputs = g.outputs.slice(0, nOut).map(arg);
  const destSlots = [];
  for (const o of g.outputs.slice(nOut)) {
    const a = arg(o);
    const s = slots.push({ kind: "dest", dtype: o.dtype, shape: o.shape, bytes: 0, offset: 0 }) - 1;
    destSlots.push(s);
    const layout = layoutOf(a);
    const i = instructions.length;
    last[a.slot] = i;
    const prepared = prepareKernel(backend, { op: OPS.contiguous, inputs: [layout], attrs: {}, shape: o.shape, dtype: o.dtype }, tolerance);
    instructions.push({ op: OPS.contiguous, attrs: {}, args: [a], layouts: [layout], out: s, shape: o.shape, dtype: o.dtype, kernel: prepared?.kernel ?? null, impl: prepared?.impl ?? "", inplace: false });
  }
  const inplaceOf = new Map;
  const taken = new Set;
  if (inplace && backend.prepare) {
    instructions.forEach((I, i) => {
      if (slots[I.out].kind !== "ws")
        return;
      for (const a of I.args) {
        const b = a.slot, sb = slots[b];
        if (sb.kind !== "ws" || last[b] !== i || taken.has(b))
          continue;
        if (sb.bytes !== slots[I.out].bytes || itemsize[sb.dtype] !== itemsize[I.dtype])
          continue;
        if (!readsInPlace(I, b, slots))
          continue;
        inplaceOf.set(I.out, b);
        taken.add(b);
        instructions[i] = { ...I, inplace: true };
        break;
      }
    });
  }
  const wsSlots = slots.map((s, i) => s.kind === "ws" ? i : -1).filter((i) => i >= 0);
  const wsIndex = new Map(wsSlots.map((s, k) => [s, k]));
  const bufs = wsSlots.map((s) => ({
    bytes: slots[s].bytes,
    def: def[s],
    last: last[s],
    inplaceOf: inplaceOf.has(s) ? wsIndex.get(inplaceOf.get(s)) : null
  }));
  const memory = planMemory(bufs);
  wsSlots.forEach((s, k) => {
    slots[s] = { ...slots[s], offset: memory.offsets[k] };
  });
  return new CompiledPlan({ key, device, backend, instructions, slots, leafSlots, outputs, destSlots, keep, memory, transients: bufs, unfusedKernels: unfused });
}

// src/scheduler/realize.ts
var realizeStats = { realizes: 0, nodes: 0 };
function keepValue(n, d) {
  if (n.realized)
    return;
  n.realized = d;
  n.inputs = [];
}
function realize(roots, backend, device = "cpu", retainAll = false, assigns = [], beforeRun) {
  const pending = roots.filter((r) => !r.realized);
  if (pending.length === 0 && assigns.length === 0)
    return null;
  const all = assigns.length ? [...pending, ...assigns.map((a) => a.node)] : pending;
  const { plan, binding } = compile2(all, backend, device, retainAll, assigns.length);
  beforeRun?.();
  const { outputs, kept } = plan.run(binding.leaves, assigns.map((a) => a.dest));
  backend.flush?.();
  realizeStats.realizes++;
  realizeStats.nodes += plan.kernelCount;
  for (let i = 0;i < pending.length; i++)
    keepValue(pending[i], outputs[i]);
  for (let i = 0;i < pending.length; i++)
    for (const n of binding.outputs[i])
      keepValue(n, outputs[i]);
  kept.forEach((buf, k) => {
    for (const n of binding.kept[k])
      keepValue(n, buf);
  });
  return plan;
}
function planFor(roots, backend, device = "cpu") {
  return compile2(roots.filter((r) => !r.realized), backend, device).plan;
}

// src/backends/native/rows.ts
var RANK2 = 10;
var MAX_ROW = 2 ** 24;
var MAX_SOFTMAX_ROW = 2 ** 20;
var MAX_LN_ROW = 2 ** 14;
var MAX_PROLOGUE = 32;
var PROLOGUE_OPS = { float32: new Set(["add", "sub", "mul", "div", "neg", "where", "cast", "contiguous"]), bool: new Set(["logical_not", "cast", "contiguous"]) };
var TWO_ULP = 0.00000024;
var SUBNORMAL = 2 ** -148;
var SOURCE = "src/backends/native/rows.ts (double lanes, one rounding; exp_neg's Taylor remainder < 1e-11; Higham §4.2 sums)";
var SOFTMAX_CONTRACT = { kind: "bound", atol: SUBNORMAL, rtol: TWO_ULP, source: SOURCE };
var RMS_NORM_CONTRACT = { kind: "bound", atol: SUBNORMAL, rtol: TWO_ULP, source: SOURCE };
var SOFTMAX_X_CONTRACT = {
  kind: "bound",
  atol: 2 ** -125,
  rtol: 0.0000005,
  source: "src/backends/native/rows.ts (float32 exp: TwoSum argument, Cody–Waite, degree-7 Taylor in Horner fmas, E ≤ 1.5e-7; double sum; two float roundings)"
};
var RANK_X = 5;
var LAYER_NORM_CONTRACT = { kind: "bound", atol: 0.00000001, rtol: TWO_ULP, source: SOURCE };
function simplePrologue(p, inputs) {
  if (p.code.length > MAX_PROLOGUE || p.code[p.out].dtype !== "float32")
    return false;
  return p.code.every((c) => {
    if (c.k === "acc")
      return false;
    if (c.k === "load")
      return (c.dtype === "float32" || c.dtype === "bool") && inputs[c.input]?.dtype === c.dtype;
    return (c.dtype === "float32" || c.dtype === "bool") && PROLOGUE_OPS[c.dtype].has(c.op.name);
  });
}
function rowsContiguous(x, dims) {
  let inner = 1;
  for (let d = x.shape.length - 1;d >= x.shape.length - dims; d--) {
    if (x.shape[d] !== 1 && x.strides[d] !== inner)
      return false;
    inner *= x.shape[d];
  }
  return true;
}
function softmax(b, fast) {
  return {
    id: fast ? "native.fused_softmax.f32x" : "native.fused_softmax.f32",
    op: "fused_softmax",
    contract: fast ? SOFTMAX_X_CONTRACT : SOFTMAX_CONTRACT,
    rank: fast ? RANK_X : RANK2,
    doc: fast ? "float32 rows over the last dim, simple prologue (scale, mask), float32-lane exp (16 per vector), double sum, rtol 5e-7" : "float32 rows over the last dim, simple prologue (scale, mask), double lanes and exp, one rounding",
    applies: (a) => {
      const at = a.attrs;
      const nd = at.prologue.shape.length;
      if (a.dtype !== "float32" || nd === 0 || !b.fits(a.op, a.inputs, a.shape))
        return false;
      if (normalizeDim("softmax", at.dim, nd) !== nd - 1 || at.prologue.shape[nd - 1] > MAX_SOFTMAX_ROW)
        return false;
      return simplePrologue(at.prologue, a.inputs);
    },
    prepare: (a) => b.instruction(fast ? "fused_softmax_f32x" : "fused_softmax_f32", encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes))
  };
}
function norm(b, op) {
  const rms = op === "fused_rms_norm";
  return {
    id: `native.${op}.f32`,
    op,
    contract: rms ? RMS_NORM_CONTRACT : LAYER_NORM_CONTRACT,
    rank: RANK2,
    doc: `float32 rows (normalized dims contiguous, weight/bias contiguous), sums and scaling in double, one rounding${rms ? "" : `; rows up to ${MAX_LN_ROW}`}`,
    applies: (a) => {
      const at = a.attrs;
      const x = a.inputs[0];
      if (a.dtype !== "float32" || x.dtype !== "float32" || !b.fits(a.op, a.inputs, a.shape) || at.dims < 1 || at.dims > x.shape.length)
        return false;
      const n = numel(x.shape.slice(x.shape.length - at.dims));
      if (n > (rms ? MAX_ROW : MAX_LN_ROW) || !rowsContiguous(x, at.dims))
        return false;
      const affine = a.inputs.slice(rms ? 3 : 5);
      return affine.every((t) => t.dtype === "float32" && isContiguous(t.shape, t.strides));
    },
    prepare: (a) => b.instruction(`${op}_f32`, encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes))
  };
}
function rowImplementations(b) {
  const out = [];
  if (b.lib.opcodes.has("fused_softmax_f32"))
    out.push(softmax(b, false));
  if (b.lib.opcodes.has("fused_softmax_f32x"))
    out.push(softmax(b, true));
  if (b.lib.opcodes.has("fused_rms_norm_f32"))
    out.push(norm(b, "fused_rms_norm"));
  if (b.lib.opcodes.has("fused_layer_norm_f32"))
    out.push(norm(b, "fused_layer_norm"));
  return out;
}

// loom-node-stub:node:crypto
var no4 = (n) => () => {
  throw new Error(`${n}: node:crypto is not available in a browser (Loom reads files only under Bun, Deno or Node)`);
};
var getRandomValues = no4("crypto.getRandomValues");
var constants3 = no4("crypto.constants");
var KeyObject = no4("crypto.KeyObject");
var generateKey = no4("crypto.generateKey");
var generateKeySync = no4("crypto.generateKeySync");
var generateKeyPair = no4("crypto.generateKeyPair");
var generateKeyPairSync = no4("crypto.generateKeyPairSync");
var createSecretKey = no4("crypto.createSecretKey");
var createPublicKey = no4("crypto.createPublicKey");
var createPrivateKey = no4("crypto.createPrivateKey");
var hash = no4("crypto.hash");
var pbkdf2 = no4("crypto.pbkdf2");
var pbkdf2Sync = no4("crypto.pbkdf2Sync");
var hkdf = no4("crypto.hkdf");
var hkdfSync = no4("crypto.hkdfSync");
var getCurves = no4("crypto.getCurves");
var getCipherInfo = no4("crypto.getCipherInfo");
var timingSafeEqual = no4("crypto.timingSafeEqual");
var webcrypto = no4("crypto.webcrypto");
var subtle = no4("crypto.subtle");
var X509Certificate = no4("crypto.X509Certificate");
var Certificate = no4("crypto.Certificate");
var Sign = no4("crypto.Sign");
var sign2 = no4("crypto.sign");
var createSign = no4("crypto.createSign");
var Verify = no4("crypto.Verify");
var verify = no4("crypto.verify");
var createVerify = no4("crypto.createVerify");
var Hash = no4("crypto.Hash");
var createHash = no4("crypto.createHash");
var Hmac = no4("crypto.Hmac");
var createHmac = no4("crypto.createHmac");
var getHashes = no4("crypto.getHashes");
var randomInt = no4("crypto.randomInt");
var randomFill = no4("crypto.randomFill");
var randomFillSync = no4("crypto.randomFillSync");
var randomBytes = no4("crypto.randomBytes");
var randomUUID = no4("crypto.randomUUID");
var randomUUIDv7 = no4("crypto.randomUUIDv7");
var argon2 = no4("crypto.argon2");
var argon2Sync = no4("crypto.argon2Sync");
var checkPrime = no4("crypto.checkPrime");
var checkPrimeSync = no4("crypto.checkPrimeSync");
var generatePrime = no4("crypto.generatePrime");
var generatePrimeSync = no4("crypto.generatePrimeSync");
var secureHeapUsed = no4("crypto.secureHeapUsed");
var setEngine = no4("crypto.setEngine");
var getFips = no4("crypto.getFips");
var setFips = no4("crypto.setFips");
var DiffieHellmanGroup = no4("crypto.DiffieHellmanGroup");
var createDiffieHellmanGroup = no4("crypto.createDiffieHellmanGroup");
var getDiffieHellman = no4("crypto.getDiffieHellman");
var createDiffieHellman = no4("crypto.createDiffieHellman");
var DiffieHellman = no4("crypto.DiffieHellman");
var diffieHellman = no4("crypto.diffieHellman");
var ECDH = no4("crypto.ECDH");
var createECDH = no4("crypto.createECDH");
var Cipheriv = no4("crypto.Cipheriv");
var Decipheriv = no4("crypto.Decipheriv");
var createCipheriv = no4("crypto.createCipheriv");
var createDecipheriv = no4("crypto.createDecipheriv");
var getCiphers = no4("crypto.getCiphers");
var scrypt = no4("crypto.scrypt");
var scryptSync = no4("crypto.scryptSync");
var publicEncrypt = no4("crypto.publicEncrypt");
var publicDecrypt = no4("crypto.publicDecrypt");
var privateEncrypt = no4("crypto.privateEncrypt");
var privateDecrypt = no4("crypto.privateDecrypt");

// src/runtime/process.ts
function spawnSync(argv, opts = {}) {
  const io = opts.output ?? "pipe";
  const failed = (why) => ({ success: false, exitCode: -1, stdout: "", stderr: why });
  try {
    if (RUNTIME === "bun") {
      const r = Bun.spawnSync([...argv], { stdout: io, stderr: io });
      return { success: r.success, exitCode: r.exitCode ?? -1, stdout: r.stdout?.toString() ?? "", stderr: r.stderr?.toString() ?? "" };
    }
    if (RUNTIME === "deno") {
      const Command = globalThis.Deno.Command;
      const mode = io === "pipe" ? "piped" : "null";
      const r = new Command(argv[0], { args: argv.slice(1), stdout: mode, stderr: mode }).outputSync();
      const dec = new TextDecoder;
      return { success: r.success, exitCode: r.code, stdout: io === "pipe" ? dec.decode(r.stdout) : "", stderr: io === "pipe" ? dec.decode(r.stderr) : "" };
    }
    return failed(`cannot run '${argv[0]}': ${RUNTIME === "browser" ? "a browser has no processes" : "spawnSync needs Bun or Deno"}`);
  } catch (e) {
    return failed(`cannot run '${argv[0]}': ${e.message}`);
  }
}

// src/runtime/files.ts
function mmapFile(path) {
  if (RUNTIME !== "bun")
    return null;
  try {
    return Bun.mmap(path, { shared: false });
  } catch {
    return null;
  }
}
function moduleDir(meta) {
  const m = meta;
  return m.dir ?? m.dirname ?? "";
}

// src/backends/native/optable.ts
function registryOpcodes(all = Object.values(OPS), fused = Object.values(FUSED_OPS)) {
  const ew = all.filter((o) => o.kind === "elementwise");
  const firstMulti = ew.findIndex((o) => o.arity > 1);
  const late = ew.slice(firstMulti).find((o) => o.arity === 1);
  if (firstMulti >= 0 && late) {
    throw new Error(`native op table: unary elementwise op '${late.name}' follows a binary one in OPS; the interpreter numbers unary ops first`);
  }
  const kernels = [...all.filter((o) => o.kind !== "elementwise" && o.kind !== "view"), ...fused];
  return { elementwise: ew.map((o) => o.name), kernels: kernels.map((o) => o.name) };
}
function opTableHeader() {
  const { elementwise, kernels } = registryOpcodes();
  const x = (names) => names.map((n) => `X(${n})`).join(" ");
  return [
    "/* Generated from src/graph/registry.ts by src/backends/native/optable.ts at build time: do not edit. */",
    "#pragma once",
    `#define LOOM_REGISTRY_EW_OPS(X) ${x(elementwise)}`,
    `#define LOOM_REGISTRY_KERNEL_OPS(X) ${x(kernels)}`,
    ""
  ].join(`
`);
}

// src/backends/native/build.ts
var NATIVE_DIR = (() => {
  const here = moduleDir(import.meta);
  if (!here)
    return "";
  for (const up of ["../../../native", "../native"])
    if (existsSync(join(resolve2(here, up), "shim.c")))
      return resolve2(here, up);
  return resolve2(here, "../../../native");
})();
var BUILD_DIR = NATIVE_DIR && join(NATIVE_DIR, "build");
var CFLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fPIC", "-pthread", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd", "-Wall"];
var GEN_DIR = BUILD_DIR && join(BUILD_DIR, "gen");
function writeOpTable() {
  const path = join(GEN_DIR, "ops.gen.h");
  const text = opTableHeader();
  if (existsSync(path) && readFileSync(path, "utf8") === text)
    return path;
  mkdirSync(GEN_DIR, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
  return path;
}
function sources() {
  const k = join(NATIVE_DIR, "kernels");
  return [join(NATIVE_DIR, "shim.c"), ...readdirSync(k).filter((f) => f.endsWith(".c") || f.endsWith(".h")).sort().map((f) => join(k, f)), writeOpTable()];
}
function compiler() {
  return process.env.CC || "cc";
}
function buildHash(files) {
  const h = createHash("sha256");
  for (const f of files)
    h.update(f.slice(NATIVE_DIR.length)).update(readFileSync(f));
  h.update(CFLAGS.join(" ")).update(compiler()).update(cpus()[0]?.model ?? "").update(process.arch);
  return h.digest("hex").slice(0, 16);
}
function buildNative(opts = {}) {
  if (!NATIVE_DIR || !existsSync(join(NATIVE_DIR, "shim.c")))
    return { ok: false, reason: `native sources not found in ${NATIVE_DIR}` };
  const files = sources();
  const lib = join(BUILD_DIR, `libloom-${buildHash(files)}.so`);
  if (existsSync(lib))
    return { ok: true, path: lib, cached: true };
  const cc = compiler();
  const probe = spawnSync([cc, "--version"], { output: "ignore" });
  if (!probe.success) {
    return { ok: false, reason: `no C compiler ('${cc}' not found; install gcc or set CC) — Loom uses its js backend` };
  }
  mkdirSync(BUILD_DIR, { recursive: true });
  const tmp = join(BUILD_DIR, `tmp-${process.pid}-${Date.now()}`);
  mkdirSync(tmp, { recursive: true });
  if (!opts.quiet)
    console.error(`[loom] building the native backend (${cc} ${CFLAGS.join(" ")})...`);
  const cfiles = files.filter((f) => f.endsWith(".c"));
  const q = (s) => `'${s.replace(/'/g, "'\\''")}'`;
  const objs = cfiles.map((f, i) => join(tmp, `${i}.o`));
  const script = [
    ...cfiles.map((f, i) => `${q(cc)} ${CFLAGS.join(" ")} -I${q(GEN_DIR)} -c ${q(f)} -o ${q(objs[i])} &`),
    "wait",
    `${q(cc)} -shared -pthread -o ${q(join(tmp, "lib.so"))} ${objs.map(q).join(" ")} -lmvec -lm -ldl`
  ].join(`
`);
  const r = spawnSync(["sh", "-c", script]);
  if (!r.success || !existsSync(join(tmp, "lib.so"))) {
    const msg = r.stderr.trim().split(`
`).slice(0, 20).join(`
`);
    rmSync(tmp, { recursive: true, force: true });
    return { ok: false, reason: `native build failed (${cc}):
${msg}` };
  }
  renameSync(join(tmp, "lib.so"), lib);
  rmSync(tmp, { recursive: true, force: true });
  return { ok: true, path: lib, cached: false };
}

// src/backends/native/jit_codegen.ts
var TILE = 8192;
var CHUNK_ELEMENTS = 32768;
var MAX_JIT_CODE = 512;
var LOAD_TYPE = {
  float32: "float",
  float64: "double",
  int64: "double",
  int32: "int32_t",
  int8: "int8_t",
  uint8: "uint8_t",
  bool: "uint8_t"
};
var STORE_TYPE = { float32: "float", float64: "double" };
var TRANSCENDENTAL = new Set(["exp", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "erf", "pow"]);
var DISCONTINUOUS = new Set([
  "sign",
  "floor",
  "ceil",
  "round",
  "isnan",
  "logical_not",
  "floor_divide",
  "eq",
  "ne",
  "lt",
  "le",
  "gt",
  "ge",
  "logical_and",
  "logical_or"
]);
var BOOLEAN_VALUED = new Set(["isnan", "logical_not", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "cast", "where", "contiguous", "maximum", "minimum"]);
var NAN = '__builtin_nan("")';
var DOUBLE_FNS = new Set(["exp", "log", "log1p", "sin", "cos", "tanh", "erf"]);
var DOUBLE = { type: "double", f: "", fn: (n) => DOUBLE_FNS.has(n) ? n : null, pow: true };
function opExpr(name, P, bool, [a = "0", b = "0", c = "0"]) {
  const { type: T, f } = P, nan = `__builtin_nan${f}("")`, one = f ? "1.0f" : "1.0";
  const fn = P.fn(name);
  if (fn)
    return `${fn}(${a})`;
  switch (name) {
    case "neg":
      return `(-${a})`;
    case "abs":
      return `__builtin_fabs${f}(${a})`;
    case "sign":
      return `(${T})((${a} > 0) - (${a} < 0))`;
    case "sqrt":
      return `__builtin_sqrt${f}(${a})`;
    case "rsqrt":
      return `(${one} / __builtin_sqrt${f}(${a}))`;
    case "reciprocal":
      return `(${one} / ${a})`;
    case "sigmoid":
      return P.fn("exp") ? `(${one} / (${one} + ${P.fn("exp")}(-${a})))` : null;
    case "relu":
      return `((${a} > 0 || ${a} != ${a}) ? ${a} : 0.0${f})`;
    case "floor":
      return `__builtin_floor${f}(${a})`;
    case "ceil":
      return `__builtin_ceil${f}(${a})`;
    case "round":
      return `__builtin_rint${f}(${a})`;
    case "isnan":
      return `(${T})(${a} != ${a})`;
    case "logical_not":
      return `(${T})(${a} == 0)`;
    case "contiguous":
      return a;
    case "cast":
      return bool ? `(${T})(${a} != 0)` : a;
    case "add":
      return `(${a} + ${b})`;
    case "sub":
      return `(${a} - ${b})`;
    case "mul":
      return `(${a} * ${b})`;
    case "div":
      return `(${a} / ${b})`;
    case "floor_divide":
      return `__builtin_floor${f}(${a} / ${b})`;
    case "pow":
      return P.pow ? `((${b} != ${b} || ((${a} == 1.0 || ${a} == -1.0) && __builtin_isinf(${b}))) ? ${nan} : pow(${a}, ${b}))` : null;
    case "maximum":
      return `((${a} != ${a} || ${b} != ${b}) ? ${nan} : (${a} > ${b} ? ${a} : ${b}))`;
    case "minimum":
      return `((${a} != ${a} || ${b} != ${b}) ? ${nan} : (${a} < ${b} ? ${a} : ${b}))`;
    case "eq":
      return `(${T})(${a} == ${b})`;
    case "ne":
      return `(${T})(${a} != ${b})`;
    case "lt":
      return `(${T})(${a} < ${b})`;
    case "le":
      return `(${T})(${a} <= ${b})`;
    case "gt":
      return `(${T})(${a} > ${b})`;
    case "ge":
      return `(${T})(${a} >= ${b})`;
    case "logical_and":
      return `(${T})(${a} != 0 && ${b} != 0)`;
    case "logical_or":
      return `(${T})(${a} != 0 || ${b} != 0)`;
    case "where":
      return `((${a} != 0 && ${a} == ${a}) ? ${b} : ${c})`;
    default:
      return null;
  }
}
function unsupported(p, accOk) {
  if (p.code.length > MAX_JIT_CODE)
    return `program of ${p.code.length} codes`;
  if (p.shape.length > 16)
    return "more than 16 dims";
  const tainted = [];
  for (let i = 0;i < p.code.length; i++) {
    const c = p.code[i];
    tainted[i] = false;
    if (c.k === "load") {
      if (!LOAD_TYPE[c.dtype])
        return `load of ${c.dtype}`;
      continue;
    }
    if (c.k === "acc") {
      if (!accOk)
        return "acc outside an epilogue";
      if (c.dtype !== "float32" && c.dtype !== "float64")
        return `acc of ${c.dtype}`;
      continue;
    }
    const name = c.op.name;
    if (c.dtype !== "float32" && c.dtype !== "float64" && !(c.dtype === "bool" && BOOLEAN_VALUED.has(name)))
      return `${name} of ${c.dtype}`;
    if (opExpr(c.op.name, DOUBLE, c.dtype === "bool", ["x", "y", "z"]) === null)
      return `op ${name}`;
    const cond = name === "where" ? [c.args[0]] : c.args;
    const discontinuous = DISCONTINUOUS.has(name) || name === "where" || name === "cast" && c.dtype === "bool";
    if (discontinuous && cond.some((a) => tainted[a]))
      return `${name} of a transcendental result`;
    tainted[i] = TRANSCENDENTAL.has(name) || c.args.some((a) => tainted[a]);
  }
  const d = p.code[p.out].dtype;
  if (!STORE_TYPE[d])
    return `result of ${d}`;
  return null;
}
function collapse2(shape, loads) {
  const keep = shape.map((_, d) => d).filter((d) => shape[d] !== 1);
  const dims = [];
  const st = loads.map(() => []);
  for (const d of keep) {
    const n = dims.length;
    const merge = n > 0 && loads.every((l, k) => st[k][n - 1] === l.strides[d] * shape[d]);
    if (merge) {
      dims[n - 1] *= shape[d];
      loads.forEach((l, k) => {
        st[k][n - 1] = l.strides[d];
      });
    } else {
      dims.push(shape[d]);
      loads.forEach((l, k) => st[k].push(l.strides[d]));
    }
  }
  return { dims, strides: new Map(loads.map((l, k) => [l.i, st[k]])) };
}
var loadsOf = (p) => p.code.flatMap((c, i) => c.k === "load" ? [{ i, strides: c.strides, c }] : []);
function body(p, leaf, lines, indent) {
  p.code.forEach((c, i) => {
    if (c.k !== "op") {
      lines.push(`${indent}const double t${i} = ${leaf(c, i)};`);
      return;
    }
    lines.push(`${indent}const double t${i} = ${opExpr(c.op.name, DOUBLE, c.dtype === "bool", c.args.map((a) => `t${a}`))};`);
  });
  return `t${p.out}`;
}
function unflatten(dims, flat, v, lines, indent) {
  if (dims.length === 0)
    return;
  if (dims.length === 1) {
    lines.push(`${indent}const int64_t ${v}0 = ${flat};`);
    return;
  }
  lines.push(`${indent}int64_t ${v}q = ${flat};`);
  for (let d = dims.length - 1;d > 0; d--)
    lines.push(`${indent}const int64_t ${v}${d} = ${v}q % ${dims[d]}; ${v}q /= ${dims[d]};`);
  lines.push(`${indent}const int64_t ${v}0 = ${v}q;`);
}
var ptrOf = (l) => `(const ${LOAD_TYPE[l.dtype]} *)P[${l.input + 1}]`;
var dot = (v, st) => st.map((s, d) => s === 0 ? "" : ` + ${v}${d} * ${s}`).join("");

class Params {
  values = [];
  lines = [];
  v(name, value) {
    this.lines.push(`  const int64_t ${name} = (int64_t)A[${this.values.length}];`);
    this.values.push(value);
    return name;
  }
  strides(prefix, st) {
    return st.map((x, d) => x === 0 ? 0 : this.v(`${prefix}_${d}`, x));
  }
  offset(name, x) {
    return this.v(name, x);
  }
}
var SIGNATURE = "void NAME(char *const *P, const double *A, int64_t begin, int64_t end) {";
function elementwiseHead(p, A) {
  const loads = loadsOf(p);
  const sp = collapse2(p.shape, loads);
  if (sp.dims.length === 0)
    sp.dims.push(1), sp.strides.forEach((s) => s.push(0));
  const nd = sp.dims.length, L = sp.dims[nd - 1], outer = sp.dims.slice(0, -1);
  const tile = Math.min(L, TILE), nb = Math.ceil(L / tile);
  const outT = STORE_TYPE[p.code[p.out].dtype];
  A.v("L", L), A.v("TL", tile), A.v("NB", nb);
  const outerN = outer.map((d, k) => A.v(`D${k}`, d));
  const lines = [];
  lines.push("    const int64_t r = t / NB, j0 = (t % NB) * TL, j1 = j0 + TL < L ? j0 + TL : L;");
  unflatten(outerN, "r", "i", lines, "    ");
  lines.push(`    ${outT} *out = (${outT} *)P[0] + r * L;`);
  const inner = new Map;
  for (const l of loads) {
    const st = sp.strides.get(l.i);
    const s = st[nd - 1];
    lines.push(`    const ${LOAD_TYPE[l.c.dtype]} *p${l.i} = ${ptrOf(l.c)} + (${A.offset(`o${l.i}`, l.c.offset)}${dot("i", A.strides(`s${l.i}`, st.slice(0, -1)))});`);
    if (s === 0)
      lines.push(`    const double h${l.i} = (double)p${l.i}[0];`);
    inner.set(l.i, s === 0 ? `h${l.i}` : s === 1 ? `(double)p${l.i}[j]` : `(double)p${l.i}[j * ${A.v(`S${l.i}`, s)}]`);
  }
  return { lines, inner, tile, tasks: numel(outer) * nb, outT };
}
function genElementwise(p) {
  const A = new Params;
  const h = elementwiseHead(p, A);
  const lines = [SIGNATURE, ...A.lines, "  for (int64_t t = begin; t < end; t++) {", ...h.lines];
  lines.push("#pragma omp simd", "    for (int64_t j = j0; j < j1; j++) {");
  const res = body(p, (_c, i) => h.inner.get(i), lines, "      ");
  lines.push(`      out[j] = (${h.outT})${res};`, "    }", "  }", "}");
  return { source: lines.join(`
`), params: A.values, tasks: h.tasks, grain: Math.max(1, Math.floor(CHUNK_ELEMENTS / h.tile)) };
}
function unsupportedReduce(a) {
  if (!["sum", "amax", "amin"].includes(a.reduce.name))
    return `reduction ${a.reduce.name}`;
  if (a.dtype !== "float32" && a.dtype !== "float64")
    return `accumulator of ${a.dtype}`;
  const why = unsupported(a.prologue, false) ?? (a.epilogue ? unsupported(a.epilogue, true) : null);
  if (why)
    return why;
  const r = reduceSpace(a);
  if (!r)
    return "a load strided along the innermost reduced dim (column reduction)";
  return null;
}
function reduceSpace(a) {
  const p = a.prologue, nd = p.shape.length;
  const dims = new Set(a.dim.map((d) => d < 0 ? d + nd : d));
  const keptD = p.shape.map((_, d) => d).filter((d) => !dims.has(d));
  const redD = [...dims].sort((x, y) => x - y);
  const loads = loadsOf(p);
  const pick = (ds) => loads.map((l) => ({ i: l.i, strides: ds.map((d) => l.strides[d]) }));
  const kept = collapse2(keptD.map((d) => p.shape[d]), pick(keptD));
  const red = collapse2(redD.map((d) => p.shape[d]), pick(redD));
  if (red.dims.length === 0)
    red.dims.push(1), red.strides.forEach((s) => s.push(0));
  const last = red.dims.length - 1;
  for (const s of red.strides.values())
    if (s[last] !== 0 && s[last] !== 1 && red.dims[last] > 1)
      return null;
  return { kept, red };
}
function reduceHead(a, A) {
  const { kept, red } = reduceSpace(a);
  const loads = loadsOf(a.prologue);
  const rn = red.dims.length, rOuter = red.dims.slice(0, -1);
  const keptN = kept.dims.map((d, k) => A.v(`K${k}`, d));
  A.v("LR", red.dims[rn - 1]), A.v("NRO", numel(rOuter)), A.v("NR", numel(red.dims));
  const rOuterN = rOuter.map((d, k) => A.v(`R${k}`, d));
  const perO = [], perRo = [];
  unflatten(keptN, "o", "k", perO, "    ");
  for (const l of loads)
    perO.push(`    const ${LOAD_TYPE[l.c.dtype]} *p${l.i} = ${ptrOf(l.c)} + (${A.offset(`o${l.i}`, l.c.offset)}${dot("k", A.strides(`ks${l.i}`, kept.strides.get(l.i)))});`);
  unflatten(rOuterN, "ro", "r", perRo, "      ");
  const inner = new Map;
  for (const l of loads) {
    const st = red.strides.get(l.i);
    perRo.push(`      const ${LOAD_TYPE[l.c.dtype]} *q${l.i} = p${l.i}${dot("r", A.strides(`rs${l.i}`, st.slice(0, -1)))};`);
    inner.set(l.i, st[rn - 1] === 0 ? `(double)q${l.i}[0]` : `(double)q${l.i}[j]`);
  }
  const epiIndex = [];
  const e = a.epilogue;
  if (e)
    unflatten(e.shape.map((d, k) => A.v(`E${k}`, d)), "o", "m", epiIndex, "    ");
  const epiLoad = (l, i) => `(double)(${ptrOf(l)})[${A.offset(`eo${i}`, l.offset)}${dot("m", A.strides(`es${i}`, l.strides))}]`;
  return { perO, perRo, inner, epiLoad, epiIndex, nOut: numel(kept.dims), n: numel(red.dims) };
}
function genReduce(a) {
  const A = new Params;
  const h = reduceHead(a, A);
  const p = a.prologue;
  const kind = a.reduce.name;
  const outD = a.epilogue ? a.epilogue.code[a.epilogue.out].dtype : a.dtype;
  const outT = STORE_TYPE[outD];
  const epi = [];
  if (a.epilogue) {
    epi.push(...h.epiIndex);
    const r = body(a.epilogue, (c, i) => c.k === "acc" ? "acc" : h.epiLoad(c, i), epi, "    ");
    epi.push(`    ((${outT} *)P[0])[o] = (${outT})${r};`);
  } else
    epi.push(`    ((${outT} *)P[0])[o] = (${outT})acc;`);
  const lines = [SIGNATURE, ...A.lines, "  for (int64_t o = begin; o < end; o++) {", ...h.perO];
  lines.push(`    double acc = ${kind === "sum" ? "0.0" : kind === "amax" ? "-__builtin_inf()" : "__builtin_inf()"};`, "    int nanf = 0;");
  lines.push("    for (int64_t ro = 0; ro < NRO; ro++) {", ...h.perRo);
  lines.push(kind === "sum" ? "#pragma omp simd reduction(+:acc)" : `#pragma omp simd reduction(${kind === "amax" ? "max" : "min"}:acc) reduction(|:nanf)`);
  lines.push("      for (int64_t j = 0; j < LR; j++) {");
  const v = body(p, (_c, i) => h.inner.get(i), lines, "        ");
  if (kind === "sum")
    lines.push(`        acc += ${v};`);
  else
    lines.push(`        acc = ${v} ${kind === "amax" ? ">" : "<"} acc ? ${v} : acc;`, `        nanf |= ${v} != ${v};`);
  lines.push("      }", "    }");
  if (kind !== "sum")
    lines.push(`    if (nanf) acc = ${NAN};`);
  lines.push(...epi, "  }", "}");
  return { source: lines.join(`
`), params: A.values, tasks: h.nOut, grain: Math.max(1, Math.ceil(CHUNK_ELEMENTS / Math.max(1, h.n))) };
}

// src/backends/native/jit_fast.ts
var FAST_ATOL = "9.5e-6f";
var FAST_RTOL = "1e-6f";
var FLOAT_FN = { exp: "expf", log: "logf", log1p: "log1pf", sin: "sinf", cos: "cosf", tanh: "tanhf", erf: "loom_erff" };
var ERF_ABS_BOUND = 0.0000002;
var ERF_F32_C = `static inline __attribute__((always_inline)) float loom_erff(float x) {
  const float v = __builtin_fmaf(x * x, 0x1.0a8e3cp-3f, -1.0f); /* x² mapped to [−1, 1] for |x| ≤ 3.92 */
  float p = -0x1.968984p-11f;
  p = __builtin_fmaf(p, v, 0x1.0c248cp-9f); p = __builtin_fmaf(p, v, -0x1.a855a2p-10f);
  p = __builtin_fmaf(p, v, 0x1.11901ep-9f); p = __builtin_fmaf(p, v, -0x1.e3206ap-8f);
  p = __builtin_fmaf(p, v, 0x1.cae994p-7f); p = __builtin_fmaf(p, v, -0x1.4aa2f2p-6f);
  p = __builtin_fmaf(p, v, 0x1.e895a4p-6f); p = __builtin_fmaf(p, v, -0x1.63534ap-5f);
  p = __builtin_fmaf(p, v, 0x1.de12a4p-5f); p = __builtin_fmaf(p, v, -0x1.2f3a42p-4f);
  p = __builtin_fmaf(p, v, 0x1.731b68p-4f); p = __builtin_fmaf(p, v, -0x1.bf31f4p-4f);
  p = __builtin_fmaf(p, v, 0x1.129ac6p-3f); p = __builtin_fmaf(p, v, -0x1.70dcccp-3f);
  p = __builtin_fmaf(p, v, 0x1.7164fep-2f);
  /* x·p is odd; NaN: v, p and x·p are NaN (the comparison is false) */
  return __builtin_fabsf(x) >= 3.92f ? __builtin_copysignf(1.0f, x) : x * p;
}
`;
var FAST_PRELUDE = Object.values(FLOAT_FN).filter((f) => f !== "loom_erff").map((f) => `LOOM_SIMD float ${f}(float);`).join(`
`) + `
` + ERF_F32_C;
function unsupportedFast(p) {
  const why = unsupported(p, false);
  if (why)
    return why;
  if (p.code[p.out].dtype !== "float32")
    return "a float64 result (the double kernel is as fast and tighter)";
  const ops = p.code.flatMap((c) => c.k === "op" ? [c.op.name] : []);
  if (ops.includes("pow"))
    return "pow";
  if (!ops.some((o) => TRANSCENDENTAL.has(o)))
    return "no transcendental function (the double kernel is exact)";
  return null;
}
var abs2 = (x) => `__builtin_fabsf(${x})`;
var INF = "__builtin_inff()";
var RND = "0x1.0001p-24f";
var FLOAT = { type: "float", f: "f", fn: (n) => FLOAT_FN[n] ?? null, pow: false };
function fastBody(p, leaf, lines, ind, leafErr = () => null) {
  const err = [];
  p.code.forEach((c, i) => {
    const t = `t${i}`;
    if (c.k !== "op") {
      lines.push(`${ind}const float ${t} = (float)${leaf(i)};`);
      const exact = c.k === "load" && ["float32", "int8", "uint8", "bool"].includes(c.dtype);
      const extra = leafErr(i);
      err[i] = exact && !extra ? null : `e${i}`;
      if (err[i])
        lines.push(`${ind}const float e${i} = ${[extra, exact ? null : `${abs2(t)} * ${RND}`].filter(Boolean).join(" + ")};`);
      return;
    }
    const name = c.op.name;
    const args = c.args.map((x) => `t${x}`);
    const [a = "0", b = "0", cc = "0"] = args;
    const [ea = null, eb = null, ec = null] = c.args.map((x) => err[x] ?? null);
    const A = ea ?? "0.0f", B = eb ?? "0.0f";
    const push = (e, value = opExpr(name, FLOAT, c.dtype === "bool", args)) => {
      lines.push(`${ind}const float ${t} = ${value};`);
      if (e)
        lines.push(`${ind}const float e${i} = ${e};`);
      err[i] = e ? `e${i}` : null;
    };
    const rnd = `${abs2(t)} * ${RND}`;
    const ulp4 = `${abs2(t)} * 0x1p-21f`;
    const sure = (x, e) => e ? `((${abs2(x)} > ${e} || ${e} == 0.0f) ? 0.0f : ${INF})` : null;
    switch (name) {
      case "neg":
      case "abs":
      case "relu":
      case "contiguous":
        return push(ea);
      case "cast":
        return push(c.dtype === "bool" ? sure(a, ea) : ea);
      case "add":
      case "sub":
        return push([ea, eb, rnd].filter(Boolean).join(" + "));
      case "mul":
        return push([ea && `${abs2(b)} * ${ea}`, eb && `${abs2(a)} * ${eb}`, ea && eb && `${ea} * ${eb}`, rnd].filter(Boolean).join(" + "));
      case "div":
        return push(`(${abs2(b)} > ${B} ? (${A} + ${abs2(t)} * ${B}) / (${abs2(b)} - ${B}) : ${INF}) + ${rnd}`);
      case "reciprocal":
        return push(`(${abs2(a)} > ${A} ? ${abs2(t)} * ${A} / (${abs2(a)} - ${A}) : ${INF}) + ${rnd}`);
      case "sqrt":
        return push(ea ? `(${a} >= ${ea} ? __builtin_fminf(__builtin_sqrtf(${ea}), ${ea} / ${t}) : ${INF}) + ${rnd}` : rnd);
      case "rsqrt": {
        lines.push(`${ind}const float q${i} = __builtin_sqrtf(${a});`, `${ind}const float eq${i} = ${ea ? `(${a} >= ${ea} ? __builtin_fminf(__builtin_sqrtf(${ea}), ${ea} / q${i}) : ${INF}) + ` : ""}q${i} * ${RND};`);
        return push(`(q${i} > eq${i} ? ${abs2(t)} * eq${i} / (q${i} - eq${i}) : ${INF}) + ${rnd}`);
      }
      case "maximum":
      case "minimum":
        return push(ea || eb ? `${A} + ${B}` : null);
      case "where": {
        const pick = ea || eb || ec ? `((${a} != 0 && ${a} == ${a}) ? ${B} : ${ec ?? "0.0f"})` : null;
        return push(ea ? `${sure(a, ea)} + ${pick ?? "0.0f"}` : pick);
      }
      case "sign":
      case "logical_not":
        return push(sure(a, ea));
      case "logical_and":
      case "logical_or":
        return push(ea || eb ? [sure(a, ea), sure(b, eb)].filter(Boolean).join(" + ") : null);
      case "isnan":
        return push(ea ? `(${ea} < ${INF} ? 0.0f : ${INF})` : null);
      case "eq":
      case "ne":
      case "lt":
      case "le":
      case "gt":
      case "ge":
        return push(ea || eb ? `((${abs2(`${a} - ${b}`)} * (1.0f - 0x1p-22f) > ${[ea, eb].filter(Boolean).join(" + ")}) ? 0.0f : ${INF})` : null);
      case "floor":
      case "ceil":
      case "round": {
        const f = name === "floor" ? "__builtin_floorf" : name === "ceil" ? "__builtin_ceilf" : "__builtin_rintf";
        return push(ea ? `(${f}(${a} - (${ea} + ${abs2(a)} * 0x1p-22f)) == ${f}(${a} + (${ea} + ${abs2(a)} * 0x1p-22f)) ? 0.0f : ${INF})` : null);
      }
      case "floor_divide": {
        lines.push(`${ind}const float q${i} = ${a} / ${b};`);
        lines.push(`${ind}const float eq${i} = (${abs2(b)} > ${B} ? (${A} + ${abs2(`q${i}`)} * ${B}) / (${abs2(b)} - ${B}) : ${INF}) + ${abs2(`q${i}`)} * ${RND};`);
        return push(`(__builtin_floorf(q${i} - (eq${i} + ${abs2(`q${i}`)} * 0x1p-22f)) == __builtin_floorf(q${i} + (eq${i} + ${abs2(`q${i}`)} * 0x1p-22f)) ? 0.0f : ${INF})`);
      }
      case "sigmoid": {
        lines.push(`${ind}const float s${i} = expf(-${a});`);
        lines.push(`${ind}const float es${i} = s${i} * (${A} < 1e-3f ? ${A} * 1.001f : ${INF}) + ${abs2(`s${i}`)} * 0x1p-21f;`);
        lines.push(`${ind}const float u${i} = 1.0f + s${i}, eu${i} = es${i} + u${i} * ${RND};`);
        return push(`(u${i} > eu${i} ? ${t} * eu${i} / (u${i} - eu${i}) : ${INF}) + ${rnd}`, `1.0f / u${i}`);
      }
      default: {
        const prop = {
          exp: `${t} * (${A} < 1e-3f ? ${A} * 1.001f : ${INF})`,
          log: `(${a} > ${A} ? ${A} / (${a} - ${A}) : ${INF})`,
          log1p: `(1.0f + ${a} > ${A} ? ${A} / (1.0f + ${a} - ${A}) : ${INF})`,
          sin: A,
          cos: A,
          tanh: A,
          erf: `1.1283792f * ${A}`
        };
        const own = name === "erf" ? `${ERF_ABS_BOUND.toExponential()}f` : ulp4;
        return push(ea ? `${prop[name]} + ${own}` : own);
      }
    }
  });
  return { v: `t${p.out}`, e: err[p.out] ?? null };
}
function genElementwiseFast(p) {
  const A = new Params;
  const h = elementwiseHead(p, A);
  const lines = [
    SIGNATURE,
    ...A.lines,
    `  float ob[${TILE}];`,
    `  unsigned char fl[${TILE}];`,
    `  const int alias = P[${MAX_INPUTS + 1}] != 0; /* out shares an input's buffer: stage the tile in ob */`,
    "  for (int64_t t = begin; t < end; t++) {",
    ...h.lines,
    "    float *dst = alias ? ob : out + j0;",
    "    int any = 0;",
    "#pragma omp simd reduction(|:any)",
    "    for (int64_t j = j0; j < j1; j++) {"
  ];
  const r = fastBody(p, (i) => h.inner.get(i), lines, "      ");
  lines.push(`      dst[j - j0] = ${r.v};`);
  lines.push(`      const int f = !(${r.e ?? "0.0f"} <= ${FAST_ATOL} + ${FAST_RTOL} * ${abs2(r.v)} && ${abs2(r.v)} <= 0x1.fffffep127f);`, "      fl[j - j0] = (unsigned char)f;", "      any |= f;", "    }");
  lines.push("    if (any) {", "      for (int64_t j = j0; j < j1; j++) {", "        if (!fl[j - j0]) continue;");
  const d = body(p, (_c, i) => h.inner.get(i), lines, "        ");
  lines.push(`        dst[j - j0] = (float)${d};`, "      }", "    }");
  lines.push("    if (alias) __builtin_memcpy(out + j0, ob, (size_t)(j1 - j0) * sizeof(float));", "  }", "}");
  return { source: lines.join(`
`), params: A.values, tasks: h.tasks, grain: Math.max(1, Math.floor(CHUNK_ELEMENTS / h.tile)) };
}
function unsupportedReduceFast(a) {
  const why = unsupportedReduce(a);
  if (why)
    return why;
  const e = a.epilogue;
  if ((e ? e.code[e.out].dtype : a.dtype) !== "float32")
    return "a float64 result";
  const ops = [a.prologue, ...e ? [e] : []].flatMap((p) => p.code.flatMap((c) => c.k === "op" ? [c.op.name] : []));
  if (ops.includes("pow"))
    return "pow";
  if (!a.prologue.code.some((c) => c.k === "op" && TRANSCENDENTAL.has(c.op.name)))
    return "no transcendental function in the prologue (the double kernel is as fast)";
  return null;
}
function genReduceFast(a) {
  const A = new Params;
  const h = reduceHead(a, A);
  const p = a.prologue;
  const kind = a.reduce.name;
  const epi = [];
  if (!a.epilogue) {
    epi.push(`    const float y = (float)acc;`, `    const float ey = (float)eacc + ${abs2("y")} * ${RND};`);
  } else {
    const ep = a.epilogue;
    epi.push(...h.epiIndex);
    const leaf = (i) => ep.code[i].k === "acc" ? "acc" : h.epiLoad(ep.code[i], i);
    const er = fastBody(ep, leaf, epi, "    ", (i) => ep.code[i].k === "acc" ? "(float)eacc" : null);
    epi.push(`    const float y = ${er.v};`, `    const float ey = ${er.e ?? "0.0f"};`);
  }
  const exact = genReduce(a);
  if (JSON.stringify(exact.params) !== JSON.stringify(A.values))
    throw new Error("[jit] internal: fast and double reduction kernels disagree on their parameters");
  const lines = [exact.source.replace("void NAME(", "static void NAME_d("), "", SIGNATURE, ...A.lines, "  for (int64_t o = begin; o < end; o++) {", ...h.perO];
  lines.push(`    double acc = ${kind === "sum" ? "0.0" : kind === "amax" ? "-__builtin_inf()" : "__builtin_inf()"}, eacc = 0.0, aacc = 0.0;`, "    int nanf = 0;");
  lines.push("    for (int64_t ro = 0; ro < NRO; ro++) {", ...h.perRo);
  lines.push(kind === "sum" ? "#pragma omp simd reduction(+:acc, eacc, aacc)" : `#pragma omp simd reduction(${kind === "amax" ? "max" : "min"}:acc) reduction(max:eacc) reduction(|:nanf)`);
  lines.push("      for (int64_t j = 0; j < LR; j++) {");
  const r = fastBody(p, (i) => h.inner.get(i), lines, "        ");
  const e = r.e ?? "0.0f";
  if (kind === "sum")
    lines.push(`        acc += (double)${r.v};`, `        eacc += (double)${e};`, `        aacc += (double)${abs2(r.v)};`);
  else {
    lines.push(`        acc = ${r.v} ${kind === "amax" ? ">" : "<"} acc ? (double)${r.v} : acc;`);
    lines.push(`        eacc = (double)${e} > eacc ? (double)${e} : eacc;`, `        nanf |= (${r.v} != ${r.v}) | (${e} != ${e});`);
  }
  lines.push("      }", "    }");
  if (kind === "sum")
    lines.push("    eacc += aacc * (double)(2 * NR) * 0x1p-53;");
  else
    lines.push(`    if (nanf) eacc = ${INF};`);
  lines.push(...epi);
  lines.push(`    if (ey <= ${FAST_ATOL} + ${FAST_RTOL} * ${abs2("y")} && ${abs2("y")} <= 0x1.fffffep127f) ((float *)P[0])[o] = y;`);
  lines.push("    else NAME_d(P, A, o, o + 1); /* not certified: the double kernel's value */", "  }", "}");
  return { source: lines.join(`
`), params: A.values, tasks: h.nOut, grain: Math.max(1, Math.ceil(CHUNK_ELEMENTS / Math.max(1, h.n))) };
}

// src/backends/native/jit.ts
var JIT_CONTRACT = {
  kind: "bound",
  atol: 0.000000001,
  rtol: 0.00000024,
  source: "double evaluation, +−·/ and sqrt as the float64 reference, glibc libmvec ≤ 4 ulp (double) for exp/log/log1p/sin/cos/tanh/erf/pow, one rounding to the output dtype"
};
var FAST_CONTRACT = {
  kind: "bound",
  atol: 0.00001,
  rtol: 0.0000013,
  source: "glibc libmvec float32 variants ≤ 4 ulp and Loom's erf (jit_fast.ts ERF_ABS_BOUND, measured), a per-element running error bound (≤ 9.5e-6 + 1e-6·|v|) or the double kernel's value"
};
var JIT_CFLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fopenmp-simd", "-w"];
var PRELUDE = [
  "#include <stddef.h>",
  "#include <stdint.h>",
  '#define LOOM_SIMD __attribute__((simd("notinbranch")))',
  ...["exp", "log", "log1p", "sin", "cos", "tanh", "erf"].map((f) => `LOOM_SIMD double ${f}(double);`),
  "LOOM_SIMD double pow(double, double);",
  FAST_PRELUDE
].join(`
`);
var jitStats = { compiles: 0, compileMs: 0, programs: 0, diskHits: 0, failures: 0 };
function compiler2() {
  return process.env.LOOM_JIT_CC || compiler();
}
function jitCacheDir() {
  return join(loomCacheDir(), "kernels");
}
var probes = new Map;
function haveCompiler() {
  const cc = compiler2();
  let ok = probes.get(cc);
  if (ok === undefined) {
    ok = ffi() !== null && spawnSync([cc, "--version"], { output: "ignore" }).success;
    probes.set(cc, ok);
    if (!ok)
      warnOnce(`no C compiler ('${cc} --version' failed; set CC or LOOM_JIT_CC)`);
  }
  return ok;
}
var warned = false;
function warnOnce(msg) {
  if (!warned)
    console.error(`[loom] generated kernels: ${msg} — the exact kernels run instead`);
  warned = true;
}
function jitEnabled() {
  return process.env.LOOM_JIT !== "0" && haveCompiler();
}
var entries = new Map;
var pending = [];
var libs = [];
function hashOf(text) {
  return createHash("sha256").update(PRELUDE).update(text).update(JIT_CFLAGS.join(" ")).update(compiler2()).update(cpus()[0]?.model ?? "").update(process.arch).digest("hex").slice(0, 20);
}
function load(path, es) {
  try {
    const spec = Object.fromEntries(es.map((e) => [e.name, { args: [], returns: "void" }]));
    const lib = ffi().dlopen(path, spec);
    libs.push(lib);
    for (const e of es) {
      const p = lib.address(e.name);
      if (!p)
        return false;
      e.slot[0] = Number(p);
      e.state = "ok";
    }
    return true;
  } catch {
    return false;
  }
}
function writeAtomic(path, data) {
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}
function entryFor(g) {
  const hash = hashOf(g.source);
  let e = entries.get(hash);
  if (e)
    return e;
  const name = `loom_jit_${hash}`;
  e = { hash, name, source: g.source.replaceAll("NAME", name), slot: new Float64Array(1), state: "pending" };
  entries.set(hash, e);
  const dir = jitCacheDir();
  const index = join(dir, `p-${hash}`);
  if (existsSync(index)) {
    const unit = join(dir, readFileSync(index, "utf8").trim());
    if (existsSync(unit) && load(unit, [e])) {
      jitStats.diskHits++;
      return e;
    }
  }
  pending.push(e);
  return e;
}
function compilePending() {
  const es = pending.filter((e) => e.state === "pending");
  pending = [];
  if (es.length === 0)
    return;
  const fail = (msg) => {
    for (const e of es)
      e.state = "failed";
    jitStats.failures++;
    warnOnce(msg);
  };
  const src = PRELUDE + es.map((e) => e.source).join(`

`) + `
`;
  const unitHash = hashOf(src);
  const dir = jitCacheDir();
  const so = join(dir, `u-${unitHash}.so`);
  try {
    mkdirSync(dir, { recursive: true });
    if (!existsSync(so)) {
      const t0 = performance.now();
      const tmp = `${so}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
      const cfile = `${tmp}.c`;
      writeFileSync(cfile, src);
      const cc = compiler2();
      const r = spawnSync([cc, ...JIT_CFLAGS, "-o", tmp, cfile, "-lmvec", "-lm"]);
      if (r.exitCode === -1) {
        rmSync(cfile, { force: true });
        return fail(`'${cc}' could not run (${r.stderr})`);
      }
      jitStats.compiles++;
      jitStats.compileMs += performance.now() - t0;
      if (!r.success || !existsSync(tmp)) {
        rmSync(tmp, { force: true });
        rmSync(cfile, { force: true });
        const msg = r.stderr.trim().split(`
`).slice(0, 5).join(`
`);
        return fail(`${cc} failed (exit ${r.exitCode})${msg ? `:
${msg}` : ""}`);
      }
      renameSync(cfile, so.replace(/\.so$/, ".c"));
      renameSync(tmp, so);
    }
    if (!load(so, es))
      return fail(`loading ${so} failed`);
    for (const e of es)
      writeAtomic(join(dir, `p-${e.hash}`), `u-${unitHash}.so
`);
    jitStats.programs += es.length;
  } catch (err) {
    fail(err.message);
  }
}
function jitKernel(b, a, g) {
  const e = entryFor(g);
  const exact = b.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype);
  const run = b.instruction("jit_call", [ffi().ptr(e.slot), g.tasks, g.grain, ...g.params]);
  return (ins, out) => {
    if (e.state === "pending")
      compilePending();
    if (e.state !== "ok" || !isContiguous(out.shape, out.strides))
      return exact(ins, out);
    run(ins, out);
  };
}
function minElements() {
  const v = Number(process.env.LOOM_JIT_MIN_ELEMENTS ?? 16384);
  return Number.isFinite(v) ? v : 16384;
}
var spaceOf = (a) => a.op.name === "fused_reduce" ? a.attrs.prologue.shape : a.shape;
var common = (b, a) => b.lib.opcodes.has("jit_call") && a.shape.length <= 16 && numel(a.shape) > 0 && numel(spaceOf(a)) >= minElements() && jitEnabled() && (a.dtype === "float32" || a.dtype === "float64") && a.inputs.length <= 64 && a.inputs.every((l) => l.shape.length <= 16);
function jitImplementations(b) {
  return [
    {
      id: "native.fused_elementwise.jit_f32",
      op: "fused_elementwise",
      contract: FAST_CONTRACT,
      rank: 40,
      doc: "generated C per program: float32 libmvec exp/log/tanh/erf/sin/cos, the rest in double, each element certified by a running error bound (else recomputed in double); float32 results with a transcendental, no pow",
      applies: (a) => common(b, a) && a.dtype === "float32" && unsupportedFast(a.attrs.program) === null,
      prepare: (a) => jitKernel(b, a, genElementwiseFast(a.attrs.program))
    },
    {
      id: "native.fused_elementwise.jit",
      op: "fused_elementwise",
      contract: JIT_CONTRACT,
      rank: 50,
      doc: "generated C per program, vectorized, evaluated in double and rounded once (float32/float64 results; no integer ops, no comparison of a transcendental result)",
      applies: (a) => common(b, a) && unsupported(a.attrs.program, false) === null,
      prepare: (a) => jitKernel(b, a, genElementwise(a.attrs.program))
    },
    {
      id: "native.fused_reduce.jit_f32",
      op: "fused_reduce",
      contract: FAST_CONTRACT,
      rank: 40,
      doc: "generated C per reduction: a float32 prologue with libmvec float32 functions and its error bound, folded in double lanes, each output certified (else recomputed in double); float32 results with a transcendental prologue",
      applies: (a) => common(b, a) && a.dtype === "float32" && unsupportedReduceFast(a.attrs) === null,
      prepare: (a) => jitKernel(b, a, genReduceFast(a.attrs))
    },
    {
      id: "native.fused_reduce.jit",
      op: "fused_reduce",
      contract: JIT_CONTRACT,
      rank: 50,
      doc: "generated C per reduction (sum/amax/amin folded in 8 double lanes, prologue and epilogue inline); not for column reductions",
      applies: (a) => common(b, a) && unsupportedReduce(a.attrs) === null,
      prepare: (a) => jitKernel(b, a, genReduce(a.attrs))
    }
  ];
}

// src/backends/native/jit_matmul.ts
function epilogueProgram(attrs, nin) {
  const p = attrs.epilogue;
  const strides = contiguousStrides(p.shape);
  const code = p.code.map((c) => c.k === "acc" ? { k: "load", input: nin, strides, offset: 0, dtype: c.dtype } : c);
  return { shape: p.shape, code, out: p.out };
}
function epilogueApplication(a) {
  const attrs = a.attrs;
  const product = { shape: a.shape, strides: contiguousStrides(a.shape), dtype: attrs.dtype };
  const program = epilogueProgram(attrs, a.inputs.length);
  return { op: FUSED_OPS.fused_elementwise, inputs: [...a.inputs, product], attrs: { program }, shape: a.shape, dtype: a.dtype };
}
function fits(b, a) {
  const attrs = a.attrs;
  return attrs.dtype === a.dtype && numel(attrs.shape) === numel(a.shape) && common(b, epilogueApplication(a));
}
function prepare(b, a, generate) {
  const attrs = a.attrs;
  const gemm = b.prepare(OPS.matmul, [a.inputs[0], a.inputs[1]], {}, attrs.shape, attrs.dtype);
  const ea = epilogueApplication(a);
  const epilogue = jitKernel(b, ea, generate(ea.attrs.program));
  const pstrides = contiguousStrides(attrs.shape), ostrides = contiguousStrides(a.shape);
  return (ins, out) => {
    gemm([ins[0], ins[1]], b.view(out, attrs.shape, pstrides, out.offset));
    epilogue([...ins, b.view(out, a.shape, ostrides, out.offset)], out);
  };
}
function jitMatmulImplementations(b) {
  const program = (a) => epilogueProgram(a.attrs, a.inputs.length);
  return [
    {
      id: "native.fused_matmul.jit_f32",
      op: "fused_matmul",
      contract: FAST_CONTRACT,
      rank: 40,
      doc: "the exact kernels' GEMM into the output, then the epilogue as a generated float32 elementwise kernel (running error bound, else double) in place",
      applies: (a) => fits(b, a) && a.dtype === "float32" && unsupportedFast(program(a)) === null,
      prepare: (a) => prepare(b, a, genElementwiseFast)
    },
    {
      id: "native.fused_matmul.jit",
      op: "fused_matmul",
      contract: JIT_CONTRACT,
      rank: 50,
      doc: "the exact kernels' GEMM into the output, then the epilogue as a generated elementwise kernel evaluated in double, in place",
      applies: (a) => fits(b, a) && unsupported(program(a), false) === null,
      prepare: (a) => prepare(b, a, genElementwise)
    }
  ];
}

// src/backends/native/catalog.ts
var EXACT_RANK = 100;
function exact(b, op) {
  return {
    id: `native.${op}.exact`,
    op,
    contract: { kind: "exact" },
    rank: EXACT_RANK,
    doc: "the shim's exact kernel (each intermediate rounded as the unfused ops store it; js fallback where the shim lacks the op)",
    applies: () => true,
    prepare: (a) => b.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype)
  };
}
function nativeCatalog(b) {
  const m = new Map;
  for (const name of [...Object.keys(OPS), ...Object.keys(FUSED_OPS)])
    m.set(name, [exact(b, name)]);
  const add = (impls) => {
    for (const i of impls)
      m.get(i.op).push(i);
  };
  add(rowImplementations(b));
  add(jitImplementations(b));
  add(jitMatmulImplementations(b));
  return m;
}

// src/backends/native/ffi.ts
var SYMBOLS = {
  loom_abi_version: { args: [], returns: "i32" },
  loom_op_names: { args: [], returns: "ptr" },
  loom_init: { args: ["i32"], returns: "i32" },
  loom_exec: { args: ["ptr", "f64"], returns: "i32" },
  loom_error: { args: [], returns: "ptr" },
  loom_submit: { args: ["ptr", "f64", "ptr", "i32"], returns: "ptr" },
  loom_done: { args: ["ptr"], returns: "i32" },
  loom_wait: { args: ["ptr"], returns: "i32" },
  loom_cmd_error: { args: ["ptr"], returns: "ptr" },
  loom_release: { args: ["ptr"], returns: "void" },
  loom_counters: { args: ["ptr"], returns: "void" },
  loom_profile_buffer: { args: ["ptr", "f64"], returns: "void" },
  loom_blas_available: { args: [], returns: "i32" },
  loom_blas_name: { args: [], returns: "ptr" },
  loom_alloc: { args: ["f64"], returns: "ptr" },
  loom_free_fn: { args: [], returns: "ptr" },
  loom_pool_stats: { args: ["ptr"], returns: "void" }
};
var ABI_VERSION = 2;
function cstr(p) {
  return ffi().cstring(p);
}
var cached;
function loadNative() {
  if (cached)
    return cached;
  const f = ffi();
  if (!f)
    return cached = { error: ffiUnavailableReason() };
  const b = buildNative({ quiet: true });
  if (!b.ok)
    return cached = { error: b.reason };
  try {
    const lib = f.dlopen(b.path, SYMBOLS);
    const sym = lib.symbols;
    if (sym.loom_abi_version() !== ABI_VERSION)
      return cached = { error: `native ABI ${sym.loom_abi_version()} != ${ABI_VERSION}` };
    const names = cstr(sym.loom_op_names()).split(",").slice(0, -1);
    const threads = sym.loom_init(Number(process.env.LOOM_NATIVE_THREADS ?? 0));
    const opcodes = new Map;
    names.forEach((n, i) => {
      if (n)
        opcodes.set(n, i);
    });
    return cached = { sym, path: b.path, opcodes, opEnd: names.length, threads };
  } catch (e) {
    return cached = { error: `loading ${b.path} failed: ${e.message}` };
  }
}

// src/runtime/sync.ts
function gc() {
  if (RUNTIME === "bun") {
    Bun.gc(true);
    return true;
  }
  const f = globalThis.gc;
  if (typeof f !== "function")
    return false;
  f();
  return true;
}
var sleeper = typeof SharedArrayBuffer !== "undefined" ? new Int32Array(new SharedArrayBuffer(4)) : null;
function waitSync(p, pump, what = "a GPU result") {
  if (RUNTIME !== "bun") {
    p.catch(() => {});
    throw new LoomValueError(`waiting synchronously for ${what} needs Bun; on ${RUNTIME} use the async API (await loom.init_webgpu(), await tensor.data())`);
  }
  let spins = 0;
  while (Bun.peek.status(p) === "pending") {
    pump();
    if (++spins > 64)
      Bun.sleepSync(0.02);
  }
  const v = Bun.peek(p);
  if (Bun.peek.status(p) === "rejected") {
    p.catch(() => {});
    throw v;
  }
  return v;
}

// src/backends/native/memory.ts
var POOL_MIN_BYTES = 16384;
var GC_MIN_BYTES = 64 * 2 ** 20;
var CTORS = {
  float32: Float32Array,
  float64: Float64Array,
  int64: Float64Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int32: Int32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array
};
var ADOPTS = ffi()?.name === "bun:ffi";

class HostMemory {
  lib;
  freeFn;
  constructor(lib) {
    this.lib = lib;
    this.freeFn = lib.sym.loom_free_fn() ?? 0;
  }
  array(dtype, n) {
    const bytes = n * itemsize[dtype];
    if (bytes < POOL_MIN_BYTES)
      return allocArray(dtype, n);
    if (!ADOPTS)
      return allocArray(dtype, n);
    const p = this.lib.sym.loom_alloc(bytes);
    if (!p)
      return allocArray(dtype, n);
    this.pressure(bytes);
    const ab = ffi().adopt(p, bytes, this.freeFn);
    return new CTORS[dtype](ab, 0, n);
  }
  alloc(dtype, shape) {
    const nd = shape.length;
    const strides = new Array(nd);
    let n = 1;
    for (let i = nd - 1;i >= 0; i--) {
      strides[i] = n;
      n *= shape[i];
    }
    return { dtype, shape: shape.slice(), strides, offset: 0, data: this.array(dtype, n) };
  }
  sinceGc = 0;
  budget = GC_MIN_BYTES;
  pressure(bytes) {
    this.sinceGc += bytes;
    if (this.sinceGc < this.budget)
      return;
    this.sinceGc = 0;
    gc();
    this.budget = Math.max(GC_MIN_BYTES, this.stats().live);
  }
  stats() {
    const s = new Float64Array(4);
    this.lib.sym.loom_pool_stats(s);
    return { live: s[0], cached: s[1], hits: s[2], misses: s[3] };
  }
}
var PENDING = Symbol("loom.native.pending");
function pendingData(dtype, shape, strides, offset, raw, state) {
  const t = { dtype, shape, strides, offset };
  Object.defineProperty(t, RAW, { value: raw, enumerable: false });
  Object.defineProperty(t, PENDING, { value: state, enumerable: false });
  Object.defineProperty(t, "data", {
    enumerable: true,
    configurable: true,
    get() {
      state.wait();
      Object.defineProperty(t, "data", { value: raw, enumerable: true, configurable: true, writable: false });
      return raw;
    }
  });
  return t;
}
function pendingOf(t) {
  const s = t[PENDING];
  if (!s)
    return;
  return Object.getOwnPropertyDescriptor(t, "data")?.get ? s : undefined;
}

// src/backends/native/backend.ts
var MAX_IN_FLIGHT = 8;
var SYNC_MAX_WORK = 1 << 16;
var NO_ATTRS = [];
function nativeError(msg) {
  if (msg.startsWith("[one_hot] class values"))
    return new LoomValueError(msg);
  if (/out of bounds|non-zero size/.test(msg))
    return new LoomIndexError(msg);
  if (/ZeroDivisionError|negative integer powers|cannot convert|cannot be stored in a/.test(msg))
    return new LoomValueError(msg);
  return new Error(`[native] ${msg}`);
}

class NativeSubmission {
  lib;
  handle;
  prog;
  onFinish;
  finished = false;
  error = null;
  promise = null;
  constructor(lib, handle, prog, onFinish = () => {}) {
    this.lib = lib;
    this.handle = handle;
    this.prog = prog;
    this.onFinish = onFinish;
    if (!handle)
      this.finish(-1, "");
  }
  get done() {
    if (!this.promise) {
      this.promise = new Promise((res, rej) => {
        const poll = (delay) => {
          if (!this.finished && this.lib.sym.loom_done(this.handle) === 1)
            this.collect();
          if (this.finished) {
            if (this.error)
              rej(this.error);
            else
              res();
            return;
          }
          setTimeout(() => poll(Math.min(4, delay + 0.25)), delay);
        };
        poll(0);
      });
      this.promise.catch(() => {});
    }
    return this.promise;
  }
  get isDone() {
    return this.finished || this.handle !== null && this.lib.sym.loom_done(this.handle) === 1;
  }
  collect() {
    const h = this.handle;
    const failed = this.lib.sym.loom_wait(h);
    const msg = failed >= 0 ? cstr(this.lib.sym.loom_cmd_error(h)) : "";
    this.lib.sym.loom_release(h);
    this.handle = null;
    this.finish(failed, msg);
  }
  finish(failed, msg) {
    this.finished = true;
    if (this.prog)
      this.onFinish(this.prog);
    this.prog = null;
    if (failed >= 0)
      this.error = nativeError(msg);
  }
  wait() {
    if (!this.finished)
      this.collect();
    if (this.error)
      throw this.error;
  }
}

class Batch {
  writer;
  backend;
  sync;
  open = true;
  subs = [];
  constructor(writer, backend, sync) {
    this.writer = writer;
    this.backend = backend;
    this.sync = sync;
  }
  wait() {
    if (this.open)
      this.backend.flush();
    for (const s of this.subs)
      s.wait();
  }
  done() {
    if (this.open)
      this.backend.flush();
    return Promise.all(this.subs.map((s) => s.done)).then(() => {});
  }
}

class NativeBackend {
  lib;
  name = "native";
  memory;
  counts;
  other = new Map;
  stats;
  eager = new ProgramWriter(256);
  batch = null;
  inflight = [];
  writers = [];
  fusedOps;
  constructor(lib) {
    this.lib = lib;
    this.memory = new HostMemory(lib);
    this.counts = new Float64Array(lib.opEnd);
    const names = [];
    for (const [n, c] of lib.opcodes)
      names[c] = n;
    const counts = this.counts, other = this.other;
    this.stats = {
      ops: 0,
      execs: 0,
      submits: 0,
      syncs: 0,
      fallbacks: 0,
      get byOp() {
        const m = new Map(other);
        counts.forEach((c, i) => {
          if (c)
            m.set(names[i], (m.get(names[i]) ?? 0) + c);
        });
        return m;
      }
    };
    this.fusedOps = Object.keys(FUSED_OPS).filter((n) => lib.opcodes.has(n));
  }
  catalog = null;
  implementations(op) {
    return (this.catalog ??= nativeCatalog(this)).get(op) ?? [];
  }
  supports(op) {
    return op.kind === "view" || this.lib.opcodes.has(op.name);
  }
  fits(op, inputs, shape) {
    if (shape.length > MAX_DIMS || inputs.length > MAX_INPUTS || numel(shape) === 0)
      return false;
    const ew = op.kind === "elementwise";
    for (let k = 0;k < inputs.length; k++) {
      const s = inputs[k].shape;
      if (s.length > MAX_DIMS || !ew && numel(s) === 0)
        return false;
    }
    return true;
  }
  countOther(name) {
    this.stats.ops++;
    this.other.set(name, (this.other.get(name) ?? 0) + 1);
  }
  run(op, inputs, attrs, shape, dtype) {
    if (op.kind === "view") {
      this.countOther(op.name);
      const v = op.ref(inputs[0], attrs) ?? op.ref(this.contiguous(inputs[0]), attrs);
      if (!v)
        throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const code = this.lib.opcodes.get(op.name);
    if (code === undefined || !this.fits(op, inputs, shape)) {
      this.stats.fallbacks++;
      return jsBackend.run(op, inputs, attrs, shape, dtype);
    }
    if (this.batch !== null)
      this.flush();
    const out = this.memory.alloc(dtype, shape);
    const w = this.eager;
    w.n = 0;
    w.count = 0;
    w.instr(code, op.kind === "elementwise" ? NO_ATTRS : encodeAttrs(op, attrs, inputs, this.lib.opcodes), out, inputs);
    this.counts[code]++;
    this.stats.ops++;
    this.stats.execs++;
    if (this.lib.sym.loom_exec(w.bufAddr, w.n) >= 0)
      throw nativeError(cstr(this.lib.sym.loom_error()));
    return out;
  }
  contiguous(x) {
    if (numel(x.shape) === 0 || x.shape.length > MAX_DIMS)
      return toContiguous(x);
    return this.run(OPS.contiguous, [x], {}, x.shape, x.dtype);
  }
  prepare(op, inputs, attrs, shape, dtype) {
    if (op.kind === "view")
      throw new Error(`[${op.name}] views are resolved by the plan, not run`);
    const code = this.lib.opcodes.get(op.name);
    let words = null;
    if (code !== undefined && this.fits(op, inputs, shape)) {
      try {
        words = encodeAttrs(op, attrs, inputs, this.lib.opcodes);
      } catch {
        words = null;
      }
    }
    if (code === undefined || words === null) {
      const js = jsBackend.prepare(op, inputs, attrs, shape, dtype);
      const raw = (t) => ({ dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, data: rawData(t) });
      return (ins, out) => {
        this.drain();
        this.stats.fallbacks++;
        js(ins.map(raw), raw(out));
      };
    }
    const w = words;
    return (ins, out) => {
      this.open().writer.instr(code, w, out, ins);
      this.counts[code]++;
      this.stats.ops++;
    };
  }
  instruction(name, words) {
    const code = this.lib.opcodes.get(name);
    if (code === undefined)
      throw new Error(`[native] the shim has no kernel ${name}`);
    return (ins, out) => {
      this.open().writer.instr(code, words, out, ins);
      this.counts[code]++;
      this.stats.ops++;
    };
  }
  syncPlan = false;
  begin(work) {
    this.flush();
    this.reap();
    this.syncPlan = work <= SYNC_MAX_WORK && this.inflight.length === 0;
  }
  open() {
    if (this.batch)
      return this.batch;
    const w = this.writers.pop() ?? new ProgramWriter(4096, true);
    w.reset();
    return this.batch = new Batch(w, this, this.syncPlan);
  }
  allocOutput(dtype, shape) {
    const d = this.memory.alloc(dtype, shape);
    const b = this.open();
    return b.sync ? d : pendingData(dtype, d.shape, d.strides, 0, d.data, b);
  }
  view(t, shape, strides, offset) {
    const s = pendingOf(t);
    if (s)
      return pendingData(t.dtype, shape, strides, offset, rawData(t), s);
    return { dtype: t.dtype, shape, strides, offset, data: t.data };
  }
  flush() {
    const b = this.batch;
    if (!b)
      return;
    this.batch = null;
    b.open = false;
    this.submitBatch(b);
  }
  submitBatch(b) {
    const w = b.writer;
    if (w.count === 0) {
      this.writers.push(w);
      return;
    }
    this.stats.submits++;
    if (b.sync) {
      this.stats.syncs++;
      const failed = this.lib.sym.loom_exec(w.bufAddr, w.n);
      w.reset();
      if (this.writers.length < 4)
        this.writers.push(w);
      if (failed >= 0)
        throw nativeError(cstr(this.lib.sym.loom_error()));
      return;
    }
    this.reap();
    while (this.inflight.length >= MAX_IN_FLIGHT)
      this.inflight.shift().wait();
    const h = this.lib.sym.loom_submit(w.bufAddr, w.n, null, 0);
    const sub = new NativeSubmission(this.lib, h, w, (x) => {
      x.reset();
      if (this.writers.length < 4)
        this.writers.push(x);
    });
    b.subs.push(sub);
    this.inflight.push(sub);
  }
  drain() {
    const b = this.batch;
    if (b && b.writer.count > 0) {
      this.submitBatch(b);
      const w = this.writers.pop() ?? new ProgramWriter(4096, true);
      w.reset();
      b.writer = w;
    }
    const subs = this.inflight;
    this.inflight = [];
    for (const s of subs) {
      try {
        s.wait();
      } catch {}
    }
  }
  reap() {
    if (this.inflight.length === 0)
      return;
    const keep = [];
    for (const s of this.inflight) {
      if (s.isDone) {
        try {
          s.wait();
        } catch {}
      } else
        keep.push(s);
    }
    this.inflight = keep;
  }
  synchronize() {
    this.flush();
    const subs = this.inflight;
    this.inflight = [];
    for (const s of subs) {
      try {
        s.wait();
      } catch {}
    }
  }
  writesViews = true;
  storageOf(t) {
    return rawData(t);
  }
  read(t) {
    return pendingOf(t)?.done() ?? Promise.resolve();
  }
  write(_dst, _src) {
    if (this.batch || this.inflight.length)
      this.synchronize();
    return false;
  }
  submit(steps) {
    this.flush();
    const w = new ProgramWriter(1024, true);
    const fusedCode = this.lib.opcodes.get("fused_elementwise");
    for (const s of steps) {
      if (s.chain) {
        let words;
        try {
          words = encodeProgram(chainProgram(s.chain, s.inputs, s.out), this.lib.opcodes);
        } catch {
          return this.runInline(steps);
        }
        if (s.inputs.length > MAX_INPUTS || s.out.shape.length > MAX_DIMS)
          return this.runInline(steps);
        if (numel(s.out.shape) > 0)
          w.instr(fusedCode, words, s.out, s.inputs);
        continue;
      }
      const code = this.lib.opcodes.get(s.op.name);
      if (code === undefined || !this.fits(s.op, s.inputs, s.out.shape))
        return this.runInline(steps);
      w.instr(code, encodeAttrs(s.op, s.attrs, s.inputs, this.lib.opcodes), s.out, s.inputs);
    }
    for (const s of steps)
      if (s.op)
        this.countOther(s.op.name);
    if (w.count === 0)
      return new NativeSubmission(this.lib, null, null);
    this.stats.submits++;
    const sub = new NativeSubmission(this.lib, this.lib.sym.loom_submit(w.bufAddr, w.n, null, 0), w);
    this.inflight.push(sub);
    return sub;
  }
  runInline(steps) {
    for (const s of steps) {
      const r = s.chain ? this.runChain(s) : this.run(s.op, s.inputs, s.attrs, s.out.shape, s.out.dtype);
      const dense = toContiguous(r, s.out.dtype);
      s.out.data.set(dense.data);
    }
    return new NativeSubmission(this.lib, null, null);
  }
  runChain(s) {
    const regs = [...s.inputs];
    for (const f of s.chain)
      regs.push(this.run(f.op, f.args.map((i) => regs[i]), {}, s.out.shape, f.dtype));
    return regs[regs.length - 1];
  }
  shimCounters() {
    const E = this.lib.opEnd;
    const c = new Float64Array(2 + 2 * E);
    this.lib.sym.loom_counters(c);
    const byOp = new Map, nsByOp = new Map;
    for (const [name, code] of this.lib.opcodes) {
      if (c[1 + code])
        byOp.set(name, c[1 + code]);
      if (c[2 + E + code])
        nsByOp.set(name, c[2 + E + code]);
    }
    return { submits: c[0], byOp, preemptions: c[1 + E], nsByOp };
  }
  profile(fn, cap = 4096) {
    const buf = new Float64Array(3 * cap);
    this.synchronize();
    this.lib.sym.loom_profile_buffer(buf, cap);
    try {
      fn();
      this.synchronize();
    } finally {
      this.lib.sym.loom_profile_buffer(null, 0);
    }
    const names = new Map([...this.lib.opcodes].map(([n, c]) => [c, n]));
    const rows = [];
    for (let k = 0;k < cap; k++)
      if (buf[3 * k] > 0)
        rows.push({ index: k, ms: buf[3 * k] / 1e6, op: names.get(buf[3 * k + 1]) ?? "?", elements: buf[3 * k + 2] });
    return rows.sort((a, b) => b.ms - a.ms);
  }
  get inFlight() {
    return this.inflight.filter((s) => !s.isDone).length + (this.batch?.writer.count ? 1 : 0);
  }
  blas() {
    return cstr(this.lib.sym.loom_blas_name());
  }
}
var instance;
var why2 = "";
function nativeBackend() {
  if (instance !== undefined)
    return instance;
  const lib = loadNative();
  if ("error" in lib) {
    why2 = lib.error;
    instance = null;
  } else
    instance = new NativeBackend(lib);
  return instance;
}
function nativeUnavailableReason() {
  nativeBackend();
  return why2;
}

// src/backends/webgpu/context.ts
var numelOf = (s) => s.reduce((p, x) => p * x, 1);
var contiguous2 = (s) => {
  const st = new Array(s.length);
  let acc = 1;
  for (let i = s.length - 1;i >= 0; i--) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
};
function collapse3(shape, strides) {
  const keep = shape.map((s, i) => i).filter((i) => shape[i] !== 1);
  const outShape = [];
  const outStrides = strides.map(() => []);
  for (const d of keep) {
    const n = outShape.length;
    if (n > 0 && strides.every((st, k) => outStrides[k][n - 1] === st[d] * shape[d])) {
      outShape[n - 1] *= shape[d];
      strides.forEach((st, k) => {
        outStrides[k][n - 1] = st[d];
      });
    } else {
      outShape.push(shape[d]);
      strides.forEach((st, k) => outStrides[k].push(st[d]));
    }
  }
  return { shape: outShape, strides: outStrides };
}
function padRank(shape, strides) {
  const nd = shape.length;
  const want = nd <= 1 ? nd : nd <= 4 ? 4 : nd <= 8 ? 8 : 12;
  while (shape.length < want) {
    shape.unshift(1);
    for (const s of strides)
      s.unshift(0);
  }
  return want;
}
var groupsFor = (n, size = 256) => Math.ceil(n / size);
var linearIndex = (size = 256) => `gid.x + gid.y * nw.x * ${size}u`;

// src/backends/webgpu/dtype.ts
function gpuType(d, op = "webgpu") {
  switch (d) {
    case "float32":
    case "float16":
    case "bfloat16":
      return "f32";
    case "int32":
    case "int64":
    case "int8":
    case "uint8":
    case "bool":
      return "i32";
    case "float64":
      throw new LoomDtypeError(`[${op}] float64 is not supported on the webgpu device (WGSL has no 64-bit floats); convert with .float() first`);
  }
}
var isFloatClass = (d) => d === "float32" || d === "float16" || d === "bfloat16" || d === "float64";
var I32_MIN = -2147483648;
var I32_MAX = 2147483647;
function toGpuArray(d, data, lo, hi, op = "webgpu") {
  const t = gpuType(d, op);
  const n = Math.max(hi - lo, 0);
  if (d === "float32")
    return data.slice(lo, hi);
  if (d === "int32")
    return data.slice(lo, hi);
  if (t === "f32") {
    const dec = d === "float16" ? halfToFloat : bf16ToFloat;
    const out = new Float32Array(n);
    for (let i = 0;i < n; i++)
      out[i] = dec(data[lo + i]);
    return out;
  }
  const out = new Int32Array(n);
  for (let i = 0;i < n; i++) {
    const v = data[lo + i];
    if (d === "int64" && (v < I32_MIN || v > I32_MAX)) {
      throw new LoomDtypeError(`[${op}] int64 value ${v} does not fit the webgpu device's 32-bit integers (range ±2^31)`);
    }
    out[i] = v;
  }
  return out;
}
function scalarBits(t, v, op = "webgpu") {
  if (t === "f32") {
    F32[0] = v;
    return U32[0];
  }
  if (v < I32_MIN || v > I32_MAX)
    throw new LoomDtypeError(`[${op}] value ${v} does not fit the webgpu device's 32-bit integers`);
  I32[0] = Math.trunc(v) || 0;
  return U32[0];
}
var F32 = new Float32Array(1);
var I32 = new Int32Array(F32.buffer);
var U32 = new Uint32Array(F32.buffer);
function fromGpuBytes(d, raw, n) {
  switch (d) {
    case "float32":
      return new Float32Array(raw, 0, n).slice();
    case "float16":
    case "bfloat16": {
      const src = new Float32Array(raw, 0, n);
      const enc = d === "float16" ? floatToHalf : floatToBf16;
      const out = new Uint16Array(n);
      for (let i = 0;i < n; i++)
        out[i] = enc(src[i]);
      return out;
    }
    case "int64":
      return Float64Array.from(new Int32Array(raw, 0, n));
    case "int32":
      return new Int32Array(raw, 0, n).slice();
    case "int8":
      return Int8Array.from(new Int32Array(raw, 0, n));
    case "uint8":
    case "bool":
      return Uint8Array.from(new Int32Array(raw, 0, n));
    case "float64":
      throw new LoomDtypeError("[webgpu] float64 is not supported on the webgpu device");
  }
}
var WGSL_COMMON = `
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
var<private> INF_BITS: u32 = 0x7f800000u; // a var, so WGSL does not const-evaluate (and reject) inf
var<private> NAN_BITS: u32 = 0x7fc00000u;
fn f_inf() -> f32 { return bitcast<f32>(INF_BITS); }
fn f_nan() -> f32 { return bitcast<f32>(NAN_BITS); }
fn round_bf16(x: f32) -> f32 {
  let b = bitcast<u32>(x);
  if (is_nan(x)) { return bitcast<f32>((b | 0x00400000u) & 0xffff0000u); }
  return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);
}
fn round_f16(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let b = bitcast<u32>(x);
  let s = b & 0x80000000u;
  let a = abs(x);
  if (a >= 65520.0) { return bitcast<f32>(s | 0x7f800000u); }
  if (a < 6.103515625e-05) {
    // subnormal half: a multiple of 2^-24; round the quotient to even
    let q = a * 16777216.0;
    var r = floor(q);
    let rem = q - r;
    if (rem > 0.5 || (rem == 0.5 && (u32(r) & 1u) == 1u)) { r = r + 1.0; }
    return bitcast<f32>(s | bitcast<u32>(r / 16777216.0));
  }
  // normal: keep 10 mantissa bits, round to nearest even on the 13 dropped bits
  let lsb = (b >> 13u) & 1u;
  return bitcast<f32>((b + 0x0fffu + lsb) & 0xffffe000u);
}
fn f_to_i(x: f32) -> i32 {
  if (is_nan(x)) { return 0; }
  return i32(clamp(trunc(x), -2147483648.0, 2147483520.0));
}
`;
function storeExpr2(d, ct, v) {
  switch (d) {
    case "float32":
      return ct === "f32" ? v : `f32(${v})`;
    case "float16":
      return `round_f16(${ct === "f32" ? v : `f32(${v})`})`;
    case "bfloat16":
      return `round_bf16(${ct === "f32" ? v : `f32(${v})`})`;
    case "int32":
    case "int64":
      return ct === "i32" ? v : `f_to_i(${v})`;
    case "int8":
      return `((${ct === "i32" ? v : `f_to_i(${v})`} << 24u) >> 24u)`;
    case "uint8":
      return `(${ct === "i32" ? v : `f_to_i(${v})`} & 255)`;
    case "bool":
      return `select(0, 1, ${v} != ${ct === "f32" ? "0.0" : "0"})`;
    case "float64":
      throw new LoomDtypeError("[webgpu] float64 is not supported on the webgpu device");
  }
}
function convertExpr(from, to, v) {
  if (from === to)
    return v;
  return to === "f32" ? `f32(${v})` : `f_to_i(${v})`;
}

// src/backends/webgpu/gpu.ts
var opened = null;
function describe2(info) {
  const parts = [info.device, info.description].filter((s) => s && s.length > 0);
  return `${parts.join(" — ") || "unknown adapter"}${info.architecture === "software" ? " (software)" : ""}`;
}
var loaded2 = null;
var loadError = "";
async function initGpu() {
  if (RUNTIME !== "bun")
    return opened ??= await openNavigatorGpu();
  if (!loaded2) {
    try {
      const spec = "bun-" + "webgpu";
      loaded2 = await import(spec);
    } catch (e) {
      loadError = `bun-webgpu could not be loaded (npm install bun-webgpu): ${e.message}`;
    }
  }
  return openGpu();
}
function openGpu() {
  if (opened)
    return opened;
  if (RUNTIME !== "bun") {
    const has = typeof navigator !== "undefined" && "gpu" in navigator && navigator.gpu;
    return { ctx: null, reason: has ? `on ${RUNTIME} the WebGPU device opens asynchronously: \`await loom.init_webgpu()\` once first` : `no WebGPU on ${RUNTIME} (navigator.gpu is missing)` };
  }
  if (!loaded2) {
    try {
      const spec = "bun-webgpu";
      loaded2 = import.meta.require(spec);
    } catch {
      return { ctx: null, reason: loadError || 'bun-webgpu is not loaded yet: `await loom.init_webgpu()` once first (or import "bun-webgpu" before using the device)' };
    }
  }
  opened = tryOpen(loaded2);
  return opened;
}
function tryOpen(mod) {
  try {
    mod.globals();
    const gpu = mod.createGPUInstance();
    const ticker = gpu._ticker;
    if (!ticker)
      return { ctx: null, reason: "bun-webgpu changed: no instance event pump (GPUImpl._ticker)" };
    const pump = () => ticker.processEvents();
    const adapter = waitSync(gpu.requestAdapter(), pump);
    const isNull = adapter && (adapter.info.backendType === 1 || adapter.info.device === "null-backend");
    if (!adapter || isNull) {
      return {
        ctx: null,
        reason: "no WebGPU adapter found (no GPU, and no Vulkan driver: on Debian install lavapipe with `apt-get install -t bookworm-backports mesa-vulkan-drivers libvulkan1`)"
      };
    }
    const info = adapter.info;
    const requiredLimits = {};
    for (const k in adapter.limits) {
      const v = adapter.limits[k];
      if (typeof v === "number" && k !== "nextInChain")
        requiredLimits[k] = v;
    }
    const device = waitSync(adapter.requestDevice({ requiredLimits }), pump);
    const errors = [];
    device.onuncapturederror = (ev) => {
      errors.push(ev.error.message);
    };
    const description = describe2(info);
    return {
      ctx: { device, description, software: info.architecture === "software" || /llvmpipe|swiftshader|lavapipe/i.test(description), processEvents: pump, errors },
      reason: ""
    };
  } catch (e) {
    return { ctx: null, reason: `opening the WebGPU device failed: ${e.message}` };
  }
}
async function openNavigatorGpu() {
  const gpu = typeof navigator !== "undefined" ? navigator.gpu : undefined;
  if (!gpu)
    return { ctx: null, reason: `no WebGPU on ${RUNTIME} (navigator.gpu is missing${RUNTIME === "deno" ? "; Deno 2 has it on Linux/macOS/Windows with a GPU or a Vulkan driver" : ": enable WebGPU in the browser"})` };
  try {
    const adapter = await gpu.requestAdapter();
    if (!adapter)
      return { ctx: null, reason: `no WebGPU adapter on ${RUNTIME} (navigator.gpu.requestAdapter() returned null)` };
    const requiredLimits = {};
    for (const k of ["maxStorageBuffersPerShaderStage", "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup"]) {
      const v = adapter.limits[k];
      if (typeof v === "number")
        requiredLimits[k] = v;
    }
    const device = await adapter.requestDevice({ requiredLimits });
    const errors = [];
    device.addEventListener("uncapturederror", (ev) => {
      errors.push(ev.error.message);
    });
    const info = adapter.info;
    const description = info ? describe2(info) : "WebGPU adapter";
    return {
      ctx: { device, description, software: info?.architecture === "software" || /llvmpipe|swiftshader|lavapipe/i.test(description), processEvents: () => {}, errors },
      reason: ""
    };
  } catch (e) {
    return { ctx: null, reason: `opening the WebGPU device failed: ${e.message}` };
  }
}

// src/backends/webgpu/memory.ts
function bucket(bytes) {
  const b = Math.max(bytes, 16);
  if (b <= 65536)
    return Math.ceil(b / 256) * 256;
  const p = 2 ** Math.floor(Math.log2(b));
  const step = p / 8;
  return Math.ceil(b / step) * step;
}
var nextBufferId = 1;

class BufferPool {
  device;
  usage;
  stats = { created: 0, reused: 0, released: 0, liveBytes: 0, pooledBytes: 0, sweeps: 0 };
  free = new Map;
  registry = new FinalizationRegistry((o) => this.giveBack(o));
  owners = [];
  sinceSweep = 0;
  createdSinceSweep = 0;
  sweepCount = 1024;
  sweepFloor = 64 * 2 ** 20;
  sweepEvery = this.sweepFloor;
  constructor(device, usage) {
    this.device = device;
    this.usage = usage;
  }
  acquire(bytes, avoidBatch = -1) {
    const size = bucket(bytes);
    this.sinceSweep += size;
    if (this.sinceSweep > Math.min(this.sweepEvery, Math.max(this.sweepFloor, this.stats.liveBytes)))
      this.sweep();
    const list = this.free.get(size);
    if (list && list.length) {
      let i = list.length - 1;
      if (avoidBatch >= 0)
        while (i >= 0 && list[i].lastBatch === avoidBatch)
          i--;
      if (i >= 0) {
        const b = list[i];
        list.splice(i, 1);
        this.stats.reused++;
        this.stats.liveBytes += size;
        return b;
      }
    }
    if (++this.createdSinceSweep > this.sweepCount && this.owners.length > 0) {
      this.sweep();
      return this.acquire(bytes, avoidBatch);
    }
    const gpu = this.device.createBuffer({ size, usage: this.usage });
    this.stats.created++;
    this.stats.pooledBytes += size;
    this.stats.liveBytes += size;
    return { gpu, size, id: nextBufferId++, lastBatch: -1 };
  }
  release(b) {
    this.stats.released++;
    this.stats.liveBytes -= b.size;
    let list = this.free.get(b.size);
    if (!list)
      this.free.set(b.size, list = []);
    list.push(b);
  }
  own(holder, buf) {
    const owner = { buf, returned: false };
    this.registry.register(holder, owner, owner);
    this.owners.push({ ref: new WeakRef(holder), owner });
  }
  giveBack(o) {
    if (o.returned)
      return;
    o.returned = true;
    this.release(o.buf);
  }
  sweep() {
    this.sinceSweep = 0;
    this.createdSinceSweep = 0;
    this.stats.sweeps++;
    gc();
    const keep = [];
    for (const e of this.owners) {
      if (e.owner.returned)
        continue;
      if (e.ref.deref() === undefined) {
        this.registry.unregister(e.owner);
        this.giveBack(e.owner);
      } else
        keep.push(e);
    }
    this.owners = keep;
    this.sweepEvery = Math.max(this.sweepFloor, this.stats.liveBytes);
  }
  trim() {
    for (const list of this.free.values()) {
      for (const b of list) {
        this.stats.pooledBytes -= b.size;
        b.gpu.destroy();
      }
    }
    this.free.clear();
  }
}

// src/backends/webgpu/queue.ts
var PARAM_WORDS = 64;
var PARAM_BYTES = PARAM_WORDS * 4;
var SLOTS_PER_CHUNK = 256;
var PARAMS_WGSL = `
@group(0) @binding(0) var<uniform> P: array<vec4<u32>, 16>;
fn p(i: u32) -> u32 { return P[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }
fn pi(i: u32) -> i32 { return bitcast<i32>(p(i)); }
`;
var ERR_CELLS = 16384;
var ERR_WGSL = (binding, word) => `
@group(0) @binding(${binding}) var<storage, read_write> err: array<atomic<u32>>;
fn report(site: u32, v: i32) {
  let e = p(${word}u);
  if (atomicMax(&err[e + 3u], 1u) == 0u) { atomicStore(&err[e], site); atomicStore(&err[e + 1u], bitcast<u32>(v)); }
}`;

class ErrCell {
  index;
  sites;
  state = undefined;
  constructor(index, sites) {
    this.index = index;
    this.sites = sites;
  }
  get word() {
    return this.index * 4;
  }
}

class CommandQueue {
  ctx;
  stats = { submits: 0, dispatches: 0, pipelines: 0, readbacks: 0, uploads: 0 };
  pool;
  staging;
  device;
  pipelines = new Map;
  layouts = new Map;
  chunks = [];
  batch = 0;
  encoder = null;
  pass = null;
  slots = 0;
  flushScheduled = false;
  deferred = [];
  bindGroups = [];
  bindCache = new Map;
  evictBindGroups() {
    for (const g of this.bindCache.values())
      this.bindGroups.push(g);
    this.bindCache.clear();
  }
  errBuf;
  cells = [];
  opCells = [];
  maxDispatches = 2048;
  maxBuffers;
  constructor(ctx) {
    this.ctx = ctx;
    this.device = ctx.device;
    this.maxBuffers = this.device.limits.maxStorageBuffersPerShaderStage;
    this.pool = new BufferPool(this.device, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
    this.staging = new BufferPool(this.device, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
    this.errBuf = this.device.createBuffer({ size: ERR_CELLS * 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  }
  open() {
    if (!this.encoder) {
      this.encoder = this.device.createCommandEncoder();
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => {
          this.flushScheduled = false;
          this.flush();
        });
      }
    }
    return this.encoder;
  }
  computePass() {
    if (!this.pass)
      this.pass = this.open().beginComputePass();
    return this.pass;
  }
  endPass() {
    const enc = this.open();
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
    return enc;
  }
  pipelineFor(k) {
    let hit = this.pipelines.get(k.source);
    if (hit)
      return hit;
    const key = k.access.join(",");
    let layout = this.layouts.get(key);
    if (!layout) {
      const entries = [
        { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: true } },
        ...k.access.map((a, i) => ({
          binding: i + 1,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: a === "r" ? "read-only-storage" : "storage" }
        }))
      ];
      layout = this.device.createBindGroupLayout({ entries });
      this.layouts.set(key, layout);
    }
    const module = this.device.createShaderModule({ code: k.source });
    const pipeline = this.device.createComputePipeline({
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: "main" }
    });
    this.stats.pipelines++;
    hit = { pipeline, layout, layoutKey: key };
    this.pipelines.set(k.source, hit);
    return hit;
  }
  dispatch(k, params, buffers, groups) {
    const [gx, gy, gz] = typeof groups === "number" ? [Math.min(groups, 65535), Math.ceil(groups / 65535), 1] : groups;
    if (gx === 0 || gy === 0 || gz === 0)
      return;
    if (params.length > PARAM_WORDS)
      throw new LoomValueError(`[webgpu] kernel needs ${params.length} parameter words (max ${PARAM_WORDS})`);
    if (buffers.length > this.maxBuffers)
      throw new LoomValueError(`[webgpu] kernel binds ${buffers.length} storage buffers (the adapter allows ${this.maxBuffers} per shader stage)`);
    const { pipeline, layout, layoutKey } = this.pipelineFor(k);
    const slot = this.slots++;
    const ci = Math.floor(slot / SLOTS_PER_CHUNK);
    if (ci === this.chunks.length) {
      this.chunks.push({
        gpu: this.device.createBuffer({ size: SLOTS_PER_CHUNK * PARAM_BYTES, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST }),
        words: new Uint32Array(SLOTS_PER_CHUNK * PARAM_WORDS)
      });
    }
    const chunk = this.chunks[ci];
    const base = slot % SLOTS_PER_CHUNK * PARAM_WORDS;
    for (let i = 0;i < params.length; i++)
      chunk.words[base + i] = params[i];
    let key = `${layoutKey}#${ci}`;
    for (const b of buffers) {
      key += b ? `,${b.id}` : ",0";
      if (b)
        b.lastBatch = this.batch;
    }
    let bind = this.bindCache.get(key);
    if (!bind) {
      if (this.bindCache.size >= 8192)
        this.evictBindGroups();
      const entries = [{ binding: 0, resource: { buffer: chunk.gpu, offset: 0, size: PARAM_BYTES } }];
      buffers.forEach((b, i) => entries.push({ binding: i + 1, resource: { buffer: b ? b.gpu : this.errBuf } }));
      bind = this.device.createBindGroup({ layout, entries });
      this.bindCache.set(key, bind);
    }
    const pass = this.computePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bind, [base * 4]);
    pass.dispatchWorkgroups(gx, gy, gz);
    this.stats.dispatches++;
    if (this.slots >= this.maxDispatches)
      this.flush();
  }
  errorCell(sites) {
    if (this.cells.length === ERR_CELLS) {
      this.resolve(this.cells);
      this.cells = [];
      this.endPass().clearBuffer(this.errBuf, 0, ERR_CELLS * 16);
    }
    const c = new ErrCell(this.cells.length, sites);
    this.cells.push(c);
    this.opCells.push(c);
    return c;
  }
  takeCells() {
    const c = this.opCells;
    if (c.length)
      this.opCells = [];
    return c;
  }
  resolve(cells) {
    const pending = cells.filter((c) => c.state === undefined);
    if (pending.length === 0)
      return;
    const bytes = this.cells.length * 16;
    const st = this.staging.acquire(bytes);
    this.endPass().copyBufferToBuffer(this.errBuf, 0, st.gpu, 0, bytes);
    this.flush();
    waitSync(st.gpu.mapAsync(GPUMapMode.READ, 0, bytes), this.ctx.processEvents);
    const words = new Int32Array(st.gpu.getMappedRange(0, bytes).slice(0));
    st.gpu.unmap();
    this.staging.release(st);
    for (const c of pending)
      settle(c, words, c.word);
  }
  copy(src, srcOffset, dst, dstOffset, bytes) {
    if (bytes === 0)
      return;
    src.lastBatch = dst.lastBatch = this.batch;
    this.endPass().copyBufferToBuffer(src.gpu, srcOffset, dst.gpu, dstOffset, bytes);
  }
  clear(dst, bytes) {
    if (bytes === 0)
      return;
    dst.lastBatch = this.batch;
    this.endPass().clearBuffer(dst.gpu, 0, bytes);
  }
  releaseAfterSubmit(b) {
    this.deferred.push(b);
  }
  upload(data) {
    const b = this.pool.acquire(data.byteLength, this.batch);
    if (data.byteLength > 0)
      this.device.queue.writeBuffer(b.gpu, 0, data.buffer, data.byteOffset, data.byteLength);
    this.stats.uploads++;
    return b;
  }
  flush() {
    if (!this.encoder)
      return;
    const enc = this.endPass();
    for (let c = 0;c * SLOTS_PER_CHUNK < this.slots; c++) {
      const used = Math.min(this.slots - c * SLOTS_PER_CHUNK, SLOTS_PER_CHUNK) * PARAM_WORDS;
      const ch = this.chunks[c];
      this.device.queue.writeBuffer(ch.gpu, 0, ch.words.buffer, 0, used * 4);
    }
    this.device.queue.submit([enc.finish()]);
    this.stats.submits++;
    this.encoder = null;
    this.slots = 0;
    this.batch++;
    for (const b of this.deferred)
      this.pool.release(b);
    this.deferred = [];
    for (const g of this.bindGroups)
      g.destroy();
    this.bindGroups = [];
  }
  stage(src, offset, bytes, cells) {
    const pending = cells.filter((c) => c.state === undefined);
    const size = Math.max(bytes + 16 * pending.length, 4);
    const st = this.staging.acquire(size);
    const enc = this.endPass();
    src.lastBatch = this.batch;
    if (bytes > 0)
      enc.copyBufferToBuffer(src.gpu, offset, st.gpu, 0, bytes);
    pending.forEach((c, k) => enc.copyBufferToBuffer(this.errBuf, c.word * 4, st.gpu, bytes + 16 * k, 16));
    this.flush();
    this.stats.readbacks++;
    return { st, size, cells: pending };
  }
  finish(st, bytes, size, cells) {
    const mapped = st.gpu.getMappedRange(0, size);
    const out = mapped.slice(0, bytes);
    const words = new Int32Array(mapped.slice(bytes, bytes + 16 * cells.length));
    st.gpu.unmap();
    this.staging.release(st);
    this.throwDeviceErrors();
    cells.forEach((c, k) => settle(c, words, 4 * k));
    return out;
  }
  readSync(src, offset, bytes, cells = []) {
    const { st, size, cells: pending } = this.stage(src, offset, bytes, cells);
    waitSync(st.gpu.mapAsync(GPUMapMode.READ, 0, size), this.ctx.processEvents);
    return this.finish(st, bytes, size, pending);
  }
  async read(src, offset, bytes, cells = []) {
    const { st, size, cells: pending } = this.stage(src, offset, bytes, cells);
    await st.gpu.mapAsync(GPUMapMode.READ, 0, size);
    return this.finish(st, bytes, size, pending);
  }
  trim() {
    this.evictBindGroups();
    this.flush();
    this.pool.trim();
  }
  async done() {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.throwDeviceErrors();
  }
  doneSync() {
    this.flush();
    waitSync(this.device.queue.onSubmittedWorkDone(), this.ctx.processEvents);
    this.throwDeviceErrors();
  }
  throwDeviceErrors() {
    if (this.ctx.errors.length === 0)
      return;
    const msgs = this.ctx.errors.splice(0);
    throw new LoomValueError(`[webgpu] device error: ${msgs.join(`
`)}`);
  }
}
function settle(c, words, at) {
  if (c.state !== undefined)
    return;
  const site = words[at];
  if (site === 0) {
    c.state = null;
    return;
  }
  const make = c.sites[site - 1];
  const e = make ? make(words[at + 1]) : new LoomValueError(`[webgpu] a kernel reported fault ${site}`);
  e.message += " (detected on the webgpu device)";
  c.state = e;
}
function raiseCells(cells) {
  for (const c of cells) {
    if (!c.state)
      continue;
    const E = c.state.constructor;
    throw new E(c.state.message);
  }
}

// src/backends/webgpu/elementwise.ts
var fsel = (cond) => `select(0.0, 1.0, ${cond})`;
var isel = (cond) => `select(0, 1, ${cond})`;
var cmp = (o) => ({ f: (a, b) => fsel(`${a} ${o} ${b}`), i: (a, b) => isel(`${a} ${o} ${b}`) });
var EW_WGSL = {
  neg: { f: (a) => `-(${a})`, i: (a) => `-(${a})` },
  abs: { f: (a) => `abs(${a})`, i: (a) => `abs(${a})` },
  sign: { f: (a) => `sign_f(${a})`, i: (a) => `sign(${a})` },
  exp: { f: (a) => `exp(${a})` },
  log: { f: (a) => `log_f(${a})` },
  log1p: { f: (a) => `log1p_f(${a})` },
  sqrt: { f: (a) => `sqrt_f(${a})` },
  rsqrt: { f: (a) => `(1.0 / sqrt_f(${a}))` },
  reciprocal: { f: (a) => `(1.0 / ${a})` },
  sin: { f: (a) => `sin(${a})` },
  cos: { f: (a) => `cos(${a})` },
  tanh: { f: (a) => `tanh_f(${a})` },
  sigmoid: { f: (a) => `(1.0 / (1.0 + exp(-(${a}))))` },
  relu: { f: (a) => `select(0.0, ${a}, ${a} > 0.0 || is_nan(${a}))`, i: (a) => `max(${a}, 0)` },
  erf: { f: (a) => `erf_f(${a})` },
  floor: { f: (a) => `floor(${a})`, i: (a) => a },
  ceil: { f: (a) => `ceil(${a})`, i: (a) => a },
  round: { f: (a) => `round(${a})`, i: (a) => a },
  isnan: { f: (a) => fsel(`is_nan(${a})`), i: () => "0" },
  logical_not: { f: (a) => fsel(`!truthy(${a})`), i: (a) => isel(`${a} == 0`) },
  contiguous: { f: (a) => a, i: (a) => a },
  cast: { f: (a) => a, i: (a) => a },
  add: { f: (a, b) => `(${a} + ${b})`, i: (a, b) => `(${a} + ${b})` },
  sub: { f: (a, b) => `(${a} - ${b})`, i: (a, b) => `(${a} - ${b})` },
  mul: { f: (a, b) => `(${a} * ${b})`, i: (a, b) => `(${a} * ${b})` },
  div: { f: (a, b) => `(${a} / ${b})` },
  floor_divide: { f: (a, b) => `floor(${a} / ${b})`, i: (a, b) => `floordiv_i(${a}, ${b})` },
  remainder: { f: (a, b) => `rem_f(${a}, ${b})`, i: (a, b) => `rem_i(${a}, ${b})` },
  pow: { f: (a, b) => `pow_f(${a}, ${b})`, i: (a, b) => `pow_i(${a}, ${b})` },
  maximum: { f: (a, b) => `max_f(${a}, ${b})`, i: (a, b) => `max(${a}, ${b})` },
  minimum: { f: (a, b) => `min_f(${a}, ${b})`, i: (a, b) => `min(${a}, ${b})` },
  eq: cmp("=="),
  ne: cmp("!="),
  lt: cmp("<"),
  le: cmp("<="),
  gt: cmp(">"),
  ge: cmp(">="),
  logical_and: { f: (a, b) => fsel(`truthy(${a}) && truthy(${b})`), i: (a, b) => isel(`${a} != 0 && ${b} != 0`) },
  logical_or: { f: (a, b) => fsel(`truthy(${a}) || truthy(${b})`), i: (a, b) => isel(`${a} != 0 || ${b} != 0`) },
  where: { f: (c, a, b) => `select(${b}, ${a}, truthy(${c}))`, i: (c, a, b) => `select(${b}, ${a}, ${c} != 0)` }
};
var HELPERS = {
  truthy: "fn truthy(x: f32) -> bool { return x != 0.0 || is_nan(x); }",
  sign_f: "fn sign_f(x: f32) -> f32 { return f32(x > 0.0) - f32(x < 0.0); }",
  log_f: "fn log_f(x: f32) -> f32 { if (x < 0.0) { return f_nan(); } if (x == 0.0) { return -f_inf(); } return log(x); }",
  sqrt_f: "fn sqrt_f(x: f32) -> f32 { if (x < 0.0) { return f_nan(); } return sqrt(x); }",
  log1p_f: `fn log1p_f(x: f32) -> f32 {
  if (x < -1.0) { return f_nan(); } if (x == -1.0) { return -f_inf(); }
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (u > 1e30) { return log(u); }
  return log(u) * x / (u - 1.0); // Goldberg's trick: exact-ish for tiny x
}`,
  tanh_f: "fn tanh_f(x: f32) -> f32 { if (is_nan(x)) { return x; } if (abs(x) > 15.0) { return sign(x); } return tanh(x); }",
  erf_f: `fn erf_f(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let ax = abs(x);
  if (ax < 0.5) {
    let t = x * x;
    let p = (((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t + 377.485237685302021) * t + 3209.37758913846947;
    let q = (((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t + 2844.23683343917062;
    return x * p / q;
  }
  var r = 1.0;
  if (ax < 4.0) {
    let p = (((((((5.64188496988670089e-1 * ax + 8.88314979438837594) * ax + 66.1191906371416295) * ax + 298.635138197400131) * ax + 881.952221241769090) * ax + 1712.04761263407058) * ax + 2051.07837782607147) * ax + 1230.33935479799725);
    let q = (((((((ax + 15.7449261107098347) * ax + 117.693950891312499) * ax + 537.181101862009858) * ax + 1621.38957456669019) * ax + 3290.79923573345963) * ax + 4362.61909014324716) * ax + 3439.36767414372164) * ax + 1230.33935480374942;
    r = 1.0 - exp(-ax * ax) * p / q;
  } else if (ax < 10.0) {
    let z = 1.0 / (ax * ax);
    let p = ((((1.63153871373020978e-2 * z + 3.05326634961232344e-1) * z + 3.60344899949804439e-1) * z + 1.25781726111229246e-1) * z + 1.60837851487422766e-2) * z + 6.58749161529837803e-4;
    let q = ((((z + 2.56852019228982242) * z + 1.87295284992346725) * z + 5.27905102951428412e-1) * z + 6.05183413124413191e-2) * z + 2.33520497626869185e-3;
    r = 1.0 - exp(-ax * ax) / ax * (0.564189583547756287 - z * p / q);
  }
  return select(r, -r, x < 0.0);
}`,
  nonfinite_f: "fn nonfinite_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u; }",
  floordiv_i: `fn floordiv_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) { return q - 1; }
  return q;
}`,
  rem_i: `fn rem_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) { return r + b; }
  return r;
}`,
  rem_f: "fn rem_f(a: f32, b: f32) -> f32 { return a - floor(a / b) * b; }",
  max_f: "fn max_f(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f_nan(); } return max(a, b); }",
  min_f: "fn min_f(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f_nan(); } return min(a, b); }",
  pow_f: `fn pow_f(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (is_nan(a) || is_nan(b)) { return f_nan(); }
  if (b == 1.0) { return a; }
  if (b == 2.0) { return a * a; }
  if (b == 3.0) { return a * a * a; }
  if (b == 0.5) { return sqrt_f(a); }
  if (b == -1.0) { return 1.0 / a; }
  if (b == -2.0) { return 1.0 / (a * a); }
  let isInt = floor(b) == b;
  if (a == 0.0) { if (b > 0.0) { return 0.0; } return f_inf(); }
  if (a < 0.0) {
    if (!isInt) { return f_nan(); }
    let m = exp2(b * log2(-a));
    let odd = abs(b) < 16777216.0 && (i32(abs(b)) & 1) == 1;
    return select(m, -m, odd);
  }
  return exp2(b * log2(a));
}`,
  pow_i: `fn pow_i(a: i32, b: i32) -> i32 {
  if (b < 0) { return select(select(0, select(-1, 1, (b & 1) == 0), a == -1), 1, a == 1); }
  var r = 1; var base = a; var e = b;
  loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * base; } base = base * base; e = e >> 1u; }
  return r;
}`
};
var DEPS = { pow_f: ["sqrt_f"] };
function helpersFor(code) {
  const need = new Set;
  const add = (h) => {
    if (need.has(h))
      return;
    for (const d of DEPS[h] ?? [])
      add(d);
    need.add(h);
  };
  for (const h of Object.keys(HELPERS))
    if (new RegExp(`\\b${h}\\(`).test(code))
      add(h);
  return [...need].map((h) => HELPERS[h]).join(`
`);
}
function thrownBy(check) {
  try {
    check();
  } catch (e) {
    return e;
  }
  return new LoomValueError("[webgpu] a fault site's check did not raise");
}
var BITS = new Int32Array(1);
var BITS_F = new Float32Array(BITS.buffer);
function intFaults(op, dtype, useT, a, b, e, tmp, site) {
  const chk = intResultCheck(op, dtype);
  if (!chk)
    return { pre: "", value: e };
  const zero = useT === "f32" ? "0.0" : "0";
  const pre = [];
  if (op === "floor_divide" || op === "remainder")
    pre.push(`if (${b} == ${zero}) { report(${site(() => thrownBy(() => chk(0, 1, 0)))}u, 0); }`);
  if (useT === "i32")
    return { pre: pre.join(" "), value: e };
  const fin = site((v) => {
    BITS[0] = v;
    return thrownBy(() => chk(BITS_F[0], 1, 1));
  });
  pre.push(`let ${tmp} = ${e}; if (nonfinite_f(${tmp})) { report(${fin}u, bitcast<i32>(${tmp})); }`);
  return { pre: pre.join(" "), value: tmp };
}
function computeType(out, operands) {
  return isFloatClass(out) || operands.some((o) => isFloatClass(o.dtype)) ? "f32" : "i32";
}
function elementwiseKernel2(op, ct, outDtype, outT, operands, nd, outStrided) {
  const key = `${op}|${ct}|${outDtype}|${outT}|${operands.map((o) => o.kind + o.t).join(",")}|${nd}|${+outStrided}`;
  let k = KERNEL_MEMO.get(key);
  if (!k)
    KERNEL_MEMO.set(key, k = buildElementwise(op, ct, outDtype, outT, operands, nd, outStrided));
  return k;
}
var KERNEL_MEMO = new Map;
function buildElementwise(op, ct, outDtype, outT, operands, nd, outStrided) {
  const table = EW_WGSL[op];
  const useT = ct === "i32" && !table.i ? "f32" : ct;
  const expr = useT === "f32" ? table.f : table.i;
  const lines = [];
  let w = 1 + nd;
  const outOff = outStrided ? w : -1;
  if (outStrided)
    w += 1 + nd;
  const bufs = [];
  const vals = [];
  const aliased = [];
  operands.forEach(() => vals.push(""));
  operands.forEach((o, k) => {
    if (o.kind !== "buf")
      return;
    bufs.push({ k, off: w, t: o.t });
    vals[k] = convertExpr(o.t, useT, `in${k}[o${k}]`);
    w += 1 + nd;
  });
  operands.forEach((o, k) => {
    if (o.kind !== "alias")
      return;
    aliased.push({ k, off: w });
    vals[k] = convertExpr(o.t, useT, outT === o.t ? `out[o${k}]` : `bitcast<${o.t}>(out[o${k}])`);
    w += 1 + nd;
  });
  operands.forEach((o, k) => {
    if (o.kind === "imm")
      vals[k] = convertExpr(o.t, useT, o.t === "f32" ? `pf(${w++}u)` : `pi(${w++}u)`);
  });
  const decl = [`@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;`];
  bufs.forEach((b, j) => decl.push(`@group(0) @binding(${j + 2}) var<storage, read> in${b.k}: array<${b.t}>;`));
  const reads = [...bufs, ...aliased];
  const idx = [...reads.map((b) => `o${b.k}`), ...outStrided ? ["oo"] : []];
  const offs = [...reads.map((b) => b.off), ...outStrided ? [outOff] : []];
  idx.forEach((v, j) => lines.push(`var ${v} = p(${offs[j]}u);`));
  if (nd > 0 && idx.length > 0) {
    lines.push("var r = i;");
    for (let d = nd - 1;d >= 0; d--) {
      const body = idx.map((v, j) => `${v} += c * p(${offs[j] + 1 + d}u);`).join(" ");
      lines.push(d > 0 ? `{ let s = p(${1 + d}u); let c = r % s; r = r / s; ${body} }` : `{ let c = r; ${body} }`);
    }
  }
  operands.forEach((_, k) => lines.push(`let v${k} = ${vals[k]};`));
  const e = expr(...[0, 1, 2].map((k) => k < operands.length ? `v${k}` : "0"));
  const sites = [];
  const chk = intFaults(op, outDtype, useT, "v0", "v1", e, "r0", (s) => sites.push(s));
  if (chk.pre)
    lines.push(chk.pre);
  lines.push(`out[${outStrided ? "oo" : "i"}] = ${storeExpr2(outDtype, useT, chk.value)};`);
  if (sites.length)
    decl.push(ERR_WGSL(bufs.length + 2, w));
  const body = lines.join(`
  `);
  const source = `${PARAMS_WGSL}${WGSL_COMMON}${helpersFor(body)}
${decl.join(`
`)}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex()};
  if (i >= p(0u)) { return; }
  ${body}
}`;
  return { source, access: ["rw", ...bufs.map(() => "r"), ...sites.length ? ["rw"] : []], sites };
}
function launchElementwise(ctx, op, operands, shape, target) {
  const n = numelOf(shape);
  if (n === 0)
    return;
  if (n > 2 ** 31)
    throw new LoomValueError(`[${op}] ${n} elements exceed the webgpu kernels' 32-bit indexing`);
  const bufOps = operands.filter((o) => o.kind === "buf");
  const isAlias = (o) => o.kind === "buf" && o.view.buf === target.view.buf;
  const ordered = [...bufOps.filter((o) => !isAlias(o)), ...bufOps.filter(isAlias)];
  const lists = ordered.map((o) => o.view.strides);
  if (!target.dense)
    lists.push(target.view.strides);
  const col = collapse3(shape, lists.length ? lists : [contiguous2(shape)]);
  const nd = padRank(col.shape, col.strides);
  const params = [n, ...col.shape];
  if (!target.dense)
    params.push(target.view.offset, ...col.strides[ordered.length]);
  ordered.forEach((o, j) => params.push(o.view.offset, ...col.strides[j]));
  const ct = computeType(target.view.dtype, operands.map((o) => o.kind === "buf" ? o.view : o));
  for (const o of operands)
    if (o.kind === "imm")
      params.push(scalarBits(o.t, o.value, op));
  const kinds = operands.map((o) => ({ kind: o.kind === "imm" ? "imm" : isAlias(o) ? "alias" : "buf", t: o.kind === "buf" ? o.view.t : o.t }));
  const k = elementwiseKernel2(op, ct, target.view.dtype, target.view.t, kinds, nd, !target.dense);
  const bufs = [target.view.buf, ...ordered.filter((o) => !isAlias(o)).map((o) => o.view.buf)];
  if (k.sites.length) {
    params.push(ctx.q.errorCell(k.sites).word);
    bufs.push(null);
  }
  ctx.q.dispatch(k, params, bufs, groupsFor(n));
}

// src/backends/webgpu/program.ts
class ErrSink {
  sites = [];
  add = (s) => this.sites.push(s);
  slot(q, binding, word) {
    if (!this.sites.length)
      return { decls: [], bufs: [], access: [], params: [] };
    return { decls: [ERR_WGSL(binding, word)], bufs: [null], access: ["rw"], params: [q.errorCell(this.sites).word] };
  }
}
var classOf = (d) => gpuType(d);
function programFn(name, p, inputs, sink, accT = "f32") {
  const N = Math.max(p.shape.length, 1);
  const lines = [];
  const cls = [];
  p.code.forEach((c, i) => {
    if (c.k === "load") {
      const inp = inputs[c.input];
      if (!inp)
        throw new LoomValueError(`[fused] program loads input ${c.input} of ${inputs.length}`);
      const t = classOf(c.dtype);
      cls.push(t);
      if (inp.kind === "imm") {
        lines.push(`let t${i} = ${convertExpr(inp.t, t, inp.value)};`);
        return;
      }
      const terms = [inp.base, ...c.offset ? [`${c.offset}u`] : [], ...c.strides.flatMap((s, d) => s === 0 || p.shape[d] === 1 ? [] : [`c[${d}] * ${s}u`])];
      let v = `${inp.name}[${terms.join(" + ")}]`;
      if (inp.bitcastFrom)
        v = `bitcast<${inp.t}>(${v})`;
      lines.push(`let t${i} = ${convertExpr(inp.t, t, v)};`);
    } else if (c.k === "acc") {
      const t = classOf(c.dtype);
      cls.push(t);
      lines.push(`let t${i} = ${convertExpr(accT, t, "acc")};`);
    } else {
      const t = classOf(c.dtype);
      cls.push(t);
      const argDtypes = c.args.map((a) => ({ dtype: dtypeOf(p, a) }));
      const ct = computeType(c.dtype, argDtypes);
      const table = EW_WGSL[c.op.name];
      if (!table)
        throw new LoomValueError(`[fused] elementwise op ${c.op.name} has no WGSL`);
      const useT = ct === "i32" && !table.i ? "f32" : ct;
      const args = c.args.map((a) => convertExpr(cls[a], useT, `t${a}`));
      while (args.length < 3)
        args.push("0");
      const e = (useT === "f32" ? table.f : table.i)(args[0], args[1], args[2]);
      const chk = intFaults(c.op.name, c.dtype, useT, args[0], args[1], e, `r${i}`, sink.add);
      if (chk.pre)
        lines.push(chk.pre);
      lines.push(`let t${i} = ${storeExpr2(c.dtype, useT, chk.value)};`);
    }
  });
  const outT = cls[p.out];
  return { fn: `fn ${name}(c: array<u32, ${N}>, acc: ${accT}) -> ${outT} {
  ${lines.join(`
  `)}
  return t${p.out};
}`, outT };
}
function dtypeOf(p, i) {
  return p.code[i].dtype;
}
function unravelInto(c, flat, shape) {
  const nd = shape.length;
  if (nd === 0)
    return `var ${c}: array<u32, 1>;`;
  const lines = [`var ${c}: array<u32, ${nd}>;`, `var r_${c} = ${flat};`];
  for (let d = nd - 1;d > 0; d--)
    lines.push(`${c}[${d}] = r_${c} % ${shape[d]}u; r_${c} = r_${c} / ${shape[d]}u;`);
  lines.push(`${c}[0] = r_${c};`);
  return lines.join(`
  `);
}
function bindInputs(ops, out, first, paramWord, prebound) {
  const decls = [];
  const access = [];
  const bufs = [];
  const params = [];
  const bound = new Map;
  for (const o of ops)
    if (o.kind === "buf" && prebound?.has(o.view.buf))
      bound.set(o.view.buf, { name: prebound.get(o.view.buf), t: o.view.t });
  let w = paramWord;
  for (const o of ops) {
    if (o.kind === "imm") {
      access.push({ kind: "imm", name: "", t: o.t, base: "", value: o.t === "f32" ? `pf(${w}u)` : `pi(${w}u)` });
      params.push(scalarBits(o.t, o.value, "fused"));
      w++;
      continue;
    }
    const v = o.view;
    let b = bound.get(v.buf);
    if (!b) {
      if (v.buf === out.buf)
        b = { name: "out", t: out.t };
      else {
        const binding = first + bufs.length;
        b = { name: `in${binding}`, t: v.t };
        decls.push(`@group(0) @binding(${binding}) var<storage, read> in${binding}: array<${v.t}>;`);
        bufs.push(v.buf);
      }
      bound.set(v.buf, b);
    }
    access.push({ kind: "buf", name: b.name, t: v.t, base: `p(${w}u)`, bitcastFrom: b.t !== v.t ? b.t : undefined });
    params.push(v.offset);
    w++;
  }
  return { decls, access, bufs, params, nextWord: w };
}

// src/backends/webgpu/reduce.ts
var REDUCE_WGSL = {
  sum: {
    f32: { init: "0.0", step: (a, x) => `${a} + ${x}` },
    i32: { init: "0", step: (a, x) => `${a} + ${x}` }
  },
  amax: {
    f32: { init: "-f_inf()", step: (a, x) => `select(${a}, ${x}, ${x} > ${a} || is_nan(${x}))` },
    i32: { init: "i32(-2147483648)", step: (a, x) => `max(${a}, ${x})` }
  },
  amin: {
    f32: { init: "f_inf()", step: (a, x) => `select(${a}, ${x}, ${x} < ${a} || is_nan(${x}))` },
    i32: { init: "i32(2147483647)", step: (a, x) => `min(${a}, ${x})` }
  }
};
function unravel(src, nd, shapeWord, targets) {
  if (nd === 0 || targets.length === 0)
    return "";
  const lines = [`var r_${src} = ${src};`];
  for (let d = nd - 1;d >= 0; d--) {
    const add = targets.map((t) => `${t.v} += c * p(${t.stride(d)}u);`).join(" ");
    lines.push(d > 0 ? `{ let s = p(${shapeWord(d)}u); let c = r_${src} % s; r_${src} = r_${src} / s; ${add} }` : `{ let c = r_${src}; ${add} }`);
  }
  return lines.join(`
  `);
}
var WG = 64;
var PER = 16;
var TILE2 = WG * PER;
var SERIAL_MAX = 128;
function passSource(mode, fold, ct, outT, src, store) {
  const body = mode === "serial" ? `let o = ${linearIndex(64)};
  if (o >= p(0u)) { return; }
  ${src.row}
  var acc: ${ct} = ${fold.init};
  var blk: ${ct} = ${fold.init};
  for (var j = 0u; j < p(1u); j++) {
    ${src.load("j")}
    blk = ${fold.step("blk", "v")};
    if ((j & 7u) == 7u) { acc = ${fold.step("acc", "blk")}; blk = ${fold.init}; }
  }
  acc = ${fold.step("acc", "blk")};
  ${store("acc")}` : `let wg = wid.x + wid.y * nw.x;
  let G = p(2u);
  let o = wg / G;
  if (o >= p(0u)) { return; }
  ${src.row}
  let R = p(1u);
  let t0 = (wg - o * G) * ${TILE2}u;
  let tend = min(R, t0 + ${TILE2}u); // a bound only known at run time: the loop stays a loop (NIR unrolls constant ones)
  var acc: ${ct} = ${fold.init};
  for (var j = t0 + lid.x; j < tend; j += ${WG}u) {
    ${src.load("j")}
    acc = ${fold.step("acc", "v")};
  }
  sh[lid.x] = acc;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (lid.x < s) { let a = sh[lid.x]; let b = sh[lid.x + s]; sh[lid.x] = ${fold.step("a", "b")}; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    let r = sh[0];
    ${store ? store("r") : "out[wg] = r;"}
  }`;
  const text = `${src.decls}
${body}`;
  return `${PARAMS_WGSL}${WGSL_COMMON}${helpersFor(text)}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
${src.decls}
${mode === "tile" ? `var<workgroup> sh: array<${ct}, ${WG}>;` : ""}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  ${body}
}`;
}
function reduceRows(ctx, op, fold, ct, outN, R, src, out, store) {
  if (outN === 0)
    return;
  const last = { ...src, row: "", load: () => "" };
  let cur = src, n = R;
  let part = null;
  for (;; ) {
    const mode = n < SERIAL_MAX ? "serial" : "tile";
    const G = mode === "serial" ? 1 : Math.ceil(n / TILE2);
    const final = G === 1;
    const target = final ? out : ctx.temp(ct === "f32" ? "float32" : "int32", [outN * G], op);
    const access = ["rw", ...cur.bufs.map((b) => b ? "r" : "rw")];
    const source = passSource(mode, fold, ct, final ? out.t : ct, cur, final ? store : null);
    ctx.q.dispatch({ source, access }, [outN, n, G, ...cur.params], [target.buf, ...cur.bufs], mode === "serial" ? groupsFor(outN, WG) : outN * G);
    if (part)
      ctx.q.pool.release(part.buf);
    if (final)
      return;
    part = target;
    const keep = Math.ceil(G / TILE2) <= 1 || G < SERIAL_MAX ? last : { decls: "", bufs: [], params: [], row: "", load: () => "" };
    const b = 2 + keep.bufs.length;
    cur = {
      decls: `${keep.decls}
@group(0) @binding(${b}) var<storage, read> part: array<${ct}>;`,
      bufs: [...keep.bufs, part.buf],
      params: keep.params,
      row: "let pb = o * p(1u);",
      load: (j) => `let v = part[pb + ${j}];`
    };
    n = G;
  }
}
function stridedSource(x, ct, nk, nr) {
  const K = 4, KS = 4 + nk, RS = 4 + 2 * nk, RST = 4 + 2 * nk + nr;
  return {
    decls: `@group(0) @binding(2) var<storage, read> x: array<${x.t}>;`,
    bufs: [x.buf],
    params: [],
    row: `var base = p(3u);
  ${unravel("o", nk, (d) => K + d, [{ v: "base", stride: (d) => KS + d }])}`,
    load: (j) => `var off = base; ${unravel(j, nr, (d) => RS + d, [{ v: "off", stride: (d) => RST + d }])} let v = ${convertExpr(x.t, ct, "x[off]")};`
  };
}
function split(x, dims) {
  const keptDims = x.shape.map((_, i) => i).filter((i) => !dims.includes(i));
  const k = collapse3(keptDims.map((d) => x.shape[d]), [keptDims.map((d) => x.strides[d])]);
  const r = collapse3(dims.map((d) => x.shape[d]), [dims.map((d) => x.strides[d])]);
  padRank(k.shape, k.strides);
  padRank(r.shape, r.strides);
  return { ks: k.shape, kst: k.strides[0], rs: r.shape, rst: r.strides[0], outN: numelOf(k.shape), R: numelOf(r.shape) };
}
function launchReduce(ctx, op, x, dims, out) {
  const s = split(x, dims);
  const ct = computeType(out.dtype, [x]);
  const src = stridedSource(x, ct, s.ks.length, s.rs.length);
  const params = [x.offset, ...s.ks, ...s.kst, ...s.rs, ...s.rst];
  reduceRows(ctx, op, REDUCE_WGSL[op][ct], ct, s.outN, s.R, { ...src, params }, out, (acc) => `out[o] = ${storeExpr2(out.dtype, ct, acc)};`);
}
function launchArg(ctx, op, x, dims, out) {
  const s = split(x, dims);
  if (s.R === 0)
    throw new LoomIndexError(`[${op}] expected reduction dim ${dims[0] ?? 0} to have non-zero size`);
  if (s.outN === 0)
    return;
  const nk = s.ks.length, nr = s.rs.length;
  const K = 3, KS = 3 + nk, RS = 3 + 2 * nk, RST = 3 + 2 * nk + nr;
  const better = op === "argmax" ? ">" : "<";
  const isF = x.t === "f32";
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let o = ${linearIndex(64)};
  if (o >= p(0u)) { return; }
  var base = p(2u);
  ${unravel("o", nk, (d) => K + d, [{ v: "base", stride: (d) => KS + d }])}
  var best = 0u;
  var bv = x[base];
  for (var j = 1u; j < p(1u); j++) {
    ${isF ? "if (is_nan(bv)) { break; }" : ""}
    var off = base;
    ${unravel("j", nr, (d) => RS + d, [{ v: "off", stride: (d) => RST + d }])}
    let v = x[off];
    if (${isF ? "is_nan(v) || " : ""}v ${better} bv) { bv = v; best = j; }
  }
  out[o] = i32(best);
}`;
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [s.outN, s.R, x.offset, ...s.ks, ...s.kst, ...s.rs, ...s.rst], [out.buf, x.buf], groupsFor(s.outN, 64));
}
function launchCumsum(ctx, x, dim, reverse, out) {
  const nd = x.shape.length;
  const n = nd === 0 ? 1 : x.shape[dim];
  const outer = x.shape.map((_, i) => i).filter((i) => i !== dim);
  const ost = contiguous2(out.shape);
  const c = collapse3(outer.map((d) => x.shape[d]), [outer.map((d) => x.strides[d]), outer.map((d) => ost[d])]);
  const lanes = numelOf(c.shape);
  if (lanes === 0 || n === 0)
    return;
  const no = padRank(c.shape, c.strides);
  const ct = computeType(out.dtype, [x]);
  const S = 5, XS = 5 + no, OS = 5 + 2 * no;
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<${out.t}>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let l = ${linearIndex(64)};
  if (l >= p(0u)) { return; }
  var xb = p(2u);
  var ob = 0u;
  ${unravel("l", no, (d) => S + d, [{ v: "xb", stride: (d) => XS + d }, { v: "ob", stride: (d) => OS + d }])}
  let n = p(1u);
  var acc: ${ct} = ${ct === "f32" ? "0.0" : "0"};
  for (var s = 0u; s < n; s++) {
    let k = ${reverse ? "n - 1u - s" : "s"};
    acc = acc + ${convertExpr(x.t, ct, "x[xb + k * p(3u)]")};
    out[ob + k * p(4u)] = ${storeExpr2(out.dtype, ct, "acc")};
  }
}`;
  const xs = nd === 0 ? 0 : x.strides[dim], os = nd === 0 ? 0 : ost[dim];
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [lanes, n, x.offset, xs, os, ...c.shape, ...c.strides[0], ...c.strides[1]], [out.buf, x.buf], groupsFor(lanes, 64));
}

// src/backends/webgpu/matmul.ts
var TILE3 = 64;
var BK = 16;
function gemmKernel(g, nb, ep) {
  const ct = computeType(g.out.dtype, [g.a, g.b]);
  const zero = ct === "f32" ? "0.0" : "0";
  const vec = `vec4<${ct}>`;
  const B0 = 13;
  const batch = unravel("bz", nb, (d) => B0 + d, [
    { v: "aoff", stride: (d) => B0 + nb + d },
    { v: "boff", stride: (d) => B0 + 2 * nb + d }
  ]);
  const decl = [
    `@group(0) @binding(1) var<storage, read_write> out: array<${g.out.t}>;`,
    `@group(0) @binding(2) var<storage, read> A: array<${g.a.t}>;`,
    `@group(0) @binding(3) var<storage, read> B: array<${g.b.t}>;`
  ];
  const access = ["rw", "r", "r"];
  if (g.c) {
    decl.push(`@group(0) @binding(${access.length + 1}) var<storage, read> C0: array<${g.c.t}>;`);
    access.push("r");
  }
  if (g.bias) {
    decl.push(`@group(0) @binding(${access.length + 1}) var<storage, read> bias: array<${g.bias.t}>;`);
    access.push("r");
  }
  let v = "acc[i][j]";
  if (g.alpha !== undefined)
    v = `${v} * ${ct === "f32" ? "pf(9u)" : "pi(9u)"}`;
  if (g.c)
    v = `${v} + ${convertExpr(g.c.t, ct, "C0[p(10u) + o]")}`;
  if (g.bias)
    v = `${v} + ${convertExpr(g.bias.t, ct, "bias[p(11u) + gn * p(12u)]")}`;
  let store = `out[o] = ${storeExpr2(g.out.dtype, ct, v)};`;
  if (ep) {
    decl.push(...ep.decls);
    access.push(...ep.bufs.map((b) => b ? "r" : "rw"));
    store = `${unravelInto("ce", "o", ep.shape)}
      out[o] = epi(ce, ${storeExpr2(ep.accDtype, ct, "acc[i][j]")});`;
  }
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
${decl.join(`
`)}
${ep ? `${helpersFor(ep.fn)}
${ep.fn}` : ""}
var<workgroup> As: array<${ct}, ${TILE3 * BK}>;
var<workgroup> Bs: array<${ct}, ${TILE3 * BK}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let M = p(0u); let N = p(1u); let K = p(2u);
  let am = p(3u); let ak = p(4u); let bk = p(5u); let bn = p(6u);
  var aoff = p(7u); var boff = p(8u);
  let bz = wid.z;
  ${batch}
  let row0 = wid.y * ${TILE3}u;
  let col0 = wid.x * ${TILE3}u;
  let tid = lid.y * 16u + lid.x;
  var acc: array<${vec}, 4>;
  for (var k0 = 0u; k0 < K; k0 += ${BK}u) {
    for (var e = 0u; e < 4u; e++) {
      let idx = tid + e * 256u;
      let m = idx / ${BK}u; let ka = idx % ${BK}u;
      let gm = row0 + m; let gka = k0 + ka;
      var va: ${ct} = ${zero};
      if (gm < M && gka < K) { va = ${convertExpr(g.a.t, ct, "A[aoff + gm * am + gka * ak]")}; }
      As[ka * ${TILE3}u + m] = va;
      let kb = idx / ${TILE3}u; let nn = idx % ${TILE3}u;
      let gkb = k0 + kb; let gn = col0 + nn;
      var vb: ${ct} = ${zero};
      if (gkb < K && gn < N) { vb = ${convertExpr(g.b.t, ct, "B[boff + gkb * bk + gn * bn]")}; }
      Bs[kb * ${TILE3}u + nn] = vb;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${BK}u; kk++) {
      let ab = kk * ${TILE3}u + lid.y * 4u;
      let bb = kk * ${TILE3}u + lid.x * 4u;
      let bv = ${vec}(Bs[bb], Bs[bb + 1u], Bs[bb + 2u], Bs[bb + 3u]);
      acc[0] += As[ab] * bv;
      acc[1] += As[ab + 1u] * bv;
      acc[2] += As[ab + 2u] * bv;
      acc[3] += As[ab + 3u] * bv;
    }
    workgroupBarrier();
  }
  let obase = bz * M * N;
  for (var i = 0u; i < 4u; i++) {
    let gm = row0 + lid.y * 4u + i;
    if (gm >= M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let gn = col0 + lid.x * 4u + j;
      if (gn >= N) { break; }
      let o = obase + gm * N + gn;
      ${store}
    }
  }
}`;
  return { source, access };
}
function naiveKernel(g, nb, ep) {
  const t = gemmKernel(g, nb, ep);
  const ct = computeType(g.out.dtype, [g.a, g.b]);
  const head = t.source.slice(0, t.source.indexOf("var<workgroup>"));
  const from = t.source.indexOf(ep ? "var ce:" : "out[o] = ");
  const epi = t.source.slice(from, t.source.indexOf(";", t.source.indexOf("out[o] = ")) + 1).replaceAll("acc[i][j]", "acc");
  const source = `${head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let M = p(0u); let N = p(1u); let K = p(2u);
  let i = gid.x + gid.y * nw.x * 64u;
  if (i >= M * N) { return; }
  var aoff = p(7u); var boff = p(8u);
  let bz = wid.z;
  ${unravel("bz", nb, (d) => 13 + d, [{ v: "aoff", stride: (d) => 13 + nb + d }, { v: "boff", stride: (d) => 13 + 2 * nb + d }])}
  let gm = i / N; let gn = i % N;
  var acc: ${ct} = ${ct === "f32" ? "0.0" : "0"};
  let ar = aoff + gm * p(3u); let bc = boff + gn * p(6u);
  for (var k = 0u; k < K; k++) {
    acc += ${convertExpr(g.a.t, ct, "A[ar + k * p(4u)]")} * ${convertExpr(g.b.t, ct, "B[bc + k * p(5u)]")};
  }
  let o = bz * M * N + i;
  ${epi}
}`;
  return { source, access: t.access };
}
function regKernel(g, nb, ep) {
  const t = gemmKernel(g, nb, ep);
  const head = t.source.slice(0, t.source.indexOf("var<workgroup>")).replace("var<storage, read> B: array<f32>;", "var<storage, read> B: array<vec4<f32>>;");
  const from = t.source.indexOf(ep ? "var ce:" : "out[o] = ");
  const store = t.source.slice(from, t.source.indexOf(";", t.source.indexOf("out[o] = ")) + 1);
  const source = `${head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let M = p(0u); let N = p(1u); let K = p(2u);
  let nb4 = N / 4u;
  let i = gid.x + gid.y * nw.x * 64u;
  let n4 = i % nb4;
  let m0 = (i / nb4) * 8u;
  if (m0 >= M) { return; }
  var aoff = p(7u); var boff = p(8u);
  let bz = wid.z;
  ${unravel("bz", nb, (d) => 13 + d, [{ v: "aoff", stride: (d) => 13 + nb + d }, { v: "boff", stride: (d) => 13 + 2 * nb + d }])}
  var acc: array<vec4<f32>, 8>;
  let b0 = boff / 4u + n4; let bk4 = p(5u) / 4u; let am = p(3u); let ak = p(4u);
  ${Array.from({ length: 8 }, (_, r) => `let a${r} = aoff + min(m0 + ${r}u, M - 1u) * am;`).join(`
  `)}
  for (var k = 0u; k < K; k++) {
    let bv = B[b0 + k * bk4];
    let kk = k * ak;
    ${Array.from({ length: 8 }, (_, r) => `acc[${r}] += A[a${r} + kk] * bv;`).join(`
    `)}
  }
  for (var i = 0u; i < 8u; i++) {
    let gm = m0 + i;
    if (gm >= M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let gn = n4 * 4u + j;
      let o = bz * M * N + gm * N + gn;
      ${store}
    }
  }
}`;
  return { source, access: t.access };
}
function launchGemm(ctx, g) {
  const bcol = collapse3(g.batch, [g.aBatch, g.bBatch]);
  const nbatch = bcol.shape.reduce((p, s) => p * s, 1);
  if (g.M === 0 || g.N === 0 || nbatch === 0)
    return;
  if (nbatch > 65535)
    throw new LoomValueError(`[matmul] ${nbatch} batch matrices exceed the webgpu dispatch limit (65535)`);
  const nb = padRank(bcol.shape, bcol.strides);
  const tiled = g.M >= 16 && g.N >= 16 && g.M * g.N * g.K >= 1 << 18;
  const ct = computeType(g.out.dtype, [g.a, g.b]);
  const params = [
    g.M,
    g.N,
    g.K,
    g.am,
    g.ak,
    g.bk,
    g.bn,
    g.a.offset,
    g.b.offset,
    g.alpha === undefined ? 0 : scalarBits(ct, g.alpha, "matmul"),
    g.c ? g.c.offset : 0,
    g.bias ? g.bias.offset : 0,
    g.bias ? g.bias.strides[0] ?? 0 : 0,
    ...bcol.shape,
    ...bcol.strides[0],
    ...bcol.strides[1]
  ];
  const bufs = [g.out.buf, g.a.buf, g.b.buf, ...g.c ? [g.c.buf] : [], ...g.bias ? [g.bias.buf] : []];
  const ep = g.epi?.(4, params.length);
  if (ep) {
    params.push(...ep.params);
    bufs.push(...ep.bufs);
  }
  const reg = ctx.q.ctx.software && g.M * g.N * g.K >= 1 << 15 && g.a.t === "f32" && g.b.t === "f32" && ct === "f32" && g.bn === 1 && g.N % 4 === 0 && g.bk % 4 === 0 && g.b.offset % 4 === 0 && g.bBatch.every((s) => s % 4 === 0);
  if (reg) {
    const groups = Math.ceil(Math.ceil(g.M / 8) * (g.N / 4) / 64);
    ctx.q.dispatch(regKernel(g, nb, ep), params, bufs, [Math.min(groups, 65535), Math.ceil(groups / 65535), nbatch]);
  } else if (tiled)
    ctx.q.dispatch(gemmKernel(g, nb, ep), params, bufs, [Math.ceil(g.N / TILE3), Math.ceil(g.M / TILE3), nbatch]);
  else {
    const groups = Math.ceil(g.M * g.N / 64);
    ctx.q.dispatch(naiveKernel(g, nb, ep), params, bufs, [Math.min(groups, 65535), Math.ceil(groups / 65535), nbatch]);
  }
}
function launchMatmul(ctx, a, b, out, epi) {
  const M = out.shape[out.shape.length - 2], N = out.shape[out.shape.length - 1];
  const K = a.shape[a.shape.length - 1];
  const batch = out.shape.slice(0, -2);
  const bstr = (v) => {
    const vb = v.shape.slice(0, -2), sb = v.strides.slice(0, -2);
    const off = batch.length - vb.length;
    return batch.map((s, i) => i < off || vb[i - off] === 1 ? 0 : sb[i - off]);
  };
  launchGemm(ctx, {
    a,
    b,
    out,
    M,
    N,
    K,
    am: a.strides[a.strides.length - 2],
    ak: a.strides[a.strides.length - 1],
    bk: b.strides[b.strides.length - 2],
    bn: b.strides[b.strides.length - 1],
    batch,
    aBatch: bstr(a),
    bBatch: bstr(b),
    epi
  });
}

// src/backends/webgpu/fused.ts
var F = EW_WGSL;
var R = (d, v) => storeExpr2(d, "f32", v);
function source(outT, decls, fns, wg, body) {
  const text = `${fns.join(`
`)}
${body}`;
  return `${PARAMS_WGSL}${WGSL_COMMON}${helpersFor(text)}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
${decls.join(`
`)}
${fns.join(`
`)}
@compute @workgroup_size(${wg})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(wg)};
  ${body}
}`;
}
var accessOf = (bufs) => ["rw", ...bufs.map((b) => b ? "r" : "rw")];
var scalarOf = (a) => a.kind === "imm" ? convertExpr(a.t, "f32", a.value) : convertExpr(a.t, "f32", `${a.name}[${a.base}]`);
function loader(name, a, v) {
  if (a.kind === "imm" || !v)
    return `fn ${name}(f: u32) -> f32 { return ${scalarOf(a)}; }`;
  const dense = v.strides.every((s, d) => v.shape[d] === 1 || s === contiguous2(v.shape)[d]);
  if (dense)
    return `fn ${name}(f: u32) -> f32 { return ${convertExpr(a.t, "f32", `${a.name}[${a.base} + f]`)}; }`;
  const terms = v.strides.map((s, d) => s === 0 || v.shape[d] === 1 ? "" : ` + c[${d}] * ${s}u`).join("");
  return `fn ${name}(f: u32) -> f32 {
  ${unravelInto("c", "f", v.shape)}
  return ${convertExpr(a.t, "f32", `${a.name}[${a.base}${terms}]`)};
}`;
}
function operands(ctx, ins) {
  return ins.map((t) => ctx.operand(t, "fused"));
}
var viewOf2 = (o) => o.kind === "buf" ? o.view : null;
var fused_elementwise2 = (ctx, ins, a, out) => {
  const n = numelOf(out.shape);
  if (n === 0)
    return;
  const b = bindInputs(operands(ctx, ins), out, 2, 1);
  const sink = new ErrSink;
  const { fn } = programFn("prog", a.program, b.access, sink);
  const e = sink.slot(ctx.q, 2 + b.bufs.length, 1 + b.params.length);
  const body = `if (i >= p(0u)) { return; }
  ${unravelInto("c", "i", a.program.shape)}
  out[i] = prog(c, 0.0);`;
  const bufs = [...b.bufs, ...e.bufs];
  ctx.q.dispatch({ source: source(out.t, [...b.decls, ...e.decls], [fn], 256, body), access: accessOf(bufs) }, [n, ...b.params, ...e.params], [out.buf, ...bufs], groupsFor(n));
};
var fused_reduce2 = (ctx, ins, a, out) => {
  const shape = a.prologue.shape;
  const kept = shape.map((_, d) => d).filter((d) => !a.dim.includes(d));
  const keptShape = kept.map((d) => shape[d]), redShape = a.dim.map((d) => shape[d]);
  const outN = numelOf(keptShape), R_ = numelOf(redShape);
  if (outN === 0)
    return;
  const b = bindInputs(operands(ctx, ins), out, 2, 3);
  const sink = new ErrSink;
  const pro = programFn("pro", a.prologue, b.access, sink);
  const ct = computeType(a.dtype, [{ dtype: a.prologue.code[a.prologue.out].dtype }]);
  const fold = REDUCE_WGSL[a.reduce.name][ct];
  const accD = a.dtype;
  const epi = a.epilogue ? programFn("epi", a.epilogue, b.access, sink, classOf(accD)) : null;
  const e = sink.slot(ctx.q, 2 + b.bufs.length, 3 + b.params.length);
  const set = (c, v, dims, sh) => {
    if (!sh.length)
      return "";
    const lines = [`var r_${v} = ${v};`];
    for (let k = sh.length - 1;k >= 0; k--)
      lines.push(k > 0 ? `${c}[${dims[k]}] = r_${v} % ${sh[k]}u; r_${v} = r_${v} / ${sh[k]}u;` : `${c}[${dims[0]}] = r_${v};`);
    return lines.join(" ");
  };
  const src = {
    decls: [...b.decls, ...e.decls, pro.fn, ...epi ? [epi.fn] : []].join(`
`),
    bufs: [...b.bufs, ...e.bufs],
    params: [...b.params, ...e.params],
    row: `var c: array<u32, ${Math.max(shape.length, 1)}>;
  ${set("c", "o", kept, keptShape)}`,
    load: (j) => `${set("c", j, a.dim, redShape)} let v = ${convertExpr(pro.outT, ct, "pro(c, 0.0)")};`
  };
  const store = (acc) => {
    const result = storeExpr2(accD, ct, acc);
    return epi ? `${unravelInto("ce", "o", a.epilogue.shape)}
  out[o] = epi(ce, ${result});` : `out[o] = ${result};`;
  };
  reduceRows(ctx, "fused_reduce", fold, ct, outN, R_, src, out, store);
};
var fused_matmul2 = (ctx, ins, a, out) => {
  const ops = operands(ctx, ins);
  const [x, y] = [viewOf2(ops[0]), viewOf2(ops[1])];
  if (!x || !y)
    throw new Error("[fused_matmul] operands must be tensors");
  const epi = (firstBinding, firstWord) => {
    const b = bindInputs(ops, out, firstBinding, firstWord, new Map([[x.buf, "A"], [y.buf, "B"]]));
    const sink = new ErrSink;
    const { fn } = programFn("epi", a.epilogue, b.access, sink, classOf(a.dtype));
    const e = sink.slot(ctx.q, firstBinding + b.bufs.length, firstWord + b.params.length);
    return { decls: [...b.decls, ...e.decls], fn, shape: a.epilogue.shape, accDtype: a.dtype, bufs: [...b.bufs, ...e.bufs], params: [...b.params, ...e.params] };
  };
  launchMatmul(ctx, x, y, { ...out, shape: a.shape, dtype: a.dtype }, epi);
};
function rowsOf(shape, dim) {
  const outer = shape.map((_, d) => d).filter((d) => d !== dim);
  const os = outer.map((d) => shape[d]);
  const lines = [`var c: array<u32, ${Math.max(shape.length, 1)}>;`, "var rr = row;"];
  for (let k = outer.length - 1;k >= 0; k--)
    lines.push(k > 0 ? `c[${outer[k]}] = rr % ${os[k]}u; rr = rr / ${os[k]}u;` : `c[${outer[0]}] = rr;`);
  const st = contiguous2(shape);
  const base = outer.map((d) => `c[${d}] * ${st[d]}u`).join(" + ") || "0u";
  return { rows: numelOf(os), setup: lines.join(`
  `), base, inner: st[dim] };
}
function rowSum(acc, n, pre, term) {
  return `var ${acc} = 0.0;
  {
    var part = 0.0;
    for (var j = 0u; j < ${n}u; j++) { ${pre} part = part + ${term}; if ((j & 31u) == 31u) { ${acc} = ${acc} + part; part = 0.0; } }
    ${acc} = ${acc} + part;
  }`;
}
var fused_softmax2 = (ctx, ins, a, out) => {
  const shape = a.prologue.shape, D = out.dtype, n = shape[a.dim];
  const { rows, setup, base, inner } = rowsOf(shape, a.dim);
  if (rows === 0 || n === 0)
    return;
  const b = bindInputs(operands(ctx, ins), out, 2, 1);
  const sink = new ErrSink;
  const pro = programFn("pro", a.prologue, b.access, sink);
  const e = sink.slot(ctx.q, 2 + b.bufs.length, 1 + b.params.length);
  const v = (j) => `c[${a.dim}] = ${j}; let v = ${convertExpr(pro.outT, "f32", "pro(c, 0.0)")};`;
  const body = `let row = i;
  if (row >= p(0u)) { return; }
  ${setup}
  let ob = ${base};
  var m = -f_inf();
  for (var j = 0u; j < ${n}u; j++) { ${v("j")} m = ${REDUCE_WGSL.amax.f32.step("m", "v")}; }
  m = ${R(D, "m")};
  ${rowSum("z", n, v("j"), R(D, F.exp.f(R(D, F.sub.f("v", "m", "")), "", "")))}
  z = ${R(D, "z")};
  for (var j = 0u; j < ${n}u; j++) {
    ${v("j")}
    let e = ${R(D, F.exp.f(R(D, F.sub.f("v", "m", "")), "", ""))};
    out[ob + j * ${inner}u] = ${R(D, F.div.f("e", "z", ""))};
  }`;
  const bufs = [...b.bufs, ...e.bufs];
  ctx.q.dispatch({ source: source(out.t, [...b.decls, ...e.decls], [pro.fn], 64, body), access: accessOf(bufs) }, [rows, ...b.params, ...e.params], [out.buf, ...bufs], groupsFor(rows, 64));
};
function norm2(kind) {
  return (ctx, ins, a, out) => {
    const x = ins[0];
    const N = numelOf(x.shape.slice(x.shape.length - a.dims));
    const rows = N === 0 ? 0 : numelOf(x.shape) / N;
    if (rows === 0)
      return;
    const D = out.dtype;
    const ops = operands(ctx, ins);
    const b = bindInputs(ops, out, 2, 1);
    const nConst = kind === "layer" ? 3 : 1;
    const fns = [loader("ldx", b.access[0], viewOf2(ops[0]))];
    const wIdx = nConst + 2, bIdx = wIdx + (a.has_weight ? 1 : 0);
    if (a.has_weight)
      fns.push(loader("ldw", b.access[wIdx], viewOf2(ops[wIdx])));
    if (a.has_bias)
      fns.push(loader("ldb", b.access[bIdx], viewOf2(ops[bIdx])));
    const c1 = scalarOf(b.access[1]), c2 = scalarOf(b.access[2]), cv = scalarOf(b.access[nConst]), ce = scalarOf(b.access[nConst + 1]);
    const rs = (s, c) => R(D, F.rsqrt.f(R(D, F.add.f(R(D, F.div.f(R(D, s), c, "")), ce, "")), "", ""));
    let y = kind === "layer" ? R(D, F.mul.f("d", "rs", "")) : R(D, F.mul.f("xv", "rs", ""));
    if (a.has_weight)
      y = R(D, F.mul.f(y, "ldw(j)", ""));
    if (a.has_bias)
      y = R(D, F.add.f(y, "ldb(j)", ""));
    const centred = `let d0 = ${R(D, F.sub.f("ldx(o + j)", "m0", ""))}; let d = ${R(D, F.sub.f("d0", "cm", ""))};`;
    const body = kind === "layer" ? `if (i >= p(0u)) { return; }
  let o = i * ${N}u;
  ${rowSum("s1", N, "", "ldx(o + j)")}
  let m0 = ${R(D, F.div.f(R(D, "s1"), c1, ""))};
  ${rowSum("s2", N, "", R(D, F.sub.f("ldx(o + j)", "m0", "")))}
  let cm = ${R(D, F.div.f(R(D, "s2"), c2, ""))};
  ${rowSum("s3", N, centred, R(D, F.mul.f("d", "d", "")))}
  let rs = ${rs("s3", cv)};
  for (var j = 0u; j < ${N}u; j++) { ${centred} out[o + j] = ${y}; }` : `if (i >= p(0u)) { return; }
  let o = i * ${N}u;
  ${rowSum("s", N, "let xv = ldx(o + j);", R(D, F.mul.f("xv", "xv", "")))}
  let rs = ${rs("s", cv)};
  for (var j = 0u; j < ${N}u; j++) { let xv = ldx(o + j); out[o + j] = ${y}; }`;
    ctx.q.dispatch({ source: source(out.t, b.decls, fns, 64, body), access: ["rw", ...b.bufs.map(() => "r")] }, [rows, ...b.params], [out.buf, ...b.bufs], groupsFor(rows, 64));
  };
}
var fused_lora_linear2 = (ctx, ins, a, out) => {
  const ops = operands(ctx, ins);
  const [x, wt, at, bt] = ops.slice(0, 4).map(viewOf2);
  const D = out.dtype;
  const mmShape = (p, q) => [...out.shape.slice(0, -2), p.shape[p.shape.length - 2], q.shape[q.shape.length - 1]];
  const Y = ctx.temp(D, out.shape, "fused_lora_linear");
  const H = ctx.temp(D, mmShape(x, at), "fused_lora_linear");
  const Dl = ctx.temp(D, out.shape, "fused_lora_linear");
  launchMatmul(ctx, x, wt, Y);
  launchMatmul(ctx, x, at, H);
  launchMatmul(ctx, H, bt, Dl);
  const n = numelOf(out.shape), N = out.shape[out.shape.length - 1];
  const rest = [{ kind: "buf", view: Y }, { kind: "buf", view: Dl }, ops[4], ...a.has_bias ? [ops[5]] : []];
  const b = bindInputs(rest, out, 2, 1);
  const fns = [loader("ldy", b.access[0], Y), loader("ldd", b.access[1], Dl), `fn lds() -> f32 { return ${scalarOf(b.access[2])}; }`];
  if (a.has_bias)
    fns.push(loader("ldb", b.access[3], viewOf2(rest[3])));
  const base = a.has_bias ? R(D, F.add.f("ldy(i)", `ldb(i % ${N}u)`, "")) : "ldy(i)";
  const body = `if (i >= p(0u)) { return; }
  out[i] = ${R(D, F.add.f(base, R(D, F.mul.f("ldd(i)", "lds()", "")), ""))};`;
  ctx.q.dispatch({ source: source(out.t, b.decls, fns, 256, body), access: ["rw", ...b.bufs.map(() => "r")] }, [n, ...b.params], [out.buf, ...b.bufs], groupsFor(n));
  for (const t of [Y, H, Dl])
    ctx.q.pool.release(t.buf);
};
var fused_attention2 = (ctx, ins, a, out) => {
  const ops = operands(ctx, ins);
  const [q, kt, v] = ops.slice(0, 3).map(viewOf2);
  const sshape = a.prologue.shape, nd = sshape.length;
  const L = sshape[nd - 2], S = sshape[nd - 1], E = q.shape[q.shape.length - 1];
  const batch = sshape.slice(0, -2);
  const rows = numelOf(sshape.slice(0, -1));
  const D = out.dtype;
  const P = ctx.temp(D, sshape, "fused_attention");
  if (rows > 0 && S > 0) {
    const b = bindInputs(ops, P, 2, 1);
    const sink = new ErrSink;
    const pro = programFn("pro", a.prologue, b.access, sink, classOf(D));
    const e = sink.slot(ctx.q, 2 + b.bufs.length, 1 + b.params.length);
    const bs = (t) => broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch);
    const qb = bs(q), kb = bs(kt);
    const qa = b.access[0], ka = b.access[1];
    const qoff = batch.map((_, d) => qb[d] ? ` + c[${d}] * ${qb[d]}u` : "").join("");
    const koff = batch.map((_, d) => kb[d] ? ` + c[${d}] * ${kb[d]}u` : "").join("");
    const [qm, qe] = q.strides.slice(-2);
    const [ke, ks] = kt.strides.slice(-2);
    const load = (acc, idx) => convertExpr(acc.t, "f32", `${acc.name}[${idx}]`);
    const body = `let row = i;
  if (row >= p(0u)) { return; }
  ${unravelInto("c", `row * ${S}u`, sshape)}
  let qo = ${qa.base}${qoff} + c[${nd - 2}] * ${qm}u;
  let ko = ${ka.base}${koff};
  let po = row * ${S}u;
  var m = -f_inf();
  for (var s = 0u; s < ${S}u; s++) {
    var acc = 0.0;
    for (var e = 0u; e < ${E}u; e++) { acc = acc + ${load(qa, `qo + e * ${qe}u`)} * ${load(ka, `ko + e * ${ke}u + s * ${ks}u`)}; }
    c[${nd - 1}] = s;
    let v = pro(c, ${R(D, "acc")});
    out[po + s] = v;
    m = ${REDUCE_WGSL.amax.f32.step("m", "v")};
  }
  m = ${R(D, "m")};
  ${rowSum("z", S, `let e = ${R(D, F.exp.f(R(D, F.sub.f("out[po + j]", "m", "")), "", ""))}; out[po + j] = e;`, "e")}
  z = ${R(D, "z")};
  for (var s = 0u; s < ${S}u; s++) { out[po + s] = ${R(D, F.div.f("out[po + s]", "z", ""))}; }`;
    const bufs = [...b.bufs, ...e.bufs];
    ctx.q.dispatch({ source: source(P.t, [...b.decls, ...e.decls], [pro.fn], 64, body), access: accessOf(bufs) }, [rows, ...b.params, ...e.params], [P.buf, ...bufs], groupsFor(rows, 64));
  }
  launchMatmul(ctx, P, v, out);
  ctx.q.pool.release(P.buf);
};
var FUSED_KERNELS = {
  fused_elementwise: fused_elementwise2,
  fused_reduce: fused_reduce2,
  fused_matmul: fused_matmul2,
  fused_softmax: fused_softmax2,
  fused_layer_norm: norm2("layer"),
  fused_rms_norm: norm2("rms"),
  fused_lora_linear: fused_lora_linear2,
  fused_attention: fused_attention2
};

// src/backends/webgpu/kernels.ts
function copyInto(ctx, src, out, shape = src.shape) {
  launchElementwise(ctx, "contiguous", [{ kind: "buf", view: src }], shape, { view: out, dense: true });
}
function sliceOf(out, dim, start, len, step = 1) {
  const st = contiguous2(out.shape);
  const shape = [...out.shape];
  shape[dim] = len;
  const strides = [...st];
  strides[dim] = st[dim] * step;
  return { ...out, shape, strides, offset: out.offset + start * st[dim] };
}
function laneKernel(ctx, op, a, size, ins, lanes, strideLists, body, outT, extra) {
  const nd = lanes.length;
  const names = ["ox", "oi", "os", "oo"].slice(0, strideLists.length);
  const cellWord = 1 + extra.length;
  const E = cellWord + 1;
  const S = E;
  const targets = names.map((v, k) => ({ v, stride: (d) => S + nd * (k + 1) + d }));
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
${ins}
${ERR_WGSL(5, cellWord)}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  ${names.map((v) => `var ${v} = 0u;`).join(" ")}
  ${unravel("i", nd, (d) => S + d, targets)}
  ${body}
}`;
  const cell = ctx.q.errorCell([(v) => indexError(op, v, size, a.dim, a.caller)]);
  return { source, params: [numelOf(lanes), ...extra, cell.word, ...lanes, ...strideLists.flat()] };
}
var gather2 = (ctx, [x, index], a, out) => {
  const dim = a.dim;
  const xs = x.strides.map((s, d) => d === dim ? 0 : s);
  const ost = contiguous2(out.shape);
  const { source, params } = laneKernel(ctx, "gather", a, x.shape[dim], `@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, index.shape, [xs, index.strides, ost], `let v = ix[p(4u) + oi];
  let size = i32(p(1u));
  if (v < 0 || v >= size) { report(1u, v); return; }
  let k = u32(v);
  out[i] = x[p(2u) + ox + k * p(3u)];`, out.t, [x.shape[dim], x.offset, x.strides[dim], index.offset]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, x.buf, index.buf, index.buf, null], groupsFor(numelOf(index.shape), 64));
};
var scatter_add2 = (ctx, [x, index, src], a, out) => {
  copyInto(ctx, x, out);
  const dim = a.dim;
  const lanes = index.shape.map((s, d) => d === dim ? 1 : s);
  const ost = contiguous2(out.shape).map((s, d) => d === dim ? 0 : s);
  const ct = out.t;
  const { source, params } = laneKernel(ctx, "scatter_add", a, x.shape[dim], `@group(0) @binding(2) var<storage, read> src: array<${src.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, lanes, [lanes.map(() => 0), index.strides, src.strides, ost], `let size = i32(p(1u));
  for (var j = 0u; j < p(2u); j++) {
    let v = ix[p(3u) + oi + j * p(4u)];
    if (v < 0 || v >= size) { report(1u, v); return; }
    let k = u32(v);
    let t = oo + k * p(7u);
    out[t] = ${storeExpr2(out.dtype, ct, `out[t] + ${ct}(src[p(5u) + os + j * p(6u)])`)};
  }`, out.t, [x.shape[dim], index.shape[dim] ?? 1, index.offset, index.strides[dim] ?? 0, src.offset, src.strides[dim] ?? 0, contiguous2(out.shape)[dim] ?? 0]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, src.buf, index.buf, index.buf, null], groupsFor(numelOf(lanes), 64));
};
var index_select2 = (ctx, [x, index], a, out) => {
  const dim = a.dim;
  const xs = x.strides.map((s, d) => d === dim ? 0 : s);
  const pos = out.shape.map((_, d) => d === dim ? 1 : 0);
  const { source, params } = laneKernel(ctx, "index_select", a, x.shape[dim], `@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, out.shape, [xs, pos], `let v = ix[p(4u) + oi * p(5u)];
  let size = i32(p(1u));
  if (v < 0 || v >= size) { report(1u, v); return; }
  let k = u32(v);
  out[i] = x[p(2u) + ox + k * p(3u)];`, out.t, [x.shape[dim], x.offset, x.strides[dim], index.offset, index.strides[0] ?? 0]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, x.buf, index.buf, index.buf, null], groupsFor(numelOf(out.shape), 64));
};
var index_add2 = (ctx, [x, index, src], a, out) => {
  copyInto(ctx, x, out);
  const dim = a.dim;
  const lanes = src.shape.map((s, d) => d === dim ? 1 : s);
  const ost = contiguous2(out.shape).map((s, d) => d === dim ? 0 : s);
  const ct = out.t;
  const { source, params } = laneKernel(ctx, "index_add", a, x.shape[dim], `@group(0) @binding(2) var<storage, read> src: array<${src.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, lanes, [lanes.map(() => 0), lanes.map(() => 0), src.strides, ost], `let size = i32(p(1u));
  for (var j = 0u; j < p(2u); j++) {
    let v = ix[p(3u) + j * p(4u)];
    if (v < 0 || v >= size) { report(1u, v); return; }
    let k = u32(v);
    let t = oo + k * p(7u);
    out[t] = ${storeExpr2(out.dtype, ct, `out[t] + ${ct}(src[p(5u) + os + j * p(6u)])`)};
  }`, out.t, [x.shape[dim], numelOf(index.shape), index.offset, index.strides[0] ?? 0, src.offset, src.strides[dim], contiguous2(out.shape)[dim]]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, src.buf, index.buf, index.buf, null], groupsFor(numelOf(lanes), 64));
};
var tri2 = (ctx, [x], a, out) => {
  const nd = x.shape.length;
  const R = x.shape[nd - 2], C = x.shape[nd - 1];
  const n = numelOf(x.shape);
  if (n === 0)
    return;
  const zero = x.t === "f32" ? "0.0" : "0";
  const keep = a.upper ? "i32(c) - i32(r) >= pi(3u)" : "i32(c) - i32(r) <= pi(3u)";
  const source = `${PARAMS_WGSL}
@group(0) @binding(1) var<storage, read_write> out: array<${out.t}>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  var ox = p(4u);
  ${unravel("i", nd, (d) => 5 + d, [{ v: "ox", stride: (d) => 5 + nd + d }])}
  let c = i % p(2u);
  let r = (i / p(2u)) % p(1u);
  out[i] = select(${zero}, x[ox], ${keep});
}`;
  const diag = new Int32Array([a.diagonal]);
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [n, R, C, new Uint32Array(diag.buffer)[0], x.offset, ...x.shape, ...x.strides], [out.buf, x.buf], groupsFor(n, 64));
};
var cat2 = (ctx, ins, a, out) => {
  let start = 0;
  for (const x of ins) {
    const len = x.shape[a.dim];
    if (len > 0)
      launchElementwise(ctx, "contiguous", [{ kind: "buf", view: x }], x.shape, { view: sliceOf(out, a.dim, start, len), dense: false });
    start += len;
  }
};
var slice_backward2 = (ctx, [g], a, out) => {
  ctx.q.clear(out.buf, numelOf(out.shape) * 4);
  const len = g.shape[a.dim];
  if (len > 0)
    launchElementwise(ctx, "contiguous", [{ kind: "buf", view: g }], g.shape, { view: sliceOf(out, a.dim, a.start, len, a.step), dense: false });
};
var matmul2 = (ctx, [a, b], _attrs, out) => launchMatmul(ctx, a, b, out);
function asMatrix(ctx, x) {
  const lead = x.shape.slice(0, -1);
  const M = numelOf(lead);
  const c = collapse3(lead, [x.strides.slice(0, -1)]);
  if (c.shape.length <= 1)
    return { v: x, M, rs: c.strides[0][0] ?? 0, temp: null };
  const t = ctx.temp(x.dtype, x.shape, "lora_linear");
  copyInto(ctx, x, t);
  return { v: t, M, rs: x.shape[x.shape.length - 1], temp: t };
}
var lora_linear2 = (ctx, [x, W, A, B, bias], a, out) => {
  const fin = x.shape[x.shape.length - 1], fout = W.shape[0], r = A.shape[0];
  const xm = asMatrix(ctx, x);
  const M = xm.M;
  if (M === 0 || fout === 0)
    return;
  const common = { batch: [], aBatch: [], bBatch: [] };
  const Y = ctx.temp(out.dtype, [M, fout], "lora_linear");
  const H = ctx.temp(out.dtype, [M, r], "lora_linear");
  const xk = xm.v.strides[xm.v.strides.length - 1];
  launchGemm(ctx, { ...common, a: xm.v, b: W, out: Y, M, N: fout, K: fin, am: xm.rs, ak: xk, bk: W.strides[1], bn: W.strides[0] });
  if (r > 0)
    launchGemm(ctx, { ...common, a: xm.v, b: A, out: H, M, N: r, K: fin, am: xm.rs, ak: xk, bk: A.strides[1], bn: A.strides[0] });
  else
    ctx.q.clear(H.buf, 4);
  if (r === 0) {
    launchElementwise(ctx, "add", [{ kind: "buf", view: Y }, bias && a.has_bias ? { kind: "buf", view: { ...bias, shape: [M, fout], strides: [0, bias.strides[0]] } } : { kind: "imm", t: out.t, dtype: out.dtype, value: 0 }], [M, fout], { view: out, dense: true });
  } else {
    launchGemm(ctx, {
      ...common,
      a: H,
      b: B,
      out,
      M,
      N: fout,
      K: r,
      am: r,
      ak: 1,
      bk: B.strides[1],
      bn: B.strides[0],
      alpha: a.scaling,
      c: Y,
      bias: a.has_bias ? bias : undefined
    });
  }
  ctx.q.pool.release(Y.buf);
  ctx.q.pool.release(H.buf);
  if (xm.temp)
    ctx.q.pool.release(xm.temp.buf);
};
var argmax2 = (ctx, [x], a, out) => argLaunch(ctx, "argmax", x, a, out);
var argmin2 = (ctx, [x], a, out) => argLaunch(ctx, "argmin", x, a, out);
function argLaunch(ctx, op, x, a, out) {
  const nd = x.shape.length;
  const dims = a.dim === null || nd === 0 ? x.shape.map((_, i) => i) : [normalizeDim(op, a.dim, nd)];
  launchArg(ctx, op, x, dims, out);
}
var cumsum2 = (ctx, [x], a, out) => {
  const nd = x.shape.length;
  launchCumsum(ctx, x, nd === 0 ? 0 : normalizeDim("cumsum", a.dim, nd), a.reverse, out);
};
var argsort2 = (ctx, [x0], a, out) => {
  const x = rank1(x0);
  const dim = a.dim;
  const n = x.shape[dim];
  const ost = contiguous2(x.shape.map((s, d) => d === dim ? a.k : s));
  const outer = x.shape.map((_, d) => d).filter((d) => d !== dim);
  const c = collapse3(outer.map((d) => x.shape[d]), [outer.map((d) => x.strides[d]), outer.map((d) => ost[d])]);
  const lanes = numelOf(c.shape);
  const total = lanes * n;
  if (total === 0 || a.k === 0)
    return;
  const no = padRank(c.shape, c.strides);
  const S = 6, XS = 6 + no, OS = 6 + 2 * no;
  const isF = x.t === "f32";
  const less = isF ? "(!is_nan(p) && (is_nan(q) || p < q))" : "(p < q)";
  const same = isF ? "((is_nan(p) && is_nan(q)) || p == q)" : "(p == q)";
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
fn less(p: ${x.t}, q: ${x.t}) -> bool { return ${less}; }
fn same(p: ${x.t}, q: ${x.t}) -> bool { return ${same}; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  let n = p(1u);
  let l = i / n;
  let j = i % n;
  var xb = p(2u);
  var ob = 0u;
  ${unravel("l", no, (d) => S + d, [{ v: "xb", stride: (d) => XS + d }, { v: "ob", stride: (d) => OS + d }])}
  let xs = p(3u);
  let v = x[xb + j * xs];
  var r = 0u;
  for (var m = 0u; m < n; m++) {
    let w = x[xb + m * xs];
    if (${a.descending ? "less(v, w)" : "less(w, v)"} || (m < j && same(w, v))) { r++; }
  }
  if (r < p(5u)) { out[ob + r * p(4u)] = i32(j); }
}`;
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [total, n, x.offset, x.strides[dim], ost[dim], a.k, ...c.shape, ...c.strides[0], ...c.strides[1]], [out.buf, x.buf], groupsFor(total, 64));
};
var rank1 = (v) => v.shape.length ? v : { ...v, shape: [1], strides: [0] };
var atLeast1d = (launch) => (ctx, ins, a, out) => launch(ctx, ins.map(rank1), a, rank1(out));
var KERNELS = {
  matmul: matmul2,
  gather: atLeast1d(gather2),
  scatter_add: atLeast1d(scatter_add2),
  index_select: atLeast1d(index_select2),
  index_add: atLeast1d(index_add2),
  tri: tri2,
  cat: cat2,
  slice_backward: slice_backward2,
  lora_linear: lora_linear2,
  argmax: argmax2,
  argmin: argmin2,
  cumsum: cumsum2,
  argsort: argsort2
};
function checkRank(op, shape, max = 12) {
  if (shape.length > max)
    throw new LoomShapeError(`[${op}] tensors of rank ${shape.length} exceed the webgpu kernels' limit of ${max}`);
}

// src/backends/webgpu/storage.ts
var MAX_CELLS = 64;

class GpuStorage {
  buf;
  dtype;
  length;
  q;
  host = null;
  cells = [];
  constructor(buf, dtype, length, q, owned = true) {
    this.buf = buf;
    this.dtype = dtype;
    this.length = length;
    this.q = q;
    if (owned)
      q.pool.own(this, buf);
  }
  hostSync() {
    if (!this.host)
      this.host = fromGpuBytes(this.dtype, this.q.readSync(this.buf, 0, this.length * 4, this.cells), this.length);
    this.check();
    return this.host;
  }
  async hostAsync() {
    if (!this.host) {
      const raw = await this.q.read(this.buf, 0, this.length * 4, this.cells);
      this.host ??= fromGpuBytes(this.dtype, raw, this.length);
    }
    this.check();
    return this.host;
  }
  errorCells() {
    return this.cells;
  }
  setErrorCells(cells, replace) {
    if (replace && cells.length === 0 && this.cells.length === 0)
      return;
    const all = new Set(replace ? cells : [...this.cells, ...cells]);
    let list = [...all].filter((c) => c.state !== null);
    if (list.filter((c) => c.state === undefined).length > MAX_CELLS) {
      this.q.resolve(list);
      list = list.filter((c) => c.state !== null);
    }
    this.cells = list;
  }
  check() {
    if (this.cells.length === 0)
      return;
    if (this.cells.some((c) => c.state === undefined))
      this.q.resolve(this.cells);
    this.cells = this.cells.filter((c) => c.state !== null);
    raiseCells(this.cells);
  }
  invalidate() {
    this.host = null;
  }
}

class GpuData {
  storage;
  shape;
  strides;
  offset;
  dtype;
  constructor(storage, shape, strides, offset) {
    this.storage = storage;
    this.shape = shape;
    this.strides = strides;
    this.offset = offset;
    this.dtype = storage.dtype;
    Object.defineProperty(this, "data", { get: () => this.storage.hostSync(), enumerable: true });
  }
}
function isGpu(t) {
  return t instanceof GpuData;
}

// src/backends/webgpu/backend.ts
var NO_DATA2 = new Float32Array(0);
var OPS_CONTIGUOUS = OPS.contiguous;
function span(t) {
  if (numel(t.shape) === 0)
    return [t.offset, t.offset];
  let hi = t.offset;
  t.shape.forEach((s, d) => {
    hi += (s - 1) * t.strides[d];
  });
  return [t.offset, hi + 1];
}

class WebGpuBackend {
  gpu;
  name = "webgpu";
  q;
  temps = [];
  constructor(gpu) {
    this.gpu = gpu;
    this.q = new CommandQueue(gpu);
  }
  gpuView(t, op) {
    if (isGpu(t)) {
      return { buf: t.storage.buf, t: gpuType(t.dtype, op), dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset };
    }
    const [lo, hi] = span(t);
    const arr = toGpuArray(t.dtype, t.data, lo, hi, op);
    const buf = this.q.upload(arr);
    const v = { buf, t: gpuType(t.dtype, op), dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset - lo };
    this.temps.push(v);
    return v;
  }
  release(v) {
    const i = this.temps.indexOf(v);
    if (i >= 0) {
      this.temps.splice(i, 1);
      this.q.pool.release(v.buf);
    }
  }
  alloc(dtype, shape, op) {
    const n = numel(shape);
    gpuType(dtype, op);
    const st = new GpuStorage(this.q.pool.acquire(Math.max(n, 1) * 4), dtype, n, this.q);
    return new GpuData(st, [...shape], contiguous2(shape), 0);
  }
  temp(dtype, shape, op) {
    const n = numel(shape);
    return { buf: this.q.pool.acquire(Math.max(n, 1) * 4), t: gpuType(dtype, op), dtype, shape: [...shape], strides: contiguous2(shape), offset: 0 };
  }
  outView(d) {
    return { buf: d.storage.buf, t: gpuType(d.dtype), dtype: d.dtype, shape: d.shape, strides: d.strides, offset: d.offset };
  }
  endOp() {
    for (const v of this.temps)
      this.q.pool.release(v.buf);
    this.temps = [];
  }
  passErrors(out, inputs, replace) {
    const cells = this.q.takeCells();
    for (const t of inputs)
      if (isGpu(t) && t.storage !== out.storage)
        cells.push(...t.storage.errorCells());
    out.storage.setErrorCells(cells, replace);
  }
  operand(t, op) {
    if (!isGpu(t) && numel(t.shape) === 1) {
      const dec = decoder(t.dtype);
      const value = dec ? dec(t.data, t.offset) : t.data[t.offset];
      return { kind: "imm", t: t.dtype === "float64" ? "f32" : gpuType(t.dtype, op), dtype: t.dtype, value };
    }
    return { kind: "buf", view: this.gpuView(t, op) };
  }
  broadcastOperand(t, shape, op) {
    const o = this.operand(t, op);
    if (o.kind === "imm")
      return o;
    const v = o.view;
    return { kind: "buf", view: { ...v, shape, strides: broadcastStrides(v.shape, v.strides, shape) } };
  }
  run(op, inputs, attrs, shape, dtype) {
    if (op.kind === "view")
      return this.runView(op, inputs[0], attrs);
    checkRank(op.name, shape);
    const out = this.alloc(dtype, shape, op.name);
    this.runInto(op, inputs, attrs, out);
    return out;
  }
  runInto(op, inputs, attrs, out) {
    if (numel(out.shape) === 0)
      return;
    this.q.takeCells();
    try {
      const o = this.outView(out);
      switch (op.kind) {
        case "elementwise": {
          const operands = inputs.map((t) => this.broadcastOperand(t, out.shape, op.name));
          launchElementwise(this, op.name, operands, out.shape, { view: o, dense: true });
          break;
        }
        case "reduce":
          launchReduce(this, op.name, this.gpuView(inputs[0], op.name), attrs.dim, o);
          break;
        case "kernel": {
          const fused = FUSED_KERNELS[op.name];
          if (fused) {
            fused(this, inputs, attrs, o);
            break;
          }
          const launch = KERNELS[op.name];
          if (!launch)
            throw new Error(`[${op.name}] has no webgpu kernel`);
          launch(this, inputs.map((t) => this.gpuView(t, op.name)), attrs, o);
          break;
        }
        case "view":
          throw new Error(`[${op.name}] views have no kernel`);
      }
    } finally {
      this.endOp();
    }
    this.passErrors(out, inputs, !inputs.some((t) => isGpu(t) && t.storage === out.storage));
    out.storage.invalidate();
  }
  fusedOps = Object.keys(FUSED_KERNELS);
  get maxKernelInputs() {
    return this.q.maxBuffers - 3;
  }
  prepare(op, _inputs, attrs, _shape, _dtype) {
    return (inputs, out) => this.runInto(op, inputs, attrs, out);
  }
  deviceMemory = {
    elementBytes: () => 4,
    alloc: (dtype, shape) => this.alloc(dtype, shape, "plan"),
    workspace: (byteOffset, bytes, dtype, shape) => {
      const key = `${byteOffset}:${bytes}`;
      let buf = this.regions.get(key);
      if (!buf) {
        buf = this.q.pool.acquire(Math.max(bytes, 4));
        this.regions.set(key, buf);
      }
      let st = this.regionStorage.get(`${key}:${dtype}`);
      if (!st) {
        st = new GpuStorage(buf, dtype, numel(shape), this.q, false);
        this.regionStorage.set(`${key}:${dtype}`, st);
      }
      return new GpuData(st, [...shape], contiguous2(shape), 0);
    }
  };
  regions = new Map;
  regionStorage = new Map;
  runView(op, x, attrs) {
    if (!isGpu(x)) {
      const v = op.ref(x, attrs) ?? op.ref(toContiguous(x), attrs);
      if (!v)
        throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const meta = (d) => ({ dtype: d.dtype, shape: d.shape, strides: d.strides, offset: d.offset, data: NO_DATA2 });
    let src = x;
    let v = op.ref(meta(src), attrs);
    if (!v) {
      src = this.run(OPS_CONTIGUOUS, [x], {}, x.shape, x.dtype);
      v = op.ref(meta(src), attrs);
      if (!v)
        throw new Error(`[${op.name}] view failed on a contiguous input`);
    }
    return new GpuData(src.storage, v.shape, v.strides, v.offset);
  }
  storageOf(t) {
    return isGpu(t) ? t.storage : t.data;
  }
  write(dst, src) {
    if (!isGpu(dst))
      return false;
    try {
      let s = src;
      if (isGpu(src) && src.storage === dst.storage) {
        s = this.run(OPS_CONTIGUOUS, [src], {}, src.shape, src.dtype);
      }
      this.q.takeCells();
      launchElementwise(this, "contiguous", [this.broadcastOperand(s, dst.shape, "copy_")], dst.shape, { view: this.outView(dst), dense: false });
      this.passErrors(dst, [src], false);
    } finally {
      this.endOp();
    }
    dst.storage.invalidate();
    return true;
  }
  upload(t) {
    if (isGpu(t))
      return t;
    const c = toContiguous(t);
    const n = numel(c.shape);
    const arr = toGpuArray(c.dtype, c.data, c.offset, c.offset + n, "to");
    const st = new GpuStorage(this.q.upload(arr.length ? arr : new Float32Array(1)), c.dtype, n, this.q);
    return new GpuData(st, [...c.shape], contiguous2(c.shape), 0);
  }
  download(t) {
    if (!isGpu(t))
      return t;
    const host = t.storage.hostSync();
    return toContiguous({ dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, data: host.slice() });
  }
  async read(t) {
    if (isGpu(t))
      await t.storage.hostAsync();
  }
  view(t, shape, strides, offset) {
    if (!isGpu(t))
      return { dtype: t.dtype, shape, strides, offset, data: t.data };
    return new GpuData(t.storage, shape, strides, offset);
  }
  flush() {
    this.q.flush();
  }
  async synchronize() {
    await this.q.done();
  }
  synchronizeSync() {
    this.q.doneSync();
  }
  stats() {
    let wsBytes = 0;
    for (const b of this.regions.values())
      wsBytes += b.size;
    return { ...this.q.stats, memory: { ...this.q.pool.stats, workspaceBuffers: this.regions.size, workspaceBytes: wsBytes } };
  }
}

// src/backends/webgpu/index.ts
var backend = null;
function webgpuStatus() {
  const { ctx, reason } = openGpu();
  return { available: ctx !== null, reason, device: ctx?.description ?? "", software: ctx?.software ?? false };
}
function webgpuBackend() {
  if (backend)
    return backend;
  const { ctx, reason } = openGpu();
  if (!ctx)
    throw new LoomValueError(`device 'webgpu' is unavailable: ${reason}`);
  backend = new WebGpuBackend(ctx);
  return backend;
}
async function init_webgpu() {
  await initGpu();
  return webgpuStatus();
}

// src/lazy/device.ts
function defaultCpu() {
  const env = typeof process !== "undefined" ? process.env : {};
  if (env.LOOM_BACKEND === "js")
    return jsBackend;
  const native = nativeBackend();
  if (native)
    return native;
  if (env.LOOM_REQUIRE_NATIVE === "1" || env.LOOM_BACKEND === "native") {
    throw new LoomValueError(`the native backend is required but unavailable: ${nativeUnavailableReason()}`);
  }
  return jsBackend;
}
var backends = new Map([["cpu", defaultCpu()]]);
var lazyDevices = { webgpu: webgpuBackend };
function backendFor(device) {
  let b = backends.get(device);
  if (!b && lazyDevices[device])
    backends.set(device, b = lazyDevices[device]());
  if (!b)
    throw new LoomValueError(`unknown or unavailable device '${device}'; available: ${[...backends.keys()].join(", ")}`);
  return b;
}
function moveData(d, from, to) {
  const host = backendFor(from).download?.(d) ?? d;
  const dst = backendFor(to);
  return dst.upload ? dst.upload(host) : host === d ? toContiguous(d) : host;
}

// src/lazy/readers.ts
function storageKey(d, device) {
  const b = backendFor(device);
  return b.storageOf ? b.storageOf(d) : d.data;
}
var readers = new WeakMap;
var layoutKey = (d) => `${d.dtype}|${d.offset}|${d.shape.join(",")}|${d.strides.join(",")}`;
function readersOf(storage) {
  let r = readers.get(storage);
  if (!r)
    readers.set(storage, r = { nodes: new Map, limit: 32, last: null });
  return r;
}
function addReader(r, key, n) {
  const w = new WeakRef(n);
  r.nodes.set(key, w);
  if (r.nodes.size > r.limit) {
    for (const [k, x] of r.nodes)
      if (x.deref() === undefined)
        r.nodes.delete(k);
    r.limit = Math.max(32, 2 * r.nodes.size);
  }
  return w;
}
function sourceNode(d, device) {
  const storage = storageKey(d, device);
  const r = readersOf(storage);
  const prev = r.last?.deref();
  if (prev !== undefined && prev.realized === d)
    return prev;
  const key = layoutKey(d);
  const old = r.nodes.get(key)?.deref();
  if (old?.realized && old.realized.offset === d.offset && storageKey(old.realized, device) === storage) {
    r.last = new WeakRef(old);
    return old;
  }
  const n = Node.source(d);
  r.last = addReader(r, key, n);
  return n;
}
var privates = new WeakMap;
function trackPrivate(n, d, device) {
  const storage = storageKey(d, device);
  let l = privates.get(storage);
  if (!l)
    privates.set(storage, l = []);
  l.push(new WeakRef(n));
  if (l.length >= 64 && (l.length & l.length - 1) === 0) {
    const live = l.filter((w) => w.deref() !== undefined);
    l.length = 0;
    l.push(...live);
  }
}
function hasPrivateReaders(d, device) {
  return privates.has(storageKey(d, device));
}
var privateNodes = new WeakMap;
function privateSource(d, device) {
  const old = privateNodes.get(d);
  if (old !== undefined && old.realized === d)
    return old;
  const n = Node.source(d);
  privateNodes.set(d, n);
  trackPrivate(n, d, device);
  return n;
}
function trackReader(n, d, device) {
  addReader(readersOf(storageKey(d, device)), `${layoutKey(d)}#${n.id}`, n);
}
var copyOnWriteStats = { copies: 0, bytes: 0 };
function beforeWrite(d, device) {
  const storage = storageKey(d, device);
  const p = privates.get(storage);
  if (p) {
    privates.delete(storage);
    for (const w of p) {
      const n = w.deref();
      if (n?.realized && storageKey(n.realized, device) === storage) {
        n.realized = null;
        n.stale = true;
      }
    }
  }
  const r = readers.get(storage);
  if (!r)
    return;
  readers.delete(storage);
  const host = !backendFor(device).deviceMemory;
  let copy = null;
  for (const w of r.nodes.values()) {
    const n = w.deref();
    const v = n?.realized;
    if (!n || !v || storageKey(v, device) !== storage)
      continue;
    if (host) {
      if (copy === null) {
        copy = d.data.slice();
        copyOnWriteStats.copies++;
        copyOnWriteStats.bytes += copy.byteLength;
      }
      n.realized = { dtype: v.dtype, shape: v.shape, strides: v.strides, offset: v.offset, data: copy };
      n.assigned = false;
    } else {
      n.realized = backendFor(device).run(OPS.contiguous, [v], {}, v.shape, v.dtype);
      copyOnWriteStats.copies++;
      n.assigned = false;
    }
  }
}

// src/lazy/deferred.ts
var devices = new Map;
var written = new Set;
var inflight = new Map;
function stateOf(device) {
  let s = devices.get(device);
  if (!s)
    devices.set(device, s = { writes: new Map, values: new Set, weak: [] });
  return s;
}
function hasPendingWrite(d, device) {
  if (written.size === 0 && inflight.size === 0)
    return false;
  const k = storageKey(d, device);
  return written.has(k) || inflight.has(k);
}
function hasUnflushedWrite(d, device) {
  return written.size > 0 && written.has(storageKey(d, device));
}
function settleRead(d, device) {
  const k = storageKey(d, device);
  if (written.has(k))
    flush(device);
  waitWrites(k);
}
function waitWrites(k) {
  const dev = inflight.get(k);
  if (dev === undefined)
    return;
  backendFor(dev).synchronize?.();
  for (const [s, v] of inflight)
    if (v === dev)
      inflight.delete(s);
}
function canDeferWrite(dest) {
  return isContiguous(dest.shape, dest.strides);
}
function recordWrite(t, dest, priv = false) {
  const s = stateOf(t.device);
  if (!s.writes.has(t)) {
    if (hasUnflushedWrite(dest, t.device)) {
      const node = t._pend;
      flush(t.device);
      t._pend = node;
    }
    written.add(storageKey(dest, t.device));
  }
  s.writes.set(t, { dest, priv });
}
function retainValue(t, weak = false) {
  const s = stateOf(t.device);
  if (weak)
    s.weak.push(new WeakRef(t));
  else
    s.values.add(t);
}
function releaseValue(t) {
  devices.get(t.device)?.values.delete(t);
}
function clearState(s, device) {
  for (const w of s.writes.values())
    written.delete(storageKey(w.dest, device));
  s.writes.clear();
  s.values.clear();
  s.weak.length = 0;
}
function flush(device, extra = []) {
  const s = devices.get(device);
  if (s === undefined || s.writes.size === 0 && s.values.size === 0 && s.weak.length === 0) {
    realize(extra, backendFor(device), device);
    return;
  }
  const values = [];
  for (const t of s.values)
    if (t._pend)
      values.push(t);
  for (const w of s.weak) {
    const t = w.deref();
    if (t?._pend && !s.values.has(t))
      values.push(t);
  }
  const writes = [...s.writes];
  const roots = [...extra, ...values.map((t) => t._pend)];
  const assigns = writes.map(([t, w]) => ({ node: t._pend, dest: w.dest }));
  const backend = backendFor(device);
  try {
    realize(roots, backend, device, false, assigns, () => {
      for (const a of assigns) {
        waitWrites(storageKey(a.dest, device));
        beforeWrite(a.dest, device);
      }
    });
  } catch (e) {
    for (const [t] of writes)
      t._pend = null;
    clearState(s, device);
    throw e;
  }
  if (backend.synchronize && !backend.deviceMemory)
    for (const a of assigns)
      inflight.set(storageKey(a.dest, device), device);
  clearState(s, device);
  for (const [t, { dest, priv }] of writes) {
    const n = t._pend;
    if (!n.realized) {
      n.realized = dest;
      n.assigned = true;
      n.inputs = [];
      if (priv)
        trackPrivate(n, dest, device);
      else
        trackReader(n, dest, device);
    }
    t._settled();
  }
  for (const t of values)
    t._settled();
}
function ownValue(n, device) {
  const d = n.realized;
  if (!n.assigned)
    return d;
  waitWrites(storageKey(d, device));
  return backendFor(device).run(OPS.contiguous, [d], {}, d.shape, d.dtype);
}

// src/autograd/engine.ts
var materialize2 = (pairs) => pairs.map((p) => p.grad);
function set_grad_materializer(fn) {
  materialize2 = fn;
}
var backward_state = { fn: null };
function saved_versions(inputs, output) {
  const v = new Array(inputs.length + 1);
  for (let i = 0;i < inputs.length; i++)
    v[i] = inputs[i]._version;
  v[inputs.length] = output._version;
  return v;
}
function check_saved(fn, t) {
  const v = fn.versions;
  if (!v)
    return;
  const n = fn.inputs.length;
  for (let i = 0;i <= n; i++) {
    if ((i < n ? fn.inputs[i] : fn.output) !== t || t._version === v[i])
      continue;
    const which = i < n ? `input ${i}` : "output 0";
    throw new LoomAutogradError(`[backward] one of the variables needed for gradient computation has been modified by an inplace operation: [${t.dtype} ${fmtShape(t.shape)}], which is ${which} of ${fn.name}, is at version ${t._version}; expected version ${v[i]} instead. Hint: an in-place write (an optimizer step, x.add_(...) under no_grad) came between the forward and this backward; run the forward again, or clone() the tensor before writing it`);
  }
}
function topoOrder(roots) {
  const order = [];
  const seen = new Set;
  const stack = [];
  for (const r of roots) {
    if (seen.has(r))
      continue;
    seen.add(r);
    stack.push([r, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [t, i] = top;
      const ins = t.grad_fn?.inputs ?? [];
      if (i < ins.length) {
        top[1]++;
        const c = ins[i];
        if (c.requires_grad && !seen.has(c)) {
          seen.add(c);
          stack.push([c, 0]);
        }
      } else {
        stack.pop();
        order.push(t);
      }
    }
  }
  return order;
}
function fitGrad(t, g) {
  if (!shapesEqual(t.shape, g.shape)) {
    throw new LoomAutogradError(`[backward] gradient of shape ${fmtShape(g.shape)} does not match tensor of shape ${fmtShape(t.shape)}`);
  }
  return g.dtype === t.dtype ? g : g.to(t.dtype);
}
function runBackward(roots, grads, opts) {
  const retain = opts.retain_graph ?? opts.create_graph ?? false;
  const create = opts.create_graph ?? false;
  for (const r of roots) {
    if (!r.requires_grad) {
      throw new LoomAutogradError("element 0 of tensors does not require grad and does not have a grad_fn");
    }
  }
  const wanted = new Set(opts.wanted ?? []);
  const found = new Map;
  const body = () => {
    const pending = new Map;
    const stores = [];
    roots.forEach((r, i) => {
      const g = fitGrad(r, grads[i]);
      const prev = pending.get(r);
      pending.set(r, prev ? prev.add(g) : g);
    });
    const order = topoOrder(roots);
    for (let k = order.length - 1;k >= 0; k--) {
      const t = order[k];
      let g = pending.get(t);
      if (!g)
        continue;
      pending.delete(t);
      if (t._hooks)
        for (const h of [...t._hooks])
          g = fitGrad(t, h.fn(g) ?? g);
      if (wanted.has(t))
        found.set(t, g);
      const fn = t.grad_fn;
      if (opts.accumulate && (!fn || t._retains_grad))
        stores.push([t, g]);
      if (!fn)
        continue;
      if (fn.released) {
        throw new LoomAutogradError(`Trying to backward through the graph a second time (through ${fn.name}); specify retain_graph: true on the first backward`);
      }
      const prevFn = backward_state.fn;
      backward_state.fn = fn;
      let ig;
      try {
        ig = fn.apply(g);
      } finally {
        backward_state.fn = prevFn;
      }
      fn.inputs.forEach((inp, i) => {
        const g0 = ig[i];
        if (!g0 || !inp.requires_grad)
          return;
        const gi = fitGrad(inp, g0);
        const prev = pending.get(inp);
        pending.set(inp, prev ? prev.add(gi) : gi);
      });
      if (!retain)
        fn.released = true;
    }
    const found_list = [...found];
    const conv = materialize2([...stores, ...found_list].map(([t, g]) => ({ target: t, grad: g })));
    stores.forEach(([t], i) => {
      const g = conv[i];
      const stored = create ? g : g.detach();
      t.grad = t.grad ? create ? t.grad.add(stored) : t.grad.detach().add(stored) : stored.clone();
    });
    found_list.forEach(([t], i) => found.set(t, conv[stores.length + i]));
  };
  if (create)
    enable_grad(body);
  else
    no_grad(body);
  return found;
}

// src/lazy/autocast.ts
var LOWER_PRECISION_OPS = new Set([
  "matmul",
  "lora_linear",
  "linear",
  "conv1d",
  "conv2d",
  "conv3d",
  "bmm",
  "baddbmm",
  "addmm",
  "addbmm"
]);
var FP32_OPS = new Set(["exp", "log", "log1p", "rsqrt", "reciprocal", "pow", "sum", "cumsum"]);
var autocast_state = {
  active: false,
  cpu: null,
  webgpu: null
};
function familyOf(device) {
  return device === "webgpu" ? "webgpu" : "cpu";
}
function eligible(dtype) {
  return dtype === "float32" || dtype === "float16" || dtype === "bfloat16";
}
function autocast_args(op, args) {
  if (!autocast_state.active || args.length === 0)
    return null;
  const first = args.find((a) => a);
  if (!first)
    return null;
  const region = autocast_state[familyOf(first.device)];
  if (region === null)
    return null;
  const target = LOWER_PRECISION_OPS.has(op) ? region : FP32_OPS.has(op) ? "float32" : null;
  if (target === null)
    return null;
  let changed = false;
  const out = args.map((a) => {
    if (!a || a.dtype === target || !eligible(a.dtype))
      return a;
    changed = true;
    return a.to(target);
  });
  return changed ? out : null;
}

// src/lazy/format.ts
var MAX_SHOWN = 1000;
function floatMode(values) {
  let min = Infinity, max = 0, ints = true;
  for (const v of values) {
    if (!Number.isFinite(v) || v === 0)
      continue;
    const a = Math.abs(v);
    if (a < min)
      min = a;
    if (a > max)
      max = a;
    if (!Number.isInteger(v))
      ints = false;
  }
  if (max === 0)
    return "int";
  if (max / min > 1000 || max > 1e8 || !ints && min < 0.0001)
    return "sci";
  return ints ? "int" : "fixed";
}
function fmtValue(v, dtype, mode) {
  if (dtype === "bool")
    return v ? "True" : "False";
  if (!isFloating(dtype))
    return String(v);
  if (Number.isNaN(v))
    return "nan";
  if (!Number.isFinite(v))
    return v > 0 ? "inf" : "-inf";
  const sign = Object.is(v, -0) ? "-" : "";
  if (mode === "int")
    return `${sign}${v.toFixed(0)}.`;
  if (mode === "fixed")
    return sign + v.toFixed(4);
  return sign + v.toExponential(4).replace(/e([+-])(\d)$/, "e$10$2");
}
function formatTensor(shape, dtype, values, gradFn, requiresGrad) {
  const floating = isFloating(dtype);
  const mode = floating ? floatMode(values) : "fixed";
  const shown = values.subarray(0, MAX_SHOWN);
  const strs = Array.from(shown, (v) => fmtValue(v, dtype, mode));
  const width = strs.reduce((w, s, i) => !floating || Number.isFinite(shown[i]) && shown[i] !== 0 ? Math.max(w, s.length) : w, 1);
  const build = (d, off, indent) => {
    if (d === shape.length)
      return (strs[off] ?? "...").padStart(width);
    const stride = shape.slice(d + 1).reduce((p, x) => p * x, 1);
    const parts = [];
    for (let i = 0;i < shape[d]; i++) {
      if (off + i * stride >= MAX_SHOWN) {
        parts.push("...");
        break;
      }
      parts.push(build(d + 1, off + i * stride, indent + " "));
    }
    const sep = d === shape.length - 1 ? ", " : `,
` + `
`.repeat(Math.max(0, shape.length - d - 2)) + indent + " ";
    return `[${parts.join(sep)}]`;
  };
  const body = build(0, 0, "       ");
  const extras = [];
  if (dtype !== "float32" && dtype !== "int64" && dtype !== "bool")
    extras.push(`dtype=${dtype}`);
  if (gradFn)
    extras.push(`grad_fn=<${gradFn}>`);
  else if (requiresGrad)
    extras.push("requires_grad=True");
  return `tensor(${body}${extras.length ? ", " + extras.join(", ") : ""})`;
}

// src/lazy/indexing.ts
function parseSliceString(s) {
  const parts = s.split(":");
  if (parts.length < 2 || parts.length > 3)
    throw new LoomValueError(`[index] cannot parse '${s}' as a slice; use "start:stop:step"`);
  const num = (p) => {
    if (p === undefined || p.trim() === "")
      return null;
    const v = Number(p);
    if (!Number.isInteger(v))
      throw new LoomValueError(`[index] slice bound '${p}' in '${s}' is not an integer`);
    return v;
  };
  return { start: num(parts[0]), stop: num(parts[1]), step: num(parts[2]) };
}
function adjust(sl, size) {
  const step = sl.step ?? 1;
  if (step <= 0)
    throw new LoomValueError(`[index] step must be greater than zero, got ${step}`);
  const clamp = (v, dflt) => {
    if (v === null || v === undefined)
      return dflt;
    const x = v < 0 ? v + size : v;
    return Math.min(Math.max(x, 0), size);
  };
  const start = clamp(sl.start, 0);
  const stop = Math.max(start, clamp(sl.stop, size));
  return [start, stop, step];
}
var SLICE_KEYS = new Set(["start", "stop", "step"]);
function isIndexTensor(it) {
  return typeof it === "object" && it !== null && !Array.isArray(it) && typeof it._data === "function";
}
function isPlainObject(it) {
  if (typeof it !== "object" || it === null)
    return false;
  const proto = Object.getPrototypeOf(it);
  return proto === Object.prototype || proto === null;
}
function describeItem(it) {
  if (it === undefined)
    return "undefined";
  if (typeof it === "object" && it !== null)
    return it.constructor?.name ?? "object";
  return `${typeof it} ${String(it)}`;
}
function parseList(op, list) {
  const shape = [];
  for (let l = list;Array.isArray(l); l = l[0]) {
    shape.push(l.length);
    if (l.length === 0)
      break;
  }
  const values = [];
  let bools = 0, ints = 0;
  const walk = (l, d) => {
    if (d === shape.length) {
      if (typeof l === "boolean")
        bools++;
      else if (typeof l === "number" && Number.isInteger(l))
        ints++;
      else
        throw new LoomIndexError(`[${op}] tensors used as indices must be long, int, byte or bool tensors; the list holds ${describeItem(l)}`);
      values.push(Number(l));
      return;
    }
    if (!Array.isArray(l) || l.length !== shape[d]) {
      throw new LoomIndexError(`[${op}] an index list must be rectangular, got ${JSON.stringify(list)} (expected length ${shape[d]} at depth ${d})`);
    }
    for (const e of l)
      walk(e, d + 1);
  };
  walk(list, 0);
  if (bools && ints)
    throw new LoomIndexError(`[${op}] an index list mixes booleans and integers: ${JSON.stringify(list)}`);
  return { kind: bools ? "mask" : "ints", shape, values: Float64Array.from(values) };
}
function normalize2(op, it) {
  if (it === null)
    return { kind: "none" };
  if (it === "...")
    return { kind: "ellipsis" };
  if (typeof it === "number") {
    if (!Number.isInteger(it))
      throw new LoomIndexError(`[${op}] an integer index must be an integer, got ${it}`);
    return { kind: "int", v: it };
  }
  if (typeof it === "string")
    return { kind: "slice", sl: parseSliceString(it) };
  if (typeof it === "boolean") {
    throw new LoomIndexError(`[${op}] a bool scalar index (${it}) is not supported; use null for a new axis`);
  }
  if (Array.isArray(it))
    return parseList(op, it);
  if (isIndexTensor(it)) {
    const d = it.dtype;
    const mask = d === "bool" || d === "uint8";
    if (!mask && d !== "int64" && d !== "int32") {
      throw new LoomIndexError(`[${op}] tensors used as indices must be long, int, byte or bool tensors, got ${d}`);
    }
    if (mask && it.shape.length === 0) {
      throw new LoomIndexError(`[${op}] a 0-d bool index tensor is not supported; use null for a new axis`);
    }
    return { kind: mask ? "mask" : "ints", shape: [...it.shape], values: toFloat64(it._data()) };
  }
  if (isPlainObject(it) && Object.keys(it).every((k) => SLICE_KEYS.has(k))) {
    const sl = it;
    for (const k of SLICE_KEYS) {
      const v = sl[k];
      if (v !== undefined && v !== null && !Number.isInteger(v)) {
        throw new LoomValueError(`[${op}] slice ${k} must be an integer or null, got ${String(v)}`);
      }
    }
    return { kind: "slice", sl };
  }
  throw new LoomIndexError(`[${op}] unsupported index item: ${describeItem(it)}; use integers, slices, null, "...", integer or bool lists, or index tensors`);
}
function broadcastAll2(op, shapes) {
  try {
    return shapes.reduce((acc, sh) => broadcastShapes(op, acc, sh), []);
  } catch {
    throw new LoomIndexError(`[${op}] shape mismatch: indexing tensors could not be broadcast together with shapes ${shapes.map(fmtShape).join(", ")}`);
  }
}
function broadcastMap(from, to) {
  const out = new Int32Array(numel(to));
  const strides = broadcastStrides(from, contiguousStrides(from), to);
  forEachStrided(to, [{ strides, offset: 0 }], (e, idx) => {
    out[e] = idx[0];
  });
  return out;
}
function planIndex(op, shape, items) {
  const norm = items.map((it) => normalize2(op, it));
  const consumes = (n) => n.kind === "none" || n.kind === "ellipsis" ? 0 : n.kind === "mask" ? n.shape.length : 1;
  if (norm.filter((n) => n.kind === "ellipsis").length > 1)
    throw new LoomIndexError(`[${op}] an index can only have a single ellipsis ('...')`);
  const consuming = norm.reduce((p, n) => p + consumes(n), 0);
  if (consuming > shape.length) {
    throw new LoomIndexError(`[${op}] too many indices for tensor of dimension ${shape.length} (got ${consuming})`);
  }
  const sel = shape.map(() => null);
  const layout = [];
  const adv = [];
  let dim = 0;
  for (const n of norm) {
    if (n.kind === "ellipsis") {
      for (const end = dim + shape.length - consuming;dim < end; dim++)
        layout.push(dim);
    } else if (n.kind === "none") {
      layout.push(null);
    } else if (n.kind === "int") {
      const size = shape[dim];
      if (n.v < -size || n.v >= size)
        throw new LoomIndexError(`[${op}] index ${n.v} is out of bounds for dimension ${dim} with size ${size}`);
      const k = n.v < 0 ? n.v + size : n.v;
      sel[dim++] = { start: k, stop: k + 1, step: 1 };
    } else if (n.kind === "slice") {
      const [start, stop, step] = adjust(n.sl, shape[dim]);
      sel[dim] = { start, stop, step };
      layout.push(dim++);
    } else {
      adv.push(n.kind === "mask" ? maskAdv(op, n, shape, dim) : intAdv(op, n, shape, dim));
      for (const d of adv[adv.length - 1].dims)
        layout.push(d);
      dim += consumes(n);
    }
  }
  for (;dim < shape.length; dim++)
    layout.push(dim);
  const basicShape = layout.map((d) => d === null ? 1 : sliceLen2(sel[d] ?? null, shape[d]));
  const advDims = new Set(adv.flatMap((a) => a.dims));
  const advPos = layout.flatMap((d, p) => d !== null && advDims.has(d) ? [p] : []);
  const advShape = adv.length ? broadcastAll2(op, adv.map((a) => a.shape)) : [];
  const front = advPos.some((p, i) => i > 0 && p !== advPos[i - 1] + 1);
  let outShape = basicShape;
  if (adv.length) {
    const rest = basicShape.filter((_, p) => !advPos.includes(p));
    const p0 = front ? 0 : advPos[0];
    outShape = [...rest.slice(0, p0), ...advShape, ...rest.slice(p0)];
  }
  return { shape, sel, layout, adv, advShape, advPos, front, outShape };
}
function sliceLen2(s, size) {
  return s ? Math.ceil((s.stop - s.start) / s.step) : size;
}
function intAdv(op, n, shape, dim) {
  const size = shape[dim];
  const c = new Float64Array(n.values.length);
  n.values.forEach((v, i) => {
    if (v < -size || v >= size)
      throw new LoomIndexError(`[${op}] index ${v} is out of bounds for dimension ${dim} with size ${size}`);
    c[i] = v < 0 ? v + size : v;
  });
  return { dims: [dim], shape: n.shape, coords: [c] };
}
function maskAdv(op, n, shape, dim) {
  const k = n.shape.length;
  const indexed = shape.slice(dim, dim + k);
  if (n.shape.some((s, i) => s !== indexed[i])) {
    throw new LoomIndexError(`[${op}] The shape of the mask ${fmtShape(n.shape)} at index ${dim} does not match the shape of the indexed tensor ${fmtShape(shape)} at index ${dim}`);
  }
  let count = 0;
  for (const v of n.values)
    if (v !== 0)
      count++;
  const coords = Array.from({ length: k }, () => new Float64Array(count));
  let j = 0;
  n.values.forEach((v, flat) => {
    if (v === 0)
      return;
    for (let d = k - 1, r = flat;d >= 0; d--) {
      coords[d][j] = r % n.shape[d];
      r = Math.floor(r / n.shape[d]);
    }
    j++;
  });
  return { dims: Array.from({ length: k }, (_, i) => dim + i), shape: [count], coords };
}
function advOffsets(plan, mult) {
  const out = new Float64Array(numel(plan.advShape));
  for (const a of plan.adv) {
    const map = broadcastMap(a.shape, plan.advShape);
    a.dims.forEach((d, c) => {
      const m = mult(d), coords = a.coords[c];
      for (let e = 0;e < out.length; e++)
        out[e] += coords[map[e]] * m;
    });
  }
  return out;
}
function basicViews(x, plan) {
  let r = x;
  plan.sel.forEach((s, d) => {
    if (s && !(s.start === 0 && s.stop === x.shape[d] && s.step === 1))
      r = r._slice(d, s.start, s.stop, s.step);
  });
  return r.reshape(plan.layout.map((d) => d === null ? 1 : r.shape[d]));
}
function applyIndex(x, plan) {
  let r = basicViews(x, plan);
  if (!plan.adv.length)
    return r;
  let pos = plan.advPos;
  if (plan.front) {
    const rest = r.shape.map((_, p) => p).filter((p) => !pos.includes(p));
    r = r.permute([...pos, ...rest]);
    pos = pos.map((_, i) => i);
  }
  const p0 = pos[0], m = pos.length;
  const sizes = pos.map((p) => r.shape[p]);
  r = r.reshape([...r.shape.slice(0, p0), numel(sizes), ...r.shape.slice(p0 + m)]);
  const mult = new Map;
  const srcDims = plan.advPos.map((p) => plan.layout[p]);
  for (let i = srcDims.length - 1, s = 1;i >= 0; i--) {
    mult.set(srcDims[i], s);
    s *= plan.shape[srcDims[i]];
  }
  const lin = advOffsets(plan, (d) => mult.get(d));
  r = r.index_select(p0, r._constant(fromValues("int64", [lin.length], lin)));
  return r.reshape(plan.outShape);
}

// src/lazy/index_put.ts
function putPositions(plan) {
  const xs = contiguousStrides(plan.shape);
  const advOff = advOffsets(plan, (d) => xs[d]);
  let base = 0;
  plan.sel.forEach((s, d) => {
    if (s)
      base += s.start * xs[d];
  });
  const basic = plan.layout.map((d, p) => ({ d, p })).filter(({ p }) => !plan.advPos.includes(p)).map(({ d }) => {
    if (d === null)
      return { size: 1, st: 0, bst: 0 };
    const s = plan.sel[d];
    return s ? { size: Math.ceil((s.stop - s.start) / s.step), st: s.step * xs[d], bst: 0 } : { size: plan.shape[d], st: xs[d], bst: 0 };
  });
  const bst = contiguousStrides(plan.advShape);
  const bdims = plan.advShape.map((size, i) => ({ size, st: 0, bst: bst[i] }));
  const p0 = plan.adv.length ? plan.front ? 0 : plan.advPos[0] : basic.length;
  const dims = [...basic.slice(0, p0), ...bdims, ...basic.slice(p0)];
  const shape = dims.map((d) => d.size);
  const out = new Float64Array(numel(shape));
  const operands = [{ strides: dims.map((d) => d.st), offset: base }, { strides: dims.map((d) => d.bst), offset: 0 }];
  forEachStrided(shape, operands, (e, idx) => {
    out[e] = idx[0] + (plan.adv.length ? advOff[idx[1]] : 0);
  });
  return out;
}
function indexPutItems(op, indices) {
  if (!Array.isArray(indices)) {
    throw new LoomIndexError(`[${op}] indices must be an array of index tensors (one per leading dim), got ${typeof indices}`);
  }
  return indices.map((it) => {
    if (it === null)
      return ":";
    if (Array.isArray(it) || typeof it === "object" && typeof it._data === "function")
      return it;
    throw new LoomIndexError(`[${op}] indices must be index tensors or lists (null for a whole dim), got ${typeof it} ${String(it)}`);
  });
}
function valueShape(op, values, out) {
  let vs = [...values];
  while (vs.length > out.length && vs[0] === 1)
    vs = vs.slice(1);
  const off = out.length - vs.length;
  if (off < 0 || vs.some((s, i) => s !== 1 && s !== out[off + i])) {
    throw new LoomShapeError(`[${op}] shape mismatch: value tensor of shape ${fmtShape(values)} cannot be broadcast to indexing result of shape ${fmtShape(out)}`);
  }
  return vs;
}
function indexPut(op, x, plan, values, accumulate) {
  if (values.dtype !== x.dtype) {
    throw new LoomDtypeError(`[${op}] Index put requires the source and destination dtypes match, got ${x.dtype} for the destination and ${values.dtype} for the source`);
  }
  const out = plan.outShape;
  const vs = valueShape(op, values.shape, out);
  const N = numel(x.shape), n = numel(out);
  if (n === 0)
    return x.clone();
  const v = values.reshape(vs).expand(out).reshape([n]);
  const xf = x.reshape([N]);
  const P = putPositions(plan);
  const int64 = (vals) => x._constant(fromValues("int64", [vals.length], vals));
  if (accumulate)
    return xf.index_add(0, int64(P), v).reshape(x.shape);
  const lastOf = new Map;
  P.forEach((p, k) => {
    lastOf.set(p, k);
  });
  const pos = int64(Float64Array.from(lastOf.keys()));
  const vu = lastOf.size === n ? v : v.index_select(0, int64(Float64Array.from(lastOf.values())));
  const scattered = xf.full_like(-0).index_add(0, pos, vu);
  const one = x._constant(fromValues("float32", [], [1])).expand([lastOf.size]);
  const covered = xf.full_like(0, "float32").index_add(0, pos, one).ne(0);
  return scattered.where(covered, xf).reshape(x.shape);
}

// src/lazy/surface.ts
function flatShapeArgs(args) {
  return args.length === 1 && Array.isArray(args[0]) ? [...args[0]] : args;
}
var mixed_lift = { fn: null };

class TensorOps {
  _grad = null;
  get grad() {
    return this._grad;
  }
  set grad(g) {
    const prev = this._grad;
    this._grad = g;
    if (prev !== g)
      this._onGrad(prev, g);
  }
  _onGrad(_prev, _g) {}
  grad_fn = null;
  _retains_grad = false;
  _requires_grad = false;
  _vc = null;
  get requires_grad() {
    return this._requires_grad;
  }
  set requires_grad(v) {
    if (this.grad_fn && !v) {
      throw new LoomAutogradError("you can only change requires_grad flags of leaf variables; use detach() to get a tensor that does not require grad");
    }
    if (v && !isFloating(this.dtype)) {
      throw new LoomAutogradError(`only Tensors of floating point dtype can require gradients, got ${this.dtype}: ${floatHint(this.dtype)}`);
    }
    this._requires_grad = v;
  }
  get is_leaf() {
    return this.grad_fn === null;
  }
  requires_grad_(v = true) {
    this.requires_grad = v;
    return this;
  }
  retain_grad() {
    if (!this.requires_grad)
      throw new LoomAutogradError("can't retain_grad on Tensor that has requires_grad=false");
    if (this.grad_fn)
      this._retains_grad = true;
    return this;
  }
  register_hook(hook) {
    if (!this.requires_grad)
      throw new LoomAutogradError("cannot register a hook on a tensor that doesn't require gradient");
    const hooks = this._hooks ??= [];
    const entry = { fn: hook };
    hooks.push(entry);
    return { remove: () => {
      const i = hooks.indexOf(entry);
      if (i >= 0)
        hooks.splice(i, 1);
    } };
  }
  _hooks = null;
  _zeroGrad(out, inputs, name) {
    if (is_grad_enabled() && isFloating(out.dtype) && inputs.some((i) => i.requires_grad)) {
      this._record(out, name, inputs, () => inputs.map((i) => i.requires_grad ? i.detach().zeros_like() : null));
    }
    return out;
  }
  get _version() {
    return this._vc === null ? 0 : this._vc.v;
  }
  _increment_version() {
    (this._vc ??= { v: 0 }).v++;
  }
  _version_counter() {
    return this._vc ??= { v: 0 };
  }
  _record(out, name, inputs, apply) {
    out.grad_fn = { name, inputs, apply, released: false, output: out, versions: saved_versions(inputs, out) };
    out._requires_grad = true;
  }
  _apply(opdef, rest, attrs) {
    const op = opdef;
    const running = backward_state.fn;
    if (running !== null) {
      check_saved(running, this);
      for (const r of rest)
        check_saved(running, r);
    }
    let anyGrad = this._requires_grad;
    for (let i = 0;i < rest.length; i++) {
      const r = rest[i];
      if (r.isLazy !== this.isLazy) {
        const lift = mixed_lift.fn;
        const lifted = [this, ...rest].map((t) => t.isLazy ? t : lift !== null ? lift(t) : t.lazy());
        return lifted[0]._apply(op, lifted.slice(1), attrs);
      }
      if (r._requires_grad)
        anyGrad = true;
    }
    if (autocast_state.active && running === null) {
      const c = autocast_args(op.name, [this, ...rest]);
      if (c !== null)
        return c[0]._apply(op, c.slice(1), attrs);
    }
    const inputs = rest.length === 0 ? [this] : rest.length === 1 ? [this, rest[0]] : [this, ...rest];
    const shape = op.shape(inputs, attrs);
    const dtype = op.dtype(inputs, attrs);
    const out = this._make(op, inputs, attrs, shape, dtype);
    if (op.kind === "view" && this._viewAliases(op, out))
      out._vc = this._version_counter();
    if (anyGrad && op.grad && is_grad_enabled() && isFloating(dtype)) {
      const grad = op.grad;
      const needs = inputs.map((i) => i.requires_grad);
      this._record(out, op.name, inputs, (g) => grad(g, inputs, out, attrs, needs));
    }
    return out;
  }
  _wrap(o) {
    if (typeof o === "number" || typeof o === "boolean") {
      return this._constant(scalarData(promoteWithScalar(this.dtype, o), Number(o)));
    }
    return o;
  }
  _bin(op, o) {
    return this._apply(op, [this._wrap(o)], {});
  }
  _un(op) {
    return this._apply(op, [], {});
  }
  get ndim() {
    return this.shape.length;
  }
  dim() {
    return this.shape.length;
  }
  size(dim) {
    return dim === undefined ? [...this.shape] : this.shape[normalizeDim("size", dim, this.ndim)];
  }
  numel() {
    return numel(this.shape);
  }
  element_size() {
    return { float32: 4, float64: 8, float16: 2, bfloat16: 2, int32: 4, int64: 8, int8: 1, uint8: 1, bool: 1 }[this.dtype];
  }
  is_floating_point() {
    return isFloating(this.dtype);
  }
  add(o, opts) {
    const a = opts?.alpha;
    return this._bin(OPS.add, a === undefined || a === 1 ? o : this._wrap(o).mul(a));
  }
  sub(o, opts) {
    const a = opts?.alpha;
    return this._bin(OPS.sub, a === undefined || a === 1 ? o : this._wrap(o).mul(a));
  }
  rsub(o, opts) {
    return this._wrap(o).sub(this, opts);
  }
  mul(o) {
    return this._bin(OPS.mul, o);
  }
  div(o, opts) {
    const m = opts?.rounding_mode;
    if (!m)
      return this._bin(OPS.div, o);
    const other = this._wrap(o);
    const inputs = [this, other];
    const r = no_grad(() => {
      if (m === "floor")
        return this._bin(OPS.floor_divide, other);
      const d = OPS.floor_divide.dtype([this, other], {});
      if (!isFloating(d)) {
        const q = this._bin(OPS.floor_divide, other);
        const fix = this._bin(OPS.remainder, other).ne(0).logical_and(this.lt(0).ne(other.lt(0)));
        return q.add(fix.to(d));
      }
      const q = this._bin(OPS.div, other);
      return q.sign().mul(q.abs().floor()).to(d);
    });
    return this._zeroGrad(r, inputs, "div");
  }
  floor_divide(o) {
    return this._bin(OPS.floor_divide, o);
  }
  remainder(o) {
    return this._bin(OPS.remainder, o);
  }
  pow(o) {
    if (typeof o === "number" && o < 0 && isIntegral(promoteWithScalar(this.dtype, o))) {
      throw new LoomValueError(`[pow] integers to negative integer powers are not allowed (${this.dtype} tensor, exponent ${o})`);
    }
    return this._bin(OPS.pow, o);
  }
  square() {
    if (this.dtype === "bool")
      return this.to("int64").square();
    return this.mul(this);
  }
  maximum(o) {
    return this._bin(OPS.maximum, o);
  }
  minimum(o) {
    return this._bin(OPS.minimum, o);
  }
  neg() {
    return this._un(OPS.neg);
  }
  abs() {
    return this._un(OPS.abs);
  }
  sign() {
    return this._un(OPS.sign);
  }
  exp() {
    return this._un(OPS.exp);
  }
  log() {
    return this._un(OPS.log);
  }
  log1p() {
    return this._un(OPS.log1p);
  }
  sqrt() {
    return this._un(OPS.sqrt);
  }
  rsqrt() {
    return this._un(OPS.rsqrt);
  }
  reciprocal() {
    return this._un(OPS.reciprocal);
  }
  sin() {
    return this._un(OPS.sin);
  }
  cos() {
    return this._un(OPS.cos);
  }
  tanh() {
    return this._un(OPS.tanh);
  }
  sigmoid() {
    return this._un(OPS.sigmoid);
  }
  relu() {
    return this._un(OPS.relu);
  }
  erf() {
    return this._un(OPS.erf);
  }
  floor() {
    return this._un(OPS.floor);
  }
  ceil() {
    return this._un(OPS.ceil);
  }
  round(opts) {
    const d = opts?.decimals ?? 0;
    if (d === 0)
      return this._un(OPS.round);
    if (!Number.isInteger(d))
      throw new LoomValueError(`[round] decimals must be an integer, got ${d}`);
    if (!isFloating(this.dtype))
      throw new LoomDtypeError(`[round] "round_decimals" is not implemented for '${this.dtype}'`);
    return d > 0 ? this.mul(10 ** d).round().div(10 ** d) : this.div(10 ** -d).round().mul(10 ** -d);
  }
  isnan() {
    return this._un(OPS.isnan);
  }
  logical_not() {
    return this._un(OPS.logical_not);
  }
  gelu(approximate = "none") {
    if (approximate !== "none" && approximate !== "tanh") {
      throw new LoomValueError(`[gelu] approximate argument must be either none or tanh, got '${approximate}'`);
    }
    const x = this;
    if (approximate === "tanh") {
      const inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(Math.sqrt(2 / Math.PI));
      return x.mul(0.5).mul(inner.tanh().add(1));
    }
    return x.mul(0.5).mul(x.mul(Math.SQRT1_2).erf().add(1));
  }
  silu() {
    return this.mul(this.sigmoid());
  }
  clamp(min, max) {
    if ((min === undefined || min === null) && (max === undefined || max === null)) {
      throw new LoomValueError("[clamp] at least one of 'min' or 'max' must not be None");
    }
    let r = this;
    if (min !== undefined && min !== null)
      r = r.where(r.ge(min), r.detach().where(r.isnan(), min));
    if (max !== undefined && max !== null)
      r = r.where(r.le(max), r.detach().where(r.isnan(), max));
    return r;
  }
  clip(min, max) {
    return this.clamp(min, max);
  }
  eq(o) {
    return this._bin(OPS.eq, o);
  }
  ne(o) {
    return this._bin(OPS.ne, o);
  }
  lt(o) {
    return this._bin(OPS.lt, o);
  }
  le(o) {
    return this._bin(OPS.le, o);
  }
  gt(o) {
    return this._bin(OPS.gt, o);
  }
  ge(o) {
    return this._bin(OPS.ge, o);
  }
  logical_and(o) {
    return this._bin(OPS.logical_and, o);
  }
  logical_or(o) {
    return this._bin(OPS.logical_or, o);
  }
  where(condition, other) {
    const o = typeof other === "object" ? other : this._wrap(other);
    return condition._apply(OPS.where, [this, o], {});
  }
  masked_fill(mask, value) {
    if (mask.dtype !== "bool")
      throw new LoomDtypeError(`[masked_fill] mask must be a bool tensor, got ${mask.dtype}`);
    const v = typeof value === "object" ? value : this._wrap(value);
    if (typeof value === "object" && value.ndim !== 0) {
      throw new LoomShapeError(`[masked_fill] only supports a 0-dimensional value tensor, but got a tensor with ${value.ndim} dimensions`);
    }
    return v.to(this.dtype).where(mask, this);
  }
  sum(dim, keepdim = false, opts) {
    if (opts?.dtype)
      return this.to(opts.dtype).sum(dim, keepdim).to(opts.dtype);
    return this._apply(OPS.sum, [], { dim: normalizeDims("sum", dim, this.ndim), keepdim });
  }
  mean(dim, keepdim = false, opts) {
    if (opts?.dtype)
      return this.to(opts.dtype).mean(dim, keepdim);
    requireFloat("mean", this.dtype);
    const dims = normalizeDims("mean", dim, this.ndim);
    const n = dims.reduce((p, d) => p * this.shape[d], 1);
    return this.sum(dims, keepdim).div(n);
  }
  amax(dim, keepdim = false) {
    return this._extreme("amax", true, dim, keepdim);
  }
  amin(dim, keepdim = false) {
    return this._extreme("amin", false, dim, keepdim);
  }
  _extreme(op, largest, dim, keepdim) {
    if ((dim === undefined || dim === null) && this.numel() === 0) {
      throw new LoomValueError(`[${op}] expected reduction dim to be specified for input.numel() == 0 (input shape ${fmtShape(this.shape)}); specify the reduction dim with the 'dim' argument`);
    }
    return this._apply(largest ? OPS.amax : OPS.amin, [], { dim: normalizeDims(op, dim, this.ndim), keepdim });
  }
  _reducesEmpty(op, dim) {
    return normalizeDims(op, dim, this.ndim).some((d) => this.shape[d] === 0);
  }
  max(arg, keepdim = false) {
    if (arg === undefined)
      return this._extreme("max", true, undefined, false);
    if (typeof arg !== "number")
      return this.maximum(arg);
    return this._extremeWithIndices(arg, keepdim, true);
  }
  min(arg, keepdim = false) {
    if (arg === undefined)
      return this._extreme("min", false, undefined, false);
    if (typeof arg !== "number")
      return this.minimum(arg);
    return this._extremeWithIndices(arg, keepdim, false);
  }
  _extremeWithIndices(dim, keepdim, largest) {
    const op = largest ? "max" : "min";
    const d = normalizeDim(op, dim, this.ndim);
    if (this.shape[d] === 0)
      throw new LoomIndexError(`[${op}] expected reduction dim ${d} to have non-zero size (input shape ${fmtShape(this.shape)})`);
    if (this.ndim === 0)
      return { values: this, indices: this._constant(fromValues("int64", [], [0])) };
    const idx = largest ? this.argmax(d, true) : this.argmin(d, true);
    const values = this.gather(d, idx);
    return keepdim ? { values, indices: idx } : { values: values.squeeze(d), indices: idx.squeeze(d) };
  }
  argmax(dim, keepdim = false) {
    return this._apply(OPS.argmax, [], { dim: dim ?? null, keepdim });
  }
  argmin(dim, keepdim = false) {
    return this._apply(OPS.argmin, [], { dim: dim ?? null, keepdim });
  }
  var(dim, opts = {}) {
    requireFloat("var", this.dtype);
    const dims = normalizeDims("var", dim, this.ndim);
    const correction = opts.correction ?? (opts.unbiased === false ? 0 : 1);
    const n = dims.reduce((p, d) => p * this.shape[d], 1);
    const d = this.sub(this.mean(dims, true));
    return d.mul(d).sum(dims, opts.keepdim ?? false).div(Math.max(0, n - correction));
  }
  std(dim, opts = {}) {
    requireFloat("std", this.dtype);
    return this.var(dim, opts).sqrt();
  }
  logsumexp(dim, keepdim = false) {
    const dims = normalizeDims("logsumexp", dim, this.ndim);
    const safe = this._stabilizer("logsumexp", dims);
    const r = this.sub(safe).exp().sum(dims, true).log().add(safe);
    return keepdim ? r : r.squeeze(dims);
  }
  _stabilizer(op, dims) {
    if (this._reducesEmpty(op, dims))
      return this._wrap(0);
    const m = this.amax(dims, true).detach();
    return m.where(m.abs().lt(Infinity), 0);
  }
  cumsum(dim, opts) {
    if (opts?.dtype)
      return this.to(opts.dtype).cumsum(dim).to(opts.dtype);
    return this._apply(OPS.cumsum, [], { dim: normalizeDim("cumsum", dim, this.ndim), reverse: false });
  }
  any(dim, keepdim = false) {
    if (this._reducesEmpty("any", dim))
      return this.ne(0).sum(dim, keepdim).gt(0);
    return this.ne(0).amax(dim, keepdim);
  }
  all(dim, keepdim = false) {
    if (this._reducesEmpty("all", dim))
      return this.eq(0).sum(dim, keepdim).eq(0);
    return this.ne(0).amin(dim, keepdim);
  }
  softmax(dim, opts) {
    if (opts?.dtype)
      return this.to(opts.dtype).softmax(dim);
    requireFloat("softmax", this.dtype);
    const d = normalizeDim("softmax", dim, this.ndim);
    if (this.shape[d] === 0)
      return this.clone();
    const e = this.sub(this.amax(d, true).detach()).exp();
    return e.div(e.sum(d, true));
  }
  log_softmax(dim, opts) {
    if (opts?.dtype)
      return this.to(opts.dtype).log_softmax(dim);
    requireFloat("log_softmax", this.dtype);
    const d = normalizeDim("log_softmax", dim, this.ndim);
    if (this.shape[d] === 0)
      return this.clone();
    const shifted = this.sub(this._stabilizer("log_softmax", [d]));
    return shifted.sub(shifted.exp().sum(d, true).log());
  }
  reshape(...shape) {
    const s = inferShape("reshape", flatShapeArgs(shape), this.numel());
    if (shapesEqual(s, this.shape))
      return this;
    return this._apply(OPS.reshape, [], { shape: s });
  }
  view(...shape) {
    const s = inferShape("view", flatShapeArgs(shape), this.numel());
    this._checkView(s);
    return this._apply(OPS.reshape, [], { shape: s });
  }
  _viewAliases(_op, _out) {
    return true;
  }
  _checkView(_shape) {}
  view_as(o) {
    return this.view(o.shape);
  }
  reshape_as(o) {
    return this.reshape(o.shape);
  }
  flatten(start_dim = 0, end_dim = -1) {
    if (this.ndim === 0)
      return this.reshape([1]);
    const s = normalizeDim("flatten", start_dim, this.ndim);
    const e = normalizeDim("flatten", end_dim, this.ndim);
    if (s > e)
      throw new LoomIndexError(`[flatten] start_dim ${start_dim} cannot come after end_dim ${end_dim}`);
    const shape = [...this.shape.slice(0, s), this.shape.slice(s, e + 1).reduce((p, x) => p * x, 1), ...this.shape.slice(e + 1)];
    return this.reshape(shape);
  }
  unflatten(dim, sizes) {
    const d = normalizeDim("unflatten", dim, this.ndim);
    const inner = inferShape("unflatten", sizes, this.shape[d]);
    return this.reshape([...this.shape.slice(0, d), ...inner, ...this.shape.slice(d + 1)]);
  }
  squeeze(dim) {
    const dims = dim === undefined || dim === null ? this.shape.map((_, i) => i) : normalizeDims("squeeze", dim, this.ndim);
    return this.reshape(this.shape.filter((s, i) => !(s === 1 && dims.includes(i))));
  }
  unsqueeze(dim) {
    const d = normalizeDim("unsqueeze", dim, this.ndim + 1);
    const s = [...this.shape];
    s.splice(d, 0, 1);
    return this.reshape(s);
  }
  permute(...dims) {
    const ds = flatShapeArgs(dims).map((d) => normalizeDim("permute", d, this.ndim));
    if (ds.every((d, i) => d === i) && ds.length === this.ndim)
      return this;
    return this._apply(OPS.permute, [], { dims: ds });
  }
  transpose(dim0, dim1) {
    const a = normalizeDim("transpose", dim0, this.ndim);
    const b = normalizeDim("transpose", dim1, this.ndim);
    if (a === b)
      return this;
    const p = this.shape.map((_, i) => i);
    p[a] = b;
    p[b] = a;
    return this.permute(p);
  }
  swapaxes(a, b) {
    return this.transpose(a, b);
  }
  t() {
    if (this.ndim > 2)
      throw new LoomShapeError(`[t] expects a tensor with <= 2 dimensions, but self is ${this.ndim}D`);
    return this.ndim < 2 ? this : this.transpose(0, 1);
  }
  get mT() {
    return this.transpose(-2, -1);
  }
  expand(...sizes) {
    const want = flatShapeArgs(sizes);
    const off = want.length - this.ndim;
    const shape = want.map((s, i) => s === -1 && i >= off ? this.shape[i - off] : s);
    if (shapesEqual(shape, this.shape))
      return this;
    return this._apply(OPS.expand, [], { shape });
  }
  expand_as(o) {
    return this.expand(o.shape);
  }
  sum_to_size(...shape) {
    const s = flatShapeArgs(shape);
    if (s.length === 0)
      return this.sum();
    if (shapesEqual(s, this.shape))
      return this;
    const lead = this.ndim - s.length;
    if (lead < 0)
      throw new LoomShapeError(`[sum_to_size] size ${fmtShape(s)} is not expandable to size ${fmtShape(this.shape)}`);
    const dims = [];
    for (let i = 0;i < this.ndim; i++) {
      if (i < lead)
        dims.push(i);
      else if (s[i - lead] === 1 && this.shape[i] !== 1)
        dims.push(i);
      else if (s[i - lead] !== this.shape[i])
        throw new LoomShapeError(`[sum_to_size] size ${fmtShape(s)} is not expandable to size ${fmtShape(this.shape)}`);
    }
    return this.sum(dims, true).reshape(s);
  }
  narrow(dim, start, length) {
    const d = normalizeDim("narrow", dim, this.ndim);
    const size = this.shape[d];
    const s = start < 0 ? start + size : start;
    if (s < 0 || s > size || length < 0 || s + length > size) {
      throw new LoomIndexError(`[narrow] start (${start}) + length (${length}) exceeds dimension size (${size}) of dim ${dim}`);
    }
    return this._slice(d, s, s + length, 1);
  }
  _slice(dim, start, end, step) {
    if (start === 0 && end === this.shape[dim] && step === 1)
      return this;
    return this._apply(OPS.slice, [], { dim, start, end, step });
  }
  index(...items) {
    return applyIndex(this, planIndex("index", this.shape, items));
  }
  index_put(indices, values, accumulate = false) {
    const plan = planIndex("index_put", this.shape, indexPutItems("index_put", indices));
    return indexPut("index_put", this, plan, this._putValue(values), accumulate);
  }
  index_put_(indices, values, accumulate = false) {
    const plan = planIndex("index_put_", this.shape, indexPutItems("index_put_", indices));
    return this._set("index_put_", (self) => indexPut("index_put_", self, plan, this._putValue(values), accumulate), false);
  }
  set(...args) {
    if (args.length === 0)
      throw new LoomValueError("[set] expects the index items followed by the value");
    const value = args[args.length - 1];
    const plan = planIndex("set", this.shape, args.slice(0, -1));
    const v = typeof value === "object" && !plan.adv.length ? value.to(this.dtype) : this._putValue(value);
    if (!plan.adv.length && !this.isLazy && this.device === "cpu" && !(is_grad_enabled() && v.requires_grad)) {
      const view = applyIndex(this, plan);
      if (view._data().data === this._data().data) {
        this._checkInplace("set");
        view.copy_(v.reshape(valueShape("set", v.shape, view.shape)));
        return this;
      }
    }
    return this._set("set", (self) => indexPut("set", self, plan, v, false), false);
  }
  _putValue(v) {
    return typeof v === "object" ? v : this._wrap(v).to(this.dtype);
  }
  contiguous() {
    return this._isDense() ? this : this._apply(OPS.contiguous, [], {});
  }
  clone() {
    return this._apply(OPS.contiguous, [], {});
  }
  _isDense() {
    return false;
  }
  norm(p = 2, dim, keepdim = false) {
    if (p === 0) {
      const r = no_grad(() => this.ne(0).to(this.dtype).sum(dim, keepdim));
      return this._zeroGrad(r, [this], "norm");
    }
    if (p === Infinity || p === -Infinity) {
      if (this._reducesEmpty("norm", dim))
        return this.abs().sum(dim, keepdim);
      return p > 0 ? this.abs().amax(dim, keepdim) : this.abs().amin(dim, keepdim);
    }
    if (p === 2)
      return this.mul(this).sum(dim, keepdim).sqrt();
    if (p === 1)
      return this.abs().sum(dim, keepdim);
    return this.abs().pow(p).sum(dim, keepdim).pow(1 / p);
  }
  split(split_size_or_sections, dim = 0) {
    const d = normalizeDim("split", dim, this.ndim);
    const n = this.shape[d];
    let sizes;
    if (typeof split_size_or_sections === "number") {
      const k = split_size_or_sections;
      if (k <= 0 && n > 0)
        throw new LoomValueError(`[split] split_size must be positive, got ${k}`);
      sizes = [];
      for (let s = 0;s < n; s += k)
        sizes.push(Math.min(k, n - s));
      if (n === 0)
        sizes = [0];
    } else {
      sizes = [...split_size_or_sections];
      const total = sizes.reduce((p, x) => p + x, 0);
      if (total !== n)
        throw new LoomShapeError(`[split] split_with_sizes expects split_sizes to sum exactly to ${n} (input tensor's size at dimension ${d}), but got split_sizes=${fmtShape(sizes)}`);
    }
    let start = 0;
    return sizes.map((len) => {
      const r = this._slice(d, start, start + len, 1);
      start += len;
      return r;
    });
  }
  chunk(chunks, dim = 0) {
    if (!Number.isInteger(chunks) || chunks <= 0)
      throw new LoomValueError(`[chunk] chunk expects \`chunks\` to be greater than 0, got: ${chunks}`);
    const n = this.shape[normalizeDim("chunk", dim, this.ndim)];
    return this.split(Math.max(1, Math.ceil(n / chunks)), dim);
  }
  tril(diagonal = 0) {
    return this._apply(OPS.tri, [], { diagonal, upper: false });
  }
  triu(diagonal = 0) {
    return this._apply(OPS.tri, [], { diagonal, upper: true });
  }
  gather(dim, index) {
    return this._apply(OPS.gather, [index], { dim: normalizeDim("gather", dim, this.ndim) });
  }
  scatter_add(dim, index, src) {
    if (this.dtype === "bool" && src.dtype === "bool")
      return this.int().scatter_add(dim, index, src.int()).ne(0);
    return this._apply(OPS.scatter_add, [index, src], { dim: normalizeDim("scatter_add", dim, this.ndim) });
  }
  index_select(dim, index) {
    return this._apply(OPS.index_select, [index], { dim: normalizeDim("index_select", dim, this.ndim) });
  }
  index_add(dim, index, source, opts) {
    if (this.dtype === "bool" && source.dtype === "bool")
      return this.int().index_add(dim, index, source.int(), opts).ne(0);
    const src = opts?.alpha === undefined || opts.alpha === 1 ? source : source.mul(opts.alpha);
    return this._apply(OPS.index_add, [index, src], { dim: normalizeDim("index_add", dim, this.ndim) });
  }
  matmul(o) {
    if (this.ndim === 0 || o.ndim === 0) {
      throw new LoomShapeError(`[matmul] both arguments need at least 1 dimension, got ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    }
    const a1 = this.ndim === 1, b1 = o.ndim === 1;
    const a = a1 ? this.unsqueeze(0) : this;
    const b = b1 ? o.unsqueeze(-1) : o;
    if (a1 || b1) {
      const ka = a.shape[a.ndim - 1], kb = b.shape[b.ndim - 2];
      if (ka !== kb)
        throw new LoomShapeError(`[matmul] shapes ${fmtShape(this.shape)} and ${fmtShape(o.shape)}: ${ka} != ${kb}`);
    }
    let r = a._apply(OPS.matmul, [b], {});
    if (b1)
      r = r.squeeze(-1);
    if (a1)
      r = r.squeeze(a1 && b1 ? -1 : -2);
    return r;
  }
  mm(o) {
    if (this.ndim !== 2 || o.ndim !== 2)
      throw new LoomShapeError(`[mm] expects 2-D tensors, got ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    return this.matmul(o);
  }
  bmm(o) {
    if (this.ndim !== 3 || o.ndim !== 3)
      throw new LoomShapeError(`[bmm] expects 3-D tensors, got ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    if (this.shape[0] !== o.shape[0])
      throw new LoomShapeError(`[bmm] batch sizes differ: ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    return this.matmul(o);
  }
  to(target) {
    if (typeof target === "object")
      return this.to(target.dtype).to(target.device);
    if (!DTYPES.includes(target)) {
      return target === this.device ? this : this._to_device(target);
    }
    if (target === this.dtype)
      return this;
    return this._apply(OPS.cast, [], { dtype: target });
  }
  _to_device(device) {
    const out = this._on(device, moveData(this._data(), this.device, device));
    if (is_grad_enabled() && this.requires_grad) {
      const from = this.device;
      this._record(out, "to", [this], (g) => [g.to(from)]);
    }
    return out;
  }
  cpu() {
    return this.to("cpu");
  }
  float() {
    return this.to("float32");
  }
  double() {
    return this.to("float64");
  }
  half() {
    return this.to("float16");
  }
  bfloat16() {
    return this.to("bfloat16");
  }
  int() {
    return this.to("int32");
  }
  long() {
    return this.to("int64");
  }
  bool() {
    return this.to("bool");
  }
  _checkInplace(op) {
    if (is_grad_enabled() && this.requires_grad) {
      throw new LoomAutogradError(this.is_leaf ? `[${op}] a leaf Variable that requires grad is being used in an in-place operation; wrap the update in no_grad()` : `[${op}] in-place operations on tensors that require grad are not supported; use the out-of-place op`);
    }
  }
  copy_(src) {
    return this._set("copy_", (self) => typeof src === "object" ? src : self._wrap(src), false);
  }
  add_(o, opts) {
    return this._set("add_", (self) => self.add(o, opts));
  }
  sub_(o, opts) {
    return this._set("sub_", (self) => self.sub(o, opts));
  }
  mul_(o) {
    return this._set("mul_", (self) => self.mul(o));
  }
  div_(o) {
    return this._set("div_", (self) => self.div(o));
  }
  clamp_(min, max) {
    return this._set("clamp_", (self) => self.clamp(min, max));
  }
  fill_(v) {
    return this._set("fill_", (self) => self._wrap(v), false);
  }
  zero_() {
    return this._set("zero_", (self) => self._wrap(0), false);
  }
  masked_fill_(mask, value) {
    return this._set("masked_fill_", (self) => self.masked_fill(mask, value));
  }
  _snapshot() {
    const d = this.detach();
    d._vc = { v: this._version };
    return d;
  }
  _set(op, value, checkCast = true) {
    this._checkInplace(op);
    const self = this;
    let v = value(self);
    if (v.requires_grad && is_grad_enabled())
      v = value(this.isLazy ? this._snapshot() : no_grad(() => this.clone()));
    if (checkCast && !canCast(v.dtype, this.dtype)) {
      throw new LoomDtypeError(`[${op}] result type ${v.dtype} can't be cast to the desired output type ${this.dtype}`);
    }
    let src = v.to(this.dtype).expand(this.shape);
    if (src.isLazy !== this.isLazy)
      src = this.isLazy ? src.lazy() : src.defer();
    this._assign(src);
    if (src.requires_grad && is_grad_enabled())
      this._record(self, op, [src], (g) => [g]);
    return this;
  }
  full_like(value, dtype = this.dtype) {
    return this._constant(scalarData(dtype, value)).expand(this.shape);
  }
  zeros_like() {
    return this.full_like(0);
  }
  ones_like() {
    return this.full_like(1);
  }
  backward(gradient, opts = {}) {
    let g = gradient ?? null;
    if (!g) {
      if (this.numel() !== 1)
        throw new LoomAutogradError("grad can be implicitly created only for scalar outputs");
      g = this.ones_like().contiguous();
    }
    runBackward([this], [g], { ...opts, accumulate: true });
  }
  item() {
    if (this.numel() !== 1)
      throw new LoomValueError(`[item] a Tensor with ${this.numel()} elements cannot be converted to Scalar`);
    return toFloat64(this._data())[0];
  }
  tolist() {
    const v = toFloat64(this._data());
    const isBool = this.dtype === "bool";
    const shape = this.shape;
    const nd = shape.length;
    if (nd === 0)
      return isBool ? v[0] !== 0 : v[0];
    const build = (d, off, stride) => {
      const n = shape[d];
      const out = [];
      if (d === nd - 1) {
        for (let i = 0;i < n; i++)
          out.push(isBool ? v[off + i] !== 0 : v[off + i]);
        return out;
      }
      const inner = stride / shape[d + 1];
      for (let i = 0;i < n; i++)
        out.push(build(d + 1, off + i * stride, inner));
      return out;
    };
    return build(0, 0, numel(shape) / shape[0]);
  }
  dataSync() {
    return toFloat64(this._data());
  }
  async data() {
    const d = this._data();
    await backendFor(this.device).read?.(d);
    return toFloat64(d);
  }
  toString() {
    return formatTensor(this.shape, this.dtype, toFloat64(this._data()), this.grad_fn?.name ?? null, this.requires_grad);
  }
  [Symbol.for("nodejs.util.inspect.custom")]() {
    return this.toString();
  }
}

// src/lazy/lazy_tensor.ts
function layoutStrides(n) {
  const chain = [];
  let base = n;
  while (!base.realized && base.op?.kind === "view") {
    chain.push(base);
    base = base.inputs[0];
  }
  if (!base.realized && chain.length === 0)
    return null;
  const dense = (m) => ({ dtype: m.dtype, shape: m.shape, strides: contiguousStrides(m.shape), offset: 0, data: NO_DATA3 });
  let t = base.realized ?? dense(base);
  for (let i = chain.length - 1;i >= 0; i--) {
    const v = chain[i];
    t = v.op.ref(t, v.attrs) ?? dense(v);
  }
  return t.strides;
}
var NO_DATA3 = new Float64Array(0);

class LazyTensor extends TensorOps {
  node;
  device;
  isLazy = true;
  _origin = null;
  _originPrivate = false;
  constructor(node, device = "cpu") {
    super();
    this.node = node;
    this.device = device;
  }
  get shape() {
    return this.node.shape;
  }
  get dtype() {
    return this.node.dtype;
  }
  _make(op, inputs, attrs, shape, dtype) {
    const nodes = new Array(inputs.length);
    for (let i = 0;i < inputs.length; i++)
      nodes[i] = inputs[i].node;
    return new LazyTensor(new Node(op, nodes, attrs, shape, dtype), this.device);
  }
  _constant(data) {
    return new LazyTensor(Node.constant(data), this.device);
  }
  _record(out, name, inputs, apply) {
    super._record(out, name, inputs, apply);
    out.node.tracked = out.grad_fn;
  }
  _on(device, data) {
    return new LazyTensor(Node.source(data), device);
  }
  _data() {
    flush(this.device, [this.node]);
    return this.node.realized;
  }
  detach() {
    const t = new LazyTensor(this.node, this.device);
    t._vc = this._version_counter();
    return t;
  }
  lazy() {
    return this;
  }
  _checkView(shape) {
    const strides = layoutStrides(this.node);
    if (strides)
      checkView(this.shape, strides, shape);
  }
  _assign(src) {
    const origin = this._origin;
    this.node = src.node;
    this._vc = { v: this._version + 1 };
    if (origin) {
      const value = Tensor._pending(src.node, this.device);
      if (this._originPrivate)
        origin._write_private(value);
      else
        origin._assign_from(value);
    }
  }
  _linkTo(t) {
    if (!is_grad_enabled())
      return;
    this._record(this, "lazy", [t], (g) => [g]);
  }
  eval() {
    this._data();
    return this._asEager(new Tensor(ownValue(this.node, this.device), this.device));
  }
  _asEager(t) {
    t._vc = this._version_counter();
    if (this.requires_grad && is_grad_enabled()) {
      t.grad_fn = { name: "eval", inputs: [this], apply: (g) => [g.lazy()], released: false };
      t.requires_grad = true;
    }
    return t;
  }
  realize() {
    return this.eval();
  }
  defer(retain = false) {
    const t = this._asEager(Tensor._pending(this.node, this.device));
    if (retain)
      retainValue(t, true);
    return t;
  }
  plan() {
    return planFor([this.node], backendFor(this.device), this.device);
  }
  explain() {
    return this.plan().explain();
  }
  toDot() {
    return toDot([this.node]);
  }
}
set_grad_materializer((pairs) => pairs.map((p) => {
  const { target, grad } = p;
  if (target.isLazy === grad.isLazy)
    return grad;
  return target.isLazy ? grad.lazy() : grad.defer();
}));

// src/lazy/shape_ops.ts
function int64(x, values) {
  return x._constant(fromValues("int64", [values.length], values));
}
function filled(x, shape, value, dtype = x.dtype) {
  return x._constant(scalarData(dtype, value)).expand(shape);
}
function catDim(ts, dim) {
  return ts.length === 1 ? ts[0] : ts[0]._apply(OPS.cat, ts.slice(1), { dim });
}
function dimList(dims) {
  return typeof dims === "number" ? [dims] : dims;
}
function repeat(x, ...sizes) {
  const reps = sizes.length === 1 && Array.isArray(sizes[0]) ? [...sizes[0]] : sizes;
  if (reps.length < x.ndim) {
    throw new LoomValueError(`[repeat] Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor (repeats ${fmtShape(reps)}, tensor ${fmtShape(x.shape)})`);
  }
  if (reps.some((r) => !Number.isInteger(r) || r < 0))
    throw new LoomValueError(`[repeat] Trying to create tensor with negative dimension: repeats ${fmtShape(reps)}`);
  const xs = [...new Array(reps.length - x.ndim).fill(1), ...x.shape];
  return x.reshape(xs.flatMap((s) => [1, s])).expand(xs.flatMap((s, i) => [reps[i], s])).reshape(xs.map((s, i) => s * reps[i]));
}
function tile(x, dims) {
  const reps = [...new Array(Math.max(0, x.ndim - dims.length)).fill(1), ...dims];
  return repeat(x, reps);
}
function repeat_interleave(x, repeats, dim) {
  if (repeats === undefined) {
    if (x.ndim > 1 || x.dtype !== "int64" && x.dtype !== "int32") {
      throw new LoomValueError(`[repeat_interleave] repeat_interleave(repeats) expects a 0-d or 1-D int tensor of repeats, got ${x.dtype} ${fmtShape(x.shape)}`);
    }
    const n = x.numel();
    return repeat_interleave(x._constant(fromValues("int64", [n], Array.from({ length: n }, (_, i) => i))), x);
  }
  let v = x;
  let d;
  if (dim === undefined || dim === null) {
    v = x.reshape([x.numel()]);
    d = 0;
  } else
    d = normalizeDim("repeat_interleave", dim, x.ndim);
  if (v.ndim === 0)
    v = v.reshape([1]);
  const n = v.shape[d];
  if (typeof repeats === "number") {
    if (!Number.isInteger(repeats) || repeats < 0)
      throw new LoomValueError(`[repeat_interleave] repeats can not be negative, got ${repeats}`);
    const e = [...v.shape.slice(0, d + 1), repeats, ...v.shape.slice(d + 1)];
    return v.unsqueeze(d + 1).expand(e).reshape([...v.shape.slice(0, d), n * repeats, ...v.shape.slice(d + 1)]);
  }
  let counts;
  if (repeats instanceof TensorOps) {
    const r = repeats;
    if (r.dtype !== "int64" && r.dtype !== "int32")
      throw new LoomDtypeError(`[repeat_interleave] repeats has to be Long or Int tensor, got ${r.dtype}`);
    if (r.ndim > 1)
      throw new LoomShapeError(`[repeat_interleave] repeats must be 0-dim or 1-dim tensor, got ${fmtShape(r.shape)}`);
    counts = [...toFloat64(r._data())];
  } else
    counts = [...repeats];
  if (counts.length === 1 && n !== 1)
    return repeat_interleave(v, counts[0], d);
  if (counts.length !== n) {
    throw new LoomShapeError(`[repeat_interleave] repeats must have the same size as input along dim, but got repeats.size(0) = ${counts.length} and input.size(${d}) = ${n}`);
  }
  const idx = [];
  counts.forEach((c, i) => {
    if (!Number.isInteger(c) || c < 0)
      throw new LoomValueError(`[repeat_interleave] repeats can not be negative, got ${c}`);
    for (let k = 0;k < c; k++)
      idx.push(i);
  });
  return v.index_select(d, int64(v, idx));
}
function flip(x, dims) {
  if (typeof dims !== "number" && dims.length === 0)
    return x.clone();
  const ds = normalizeDims("flip", dimList(dims), x.ndim);
  let r = x;
  for (const d of ds) {
    const n = r.shape[d];
    if (n > 1)
      r = r.index_select(d, int64(r, Array.from({ length: n }, (_, i) => n - 1 - i)));
  }
  return r === x ? x.clone() : r;
}
function fliplr(x) {
  if (x.ndim < 2)
    throw new LoomShapeError(`[fliplr] Input must be >= 2-d, got ${fmtShape(x.shape)}`);
  return flip(x, [1]);
}
function flipud(x) {
  if (x.ndim < 1)
    throw new LoomShapeError(`[flipud] Input must be >= 1-d, got ${fmtShape(x.shape)}`);
  return flip(x, [0]);
}
function roll(x, shifts, dims) {
  const sh = dimList(shifts);
  if (dims === undefined || dims === null || typeof dims !== "number" && dims.length === 0) {
    if (sh.length !== 1)
      throw new LoomValueError(`[roll] shifts and dimensions must align. shifts: ${sh.length}, dims: 0`);
    return roll(x.reshape([x.numel()]), sh[0], 0).reshape(x.shape);
  }
  const ds = dimList(dims);
  if (sh.length !== ds.length)
    throw new LoomValueError(`[roll] shifts and dimensions must align. shifts: ${sh.length}, dims: ${ds.length}`);
  let r = x;
  sh.forEach((s, i) => {
    const d = normalizeDim("roll", ds[i], x.ndim);
    const n = r.shape[d];
    if (n === 0)
      return;
    const k = (s % n + n) % n;
    if (k !== 0)
      r = catDim([r._slice(d, n - k, n, 1), r._slice(d, 0, n - k, 1)], d);
  });
  return r === x ? x.clone() : r;
}
function select(x, dim, index) {
  if (x.ndim === 0)
    throw new LoomIndexError("[select] select() cannot be applied to a 0-dim tensor.");
  const d = normalizeDim("select", dim, x.ndim);
  const n = x.shape[d];
  if (!Number.isInteger(index) || index < -n || index >= n) {
    throw new LoomIndexError(`[select] select(): index ${index} out of range for tensor of size ${fmtShape(x.shape)} at dimension ${d}`);
  }
  const i = index < 0 ? index + n : index;
  return x._slice(d, i, i + 1, 1).squeeze(d);
}
function outer(x, v) {
  if (x.ndim !== 1 || v.ndim !== 1) {
    throw new LoomShapeError(`[outer] expected 1-D arguments, got self ${fmtShape(x.shape)} and vec2 ${fmtShape(v.shape)}`);
  }
  return x.unsqueeze(1).mul(v.unsqueeze(0));
}
function diagonal(x, offset = 0, dim1 = 0, dim2 = 1) {
  const d1 = normalizeDim("diagonal", dim1, x.ndim), d2 = normalizeDim("diagonal", dim2, x.ndim);
  if (d1 === d2)
    throw new LoomValueError(`[diagonal] diagonal dimensions cannot be identical ${dim1}, ${dim2}`);
  const rest = x.shape.map((_, i) => i).filter((i) => i !== d1 && i !== d2);
  const a = x.shape[d1], b = x.shape[d2];
  const L = Math.max(0, offset >= 0 ? Math.min(a, b - offset) : Math.min(a + offset, b));
  const lead = rest.map((i) => x.shape[i]);
  const flat = x.permute([...rest, d1, d2]).reshape([...lead, a * b]);
  const last = lead.length;
  if (L === 0)
    return flat._slice(last, 0, 0, 1);
  const start = offset >= 0 ? offset : -offset * b;
  return flat._slice(last, start, start + (L - 1) * (b + 1) + 1, b + 1);
}
function diag(x, diagonal_ = 0) {
  if (x.ndim === 2)
    return diagonal(x, diagonal_, 0, 1);
  if (x.ndim !== 1)
    throw new LoomShapeError(`[diag] diag(): Supports 1D or 2D tensors. Got ${x.ndim}D (shape ${fmtShape(x.shape)})`);
  const n = x.shape[0], k = diagonal_, m = n + Math.abs(k);
  const pos = Array.from({ length: n }, (_, i) => k >= 0 ? i * m + i + k : (i - k) * m + i);
  const covered = new Uint8Array(m * m);
  for (const p of pos)
    covered[p] = 1;
  const placed = filled(x, [m * m], -0).index_add(0, int64(x, pos), x);
  const mask = x._constant(fromValues("bool", [m * m], covered));
  return placed.where(mask, filled(x, [m * m], 0)).reshape([m, m]);
}
function masked_select(x, mask) {
  if (mask.dtype !== "bool")
    throw new LoomDtypeError(`[masked_select] masked_select: expected BoolTensor for mask, got ${mask.dtype}`);
  const shape = broadcastShapes("masked_select", x.shape, mask.shape);
  if (shape.length === 0)
    return masked_select(x.reshape([1]), mask.reshape([1]));
  return x.expand(shape).index(mask.expand(shape));
}
function nonzero(x, opts) {
  const v = toFloat64(x._data());
  const nd = x.ndim;
  const coords = Array.from({ length: nd }, () => []);
  let count = 0;
  const idx = new Array(nd).fill(0);
  for (let e = 0;e < v.length; e++) {
    if (v[e] !== 0) {
      for (let d = 0;d < nd; d++)
        coords[d].push(idx[d]);
      count++;
    }
    for (let d = nd - 1;d >= 0; d--) {
      if (++idx[d] < x.shape[d])
        break;
      idx[d] = 0;
    }
  }
  if (opts?.as_tuple) {
    if (nd === 0)
      return [int64(x, new Array(count).fill(0))];
    return coords.map((c) => int64(x, c));
  }
  const flat = new Float64Array(count * nd);
  for (let i = 0;i < count; i++)
    for (let d = 0;d < nd; d++)
      flat[i * nd + d] = coords[d][i];
  return x._constant(fromValues("int64", [count, nd], flat));
}
var proto = TensorOps.prototype;
proto.repeat = function(...sizes) {
  return repeat(this, ...sizes);
};
proto.tile = function(dims) {
  return tile(this, dims);
};
proto.repeat_interleave = function(repeats, dim) {
  return repeat_interleave(this, repeats, dim);
};
proto.flip = function(dims) {
  return flip(this, dims);
};
proto.fliplr = function() {
  return fliplr(this);
};
proto.flipud = function() {
  return flipud(this);
};
proto.roll = function(shifts, dims) {
  return roll(this, shifts, dims);
};
proto.select = function(dim, index) {
  return select(this, dim, index);
};
proto.outer = function(v) {
  return outer(this, v);
};
proto.diag = function(d = 0) {
  return diag(this, d);
};
proto.diagonal = function(offset = 0, dim1 = 0, dim2 = 1) {
  return diagonal(this, offset, dim1, dim2);
};
proto.masked_select = function(mask) {
  return masked_select(this, mask);
};
proto.nonzero = function(opts) {
  return nonzero(this, opts);
};

// src/lazy/scatter_ops.ts
var REDUCES = ["sum", "prod", "mean", "amax", "amin"];
function plan(op, selfShape, dim, index, srcShape) {
  if (index.dtype !== "int64")
    throw new LoomDtypeError(`[${op}] ${op}(): Expected dtype int64 for index, got ${index.dtype}`);
  const S = selfShape.length ? selfShape : [1];
  const I = index.shape.length ? index.shape : [1];
  const R = srcShape.length ? srcShape : [1];
  if (index.shape.length !== 0 || selfShape.length !== 0) {
    if (I.length !== S.length || I.length !== R.length) {
      throw new LoomShapeError(`[${op}] Index tensor must have the same number of dimensions as self and src tensors: index ${fmtShape(index.shape)}, self ${fmtShape(selfShape)}, src ${fmtShape(srcShape)}`);
    }
    if (I.some((s, d) => d !== dim && s > S[d] || s > R[d])) {
      throw new LoomShapeError(`[${op}] Expected index ${fmtShape(index.shape)} to be smaller than self ${fmtShape(selfShape)} apart from dimension ${dim} and to be smaller size than src ${fmtShape(srcShape)}`);
    }
  }
  const iv = toFloat64(index._data());
  const ss = contiguousStrides(S), rs = contiguousStrides(R);
  const byTarget = new Map;
  const c = new Array(I.length).fill(0);
  const n = numel(I);
  for (let e = 0;e < n; e++) {
    const k = iv[e];
    if (!(k >= 0 && k < S[dim]))
      throw new LoomIndexError(`[${op}] index ${k} is out of bounds for dimension ${dim} with size ${S[dim]}`);
    let t = 0, s = 0;
    for (let d = 0;d < I.length; d++) {
      t += (d === dim ? k : c[d]) * ss[d];
      s += c[d] * rs[d];
    }
    let g = byTarget.get(t);
    if (!g)
      byTarget.set(t, g = []);
    g.push(s);
    for (let d = I.length - 1;d >= 0; d--) {
      if (++c[d] < I[d])
        break;
      c[d] = 0;
    }
  }
  return { targets: [...byTarget.keys()], groups: [...byTarget.values()] };
}
function place(self, targets, values) {
  const N = self.numel();
  const flat = self.reshape([N]);
  const pos = self._constant(fromValues("int64", [targets.length], targets));
  const covered = new Uint8Array(N);
  for (const t of targets)
    covered[t] = 1;
  const placed = flat.full_like(-0).index_add(0, pos, values);
  return placed.where(self._constant(fromValues("bool", [N], covered)), flat).reshape(self.shape);
}
function scatter(self, dim, index, src, opts = {}) {
  const d = normalizeDim("scatter", dim, self.ndim);
  const s = typeof src === "object" ? src : self._constant(scalarData(self.dtype, Number(src))).expand(index.shape);
  if (opts.reduce !== undefined) {
    if (opts.reduce !== "add" && opts.reduce !== "multiply")
      throw new LoomValueError(`[scatter] reduce argument must be either add or multiply, got ${opts.reduce}`);
    return scatter_reduce(self, dim, index, s, opts.reduce === "add" ? "sum" : "prod");
  }
  if (s.dtype !== self.dtype)
    throw new LoomDtypeError(`[scatter] scatter(): Expected self.dtype to be equal to src.dtype, got ${self.dtype} and ${s.dtype}`);
  const p = plan("scatter", self.shape, d, index, s.shape);
  if (p.targets.length === 0)
    return self.clone();
  const last = p.groups.map((g) => g[g.length - 1]);
  const vals = s.reshape([s.numel()]).index_select(0, self._constant(fromValues("int64", [last.length], last)));
  return place(self, p.targets, vals);
}
function scatter_reduce(self, dim, index, src, reduce, opts = {}) {
  if (!REDUCES.includes(reduce))
    throw new LoomValueError(`[scatter_reduce] reduce argument must be either sum, prod, mean, amax or amin, got ${reduce}`);
  const d = normalizeDim("scatter_reduce", dim, self.ndim);
  if (src.dtype !== self.dtype)
    throw new LoomDtypeError(`[scatter_reduce] scatter_reduce(): Expected self.dtype to be equal to src.dtype, got ${self.dtype} and ${src.dtype}`);
  const p = plan("scatter_reduce", self.shape, d, index, src.shape);
  if (p.targets.length === 0)
    return self.clone();
  const inc = opts.include_self ?? true;
  const buckets = new Map;
  p.groups.forEach((g, k) => {
    let b = buckets.get(g.length);
    if (!b)
      buckets.set(g.length, b = []);
    b.push(k);
  });
  const srcFlat = src.reshape([src.numel()]);
  const selfFlat = self.reshape([self.numel()]);
  const int64 = (v) => self._constant(fromValues("int64", [v.length], v));
  const parts = [];
  const order = [];
  for (const [L, ks] of buckets) {
    const T = ks.length;
    const table = new Float64Array(T * L);
    ks.forEach((k, t) => table.set(p.groups[k], t * L));
    let vals = srcFlat.index_select(0, int64(table)).reshape([T, L]);
    const targets = ks.map((k) => p.targets[k]);
    if (inc)
      vals = selfFlat.index_select(0, int64(targets)).reshape([T, 1])._apply(OPS.cat, [vals], { dim: 1 });
    parts.push(reduceRows2(vals, reduce));
    order.push(...targets);
  }
  const r = parts.length === 1 ? parts[0] : parts[0]._apply(OPS.cat, parts.slice(1), { dim: 0 });
  return place(self, order, r.to(self.dtype));
}
function reduceRows2(v, reduce) {
  if (reduce === "sum")
    return v.sum(1);
  if (reduce === "amax")
    return v.amax(1);
  if (reduce === "amin")
    return v.amin(1);
  if (reduce === "prod")
    return prodRows(v);
  const n = v.shape[1];
  return isIntegral(v.dtype) ? v.sum(1).div(n, { rounding_mode: "floor" }) : v.sum(1).div(n);
}
function prodRows(v) {
  let P = v.shape[1];
  if (P <= 16) {
    let acc = v._slice(1, 0, 1, 1);
    for (let j = 1;j < P; j++)
      acc = acc.mul(v._slice(1, j, j + 1, 1));
    return acc.squeeze(1);
  }
  let r = v;
  while (P > 1) {
    const h = Math.floor(P / 2);
    const prod = r._slice(1, 0, h, 1).mul(r._slice(1, h, 2 * h, 1));
    r = P % 2 ? prod._apply(OPS.cat, [r._slice(1, 2 * h, P, 1)], { dim: 1 }) : prod;
    P = r.shape[1];
  }
  return r.squeeze(1);
}
var proto2 = TensorOps.prototype;
proto2.scatter = function(dim, index, src, opts) {
  return scatter(this, dim, index, src, opts);
};
proto2.scatter_reduce = function(dim, index, src, reduce, opts) {
  return scatter_reduce(this, dim, index, src, reduce, opts);
};
proto2.scatter_ = function(dim, index, src, opts) {
  return this._set("scatter_", (s) => scatter(s, dim, index, src, opts));
};
proto2.scatter_reduce_ = function(dim, index, src, reduce, opts) {
  return this._set("scatter_reduce_", (s) => scatter_reduce(s, dim, index, src, reduce, opts));
};

// src/tensor/rng.ts
var N = 624;
var M = 397;
var STATE_BYTES = 4 * N + 4 + 8 + 1 + 8;

class Generator {
  mt = new Uint32Array(N);
  mti = N + 1;
  _seed = 0;
  spare = null;
  constructor(seed = 5489) {
    this.manual_seed(seed);
  }
  manual_seed(seed) {
    this._seed = seed;
    const mt = this.mt;
    mt[0] = seed >>> 0;
    for (let i = 1;i < N; i++) {
      const prev = mt[i - 1] ^ mt[i - 1] >>> 30;
      mt[i] = Math.imul(1812433253, prev) + i >>> 0;
    }
    this.mti = N;
    this.spare = null;
    return this;
  }
  initial_seed() {
    return this._seed;
  }
  get_state() {
    const out = new Uint8Array(STATE_BYTES);
    const v = new DataView(out.buffer);
    for (let i = 0;i < N; i++)
      v.setUint32(4 * i, this.mt[i], true);
    v.setUint32(4 * N, this.mti, true);
    v.setFloat64(4 * N + 4, this._seed, true);
    v.setUint8(4 * N + 12, this.spare === null ? 0 : 1);
    v.setFloat64(4 * N + 13, this.spare ?? 0, true);
    return out;
  }
  set_state(state) {
    if (state.length !== STATE_BYTES)
      throw new LoomValueError(`[Generator.set_state] expected ${STATE_BYTES} bytes, got ${state.length}`);
    const v = new DataView(state.buffer, state.byteOffset, state.byteLength);
    const mti = v.getUint32(4 * N, true);
    if (mti > N + 1)
      throw new LoomValueError(`[Generator.set_state] position ${mti} is outside the state (at most ${N + 1})`);
    for (let i = 0;i < N; i++)
      this.mt[i] = v.getUint32(4 * i, true);
    this.mti = mti;
    this._seed = v.getFloat64(4 * N + 4, true);
    this.spare = v.getUint8(4 * N + 12) ? v.getFloat64(4 * N + 13, true) : null;
    return this;
  }
  random() {
    const mt = this.mt;
    if (this.mti >= N) {
      let kk = 0;
      for (;kk < N - M; kk++) {
        const y = mt[kk] & 2147483648 | mt[kk + 1] & 2147483647;
        mt[kk] = mt[kk + M] ^ y >>> 1 ^ (y & 1 ? 2567483615 : 0);
      }
      for (;kk < N - 1; kk++) {
        const y = mt[kk] & 2147483648 | mt[kk + 1] & 2147483647;
        mt[kk] = mt[kk + (M - N)] ^ y >>> 1 ^ (y & 1 ? 2567483615 : 0);
      }
      const y = mt[N - 1] & 2147483648 | mt[0] & 2147483647;
      mt[N - 1] = mt[M - 1] ^ y >>> 1 ^ (y & 1 ? 2567483615 : 0);
      this.mti = 0;
    }
    let y = mt[this.mti++];
    y ^= y >>> 11;
    y ^= y << 7 & 2636928640;
    y ^= y << 15 & 4022730752;
    y ^= y >>> 18;
    return y >>> 0;
  }
  uniform() {
    return (this.random() & 16777215) * 0.00000005960464477539063;
  }
  uniform53() {
    const hi = this.random() >>> 5;
    const lo = this.random() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }
  normal() {
    if (this.spare !== null) {
      const s = this.spare;
      this.spare = null;
      return s;
    }
    const u1 = 1 - this.uniform53();
    const u2 = this.uniform53();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spare = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
  randint(low, high) {
    const span = high - low;
    if (span <= 4294967296)
      return low + this.random() % span;
    return low + Math.floor(this.uniform53() * span);
  }
}
var default_generator = new Generator(67280421310721 % 2 ** 32);

// src/lazy/py_args.ts
function isKw(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof TensorOps) && !ArrayBuffer.isView(v);
}
function bindArgs(op, names, args, kwOnly = []) {
  let pos = args;
  let kw = {};
  const last = args[args.length - 1];
  if (args.length > 0 && isKw(last)) {
    kw = last;
    pos = args.slice(0, -1);
  }
  if (pos.length > names.length) {
    throw new LoomValueError(`[${op}] takes ${names.length} positional arguments after input but ${pos.length} were given`);
  }
  const out = {};
  pos.forEach((v, i) => {
    out[names[i]] = v;
  });
  for (const [k, v] of Object.entries(kw)) {
    if (!names.includes(k) && !kwOnly.includes(k)) {
      throw new LoomValueError(`[${op}] got an unexpected keyword argument '${k}' (parameters: ${[...names, ...kwOnly].join(", ")})`);
    }
    if (k in out && out[k] !== undefined)
      throw new LoomValueError(`[${op}] got multiple values for argument '${k}'`);
    out[k] = v;
  }
  return out;
}

// src/lazy/sort_ops.ts
function pair(values, indices) {
  return Object.assign([values, indices], { values, indices });
}
function sortedPair(x, op, dim, descending, k) {
  const d = normalizeDim(op, dim, x.ndim);
  const n = x.ndim ? x.shape[d] : 1;
  const kk = k ?? n;
  if (!Number.isInteger(kk) || kk < 0 || kk > n) {
    throw new LoomIndexError(`[${op}] selected index k out of range: k = ${kk} for dim ${d} of size ${n} (input ${fmtShape(x.shape)})`);
  }
  const indices = x._apply(OPS.argsort, [], { dim: d, descending, k: kk });
  return pair(x.gather(d, indices), indices);
}
function sort(x, ...args) {
  const a = bindArgs("sort", ["dim", "descending"], args, ["stable"]);
  return sortedPair(x, "sort", a.dim ?? -1, a.descending ?? false);
}
function argsort3(x, ...args) {
  const a = bindArgs("argsort", ["dim", "descending"], args, ["stable"]);
  const d = normalizeDim("argsort", a.dim ?? -1, x.ndim);
  return x._apply(OPS.argsort, [], { dim: d, descending: a.descending ?? false, k: x.ndim ? x.shape[d] : 1 });
}
function msort(x) {
  return sortedPair(x, "msort", 0, false).values;
}
function topk(x, ...args) {
  const a = bindArgs("topk", ["k", "dim", "largest", "sorted"], args);
  if (a.k === undefined)
    throw new LoomValueError("[topk] missing required argument 'k'");
  const largest = a.largest ?? true;
  return sortedPair(x, "topk", a.dim ?? -1, largest, a.k);
}
function kthvalue(x, ...args) {
  const a = bindArgs("kthvalue", ["k", "dim", "keepdim"], args);
  const k = a.k;
  const d = normalizeDim("kthvalue", a.dim ?? -1, x.ndim);
  const n = x.ndim ? x.shape[d] : 1;
  if (!Number.isInteger(k) || k < 1 || k > n) {
    throw new LoomIndexError(`[kthvalue] selected number k out of range for dimension ${d}: k = ${k}, size ${n} (input ${fmtShape(x.shape)})`);
  }
  const [v, i] = sortedPair(x, "kthvalue", d, false, k);
  if (x.ndim === 0)
    return pair(v, i);
  const vk = v.narrow(d, k - 1, 1), ik = i.narrow(d, k - 1, 1);
  return a.keepdim ? pair(vk, ik) : pair(vk.squeeze(d), ik.squeeze(d));
}
function multinomial(probs, ...args) {
  const a = bindArgs("multinomial", ["num_samples", "replacement"], args, ["generator"]);
  const ns = a.num_samples, replacement = a.replacement ?? false;
  const gen = a.generator ?? default_generator;
  if (!isFloating(probs.dtype))
    throw new LoomDtypeError(`[multinomial] only supports floating-point dtypes for input, got ${probs.dtype}`);
  if (probs.ndim !== 1 && probs.ndim !== 2)
    throw new LoomShapeError(`[multinomial] prob_dist must be 1 or 2 dim, got ${fmtShape(probs.shape)}`);
  if (!Number.isInteger(ns) || ns <= 0)
    throw new LoomValueError(`[multinomial] cannot sample n_sample <= 0 samples (num_samples = ${ns})`);
  const C = probs.shape[probs.ndim - 1], B = probs.ndim === 2 ? probs.shape[0] : 1;
  if (!replacement && ns > C) {
    throw new LoomValueError(`[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without replacement (num_samples = ${ns}, categories = ${C})`);
  }
  const p = toFloat64(probs._data());
  const out = new Float64Array(B * ns);
  const w = new Float64Array(C);
  for (let b = 0;b < B; b++) {
    let total = 0;
    for (let c = 0;c < C; c++) {
      const v = p[b * C + c];
      if (v !== v || v === Infinity)
        throw new LoomValueError(`[multinomial] invalid multinomial distribution (encountering probability entry = infinity or NaN) in row ${b}`);
      if (v < 0)
        throw new LoomValueError(`[multinomial] invalid multinomial distribution (encountering probability entry < 0) in row ${b}`);
      w[c] = v;
      total += v;
    }
    if (!(total > 0))
      throw new LoomValueError(`[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row ${b}`);
    for (let s = 0;s < ns; s++) {
      const c = total > 0 ? draw(w, total, gen.uniform53()) : w.findIndex((v) => v >= 0);
      out[b * ns + s] = c;
      if (!replacement) {
        w[c] = -1;
        total = 0;
        for (let j = 0;j < C; j++)
          if (w[j] > 0)
            total += w[j];
      }
    }
  }
  return probs._constant(fromValues("int64", probs.ndim === 2 ? [B, ns] : [ns], out));
}
function draw(w, total, u) {
  const target = u * total;
  let acc = 0, last = -1;
  for (let c = 0;c < w.length; c++) {
    const v = w[c];
    if (v <= 0)
      continue;
    acc += v;
    last = c;
    if (acc > target)
      return c;
  }
  return last;
}
var proto3 = TensorOps.prototype;
proto3.sort = function(...args) {
  return sort(this, ...args);
};
proto3.argsort = function(...args) {
  return argsort3(this, ...args);
};
proto3.msort = function() {
  return msort(this);
};
proto3.topk = function(...args) {
  return topk(this, ...args);
};
proto3.kthvalue = function(...args) {
  return kthvalue(this, ...args);
};
proto3.multinomial = function(...args) {
  return multinomial(this, ...args);
};

// src/lazy/tensor.ts
function checkView(from, strides, shape) {
  if (!viewStrides(from, strides, shape)) {
    throw new LoomShapeError(`[view] view size ${fmtShape(shape)} is not compatible with input tensor's size ${fmtShape(from)} and stride [${strides.join(", ")}] (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.`);
  }
}

class Tensor extends TensorOps {
  device;
  isLazy = false;
  _buf;
  _pend;
  _shared = false;
  _private = false;
  constructor(_d, device = "cpu", pend = null) {
    super();
    this.device = device;
    this._buf = _d;
    this._pend = pend;
  }
  static _pending(node, device) {
    return new Tensor(null, device, node);
  }
  get _d() {
    if (this._pend !== null)
      this._settle();
    const b = this._buf;
    if (hasPendingWrite(b, this.device))
      settleRead(b, this.device);
    return b;
  }
  get shape() {
    return this._buf?.shape ?? this._pend.shape;
  }
  get dtype() {
    return this._buf?.dtype ?? this._pend.dtype;
  }
  get is_pending() {
    return this._pend !== null && !(this._buf === null && this._pend.realized !== null);
  }
  _settled() {
    const n = this._pend;
    if (n === null)
      return;
    if (this._buf === null)
      this._buf = ownValue(n, this.device);
    this._pend = null;
  }
  _settle() {
    const n = this._pend;
    if (this._buf === null && n.realized === null) {
      let base = n;
      while (base.op?.kind === "view" && !base.realized)
        base = base.inputs[0];
      flush(this.device, [base]);
      if (base !== n && !n.realized)
        realize([n], backendFor(this.device), this.device);
    } else if (this._buf !== null)
      flush(this.device);
    this._settled();
  }
  _node() {
    return this._pend ?? sourceNode(this._graphBuf(), this.device);
  }
  _graphBuf() {
    if (this._pend !== null)
      this._settle();
    const b = this._buf;
    if (hasUnflushedWrite(b, this.device))
      flush(this.device);
    return b;
  }
  _make(op, inputs, attrs, shape, dtype) {
    for (let i = 0;i < inputs.length; i++) {
      const t = inputs[i];
      if (t._pend === null)
        continue;
      if (op.kind === "view" && t._buf !== null) {
        t._settle();
        continue;
      }
      const nodes = inputs.map((t) => t._node());
      const out = Tensor._pending(new Node(op, nodes, attrs, shape, dtype), this.device);
      if (op.kind === "view") {
        out._shared = true;
        for (const t of inputs)
          t._shared = true;
      }
      return out;
    }
    const xs = new Array(inputs.length);
    for (let i = 0;i < inputs.length; i++)
      xs[i] = inputs[i]._d;
    return new Tensor(backendFor(this.device).run(op, xs, attrs, shape, dtype), this.device);
  }
  _constant(data) {
    return new Tensor(data, this.device);
  }
  _on(device, data) {
    return new Tensor(data, device);
  }
  _data() {
    return this._d;
  }
  _isDense() {
    return this._pend === null && isDense(this._d);
  }
  _onGrad(prev, g) {
    if (prev !== null && prev._buf === null)
      releaseValue(prev);
    if (g !== null && g._buf === null)
      retainValue(g);
  }
  deferred(consumed = false) {
    if (this._buf === null)
      return this;
    if (consumed && this._pend === null)
      return Tensor._pending(privateSource(this._graphBuf(), this.device), this.device);
    return Tensor._pending(this._node(), this.device);
  }
  detach() {
    let t;
    if (this._buf === null) {
      t = Tensor._pending(this._pend, this.device);
      t._shared = this._shared = true;
    } else
      t = new Tensor(this._d, this.device);
    t._vc = this._version_counter();
    return t;
  }
  _viewAliases(op, out) {
    if (this._buf === null)
      return true;
    return op.name !== "reshape" || viewStrides(this._d.shape, this._d.strides, out.shape) !== null;
  }
  _checkView(shape) {
    if (this._buf === null)
      return;
    checkView(this._d.shape, this._d.strides, shape);
  }
  _write_private(src) {
    this._private = true;
    try {
      no_grad(() => this.copy_(src));
    } finally {
      this._private = false;
    }
  }
  _lift() {
    if (this._buf === null)
      return this.lazy();
    const l = this._lazyOver(privateSource(this._graphBuf(), this.device), true);
    l._originPrivate = true;
    return l;
  }
  _lazyOver(node, origin) {
    const l = new LazyTensor(node, this.device);
    if (origin)
      l._origin = this;
    l._vc = this._version_counter();
    if (this.requires_grad)
      l._linkTo(this);
    return l;
  }
  _assign_from(src) {
    this._assign(src);
  }
  _assign(src) {
    if (this._buf === null) {
      if (!this._shared) {
        const n = src._node();
        this._increment_version();
        this._pend = n;
        return;
      }
      this._settle();
    }
    const d = this._buf;
    const { shape, strides } = d;
    if (shape.some((s, i) => s > 1 && strides[i] === 0)) {
      throw new LoomValueError("[in-place] unsupported operation: more than one element of the written-to tensor refers to a single memory location; make it contiguous() first");
    }
    if (src._pend !== null && canDeferWrite(d)) {
      this._increment_version();
      this._pend = src._pend;
      recordWrite(this, d, this._private);
      return;
    }
    let dst = this._d;
    if (hasPrivateReaders(dst, this.device)) {
      flush(this.device);
      dst = this._d;
    }
    const sd = src._d;
    this._increment_version();
    beforeWrite(dst, this.device);
    if (backendFor(this.device).write?.(dst, sd))
      return;
    const s = sd.data === dst.data ? { ...sd, data: dst.data.slice() } : sd;
    const v = toContiguous(s, this.dtype);
    const out = dst.data;
    if (isDense(dst))
      out.set(v.data.subarray(0, v.data.length), dst.offset);
    else
      forEachStrided(this.shape, [dst], (i, idx) => {
        out[idx[0]] = v.data[i];
      });
  }
  lazy() {
    if (this._buf === null)
      return this._lazyOver(this._pend, false);
    return this._lazyOver(sourceNode(this._graphBuf(), this.device), true);
  }
  eval() {
    return this;
  }
  realize() {
    return this;
  }
}
// src/lazy/creation.ts
function shapeOf(op, args) {
  const s = args.length === 1 && Array.isArray(args[0]) ? args[0] : args;
  return checkShape(op, s);
}
function splitArgs(args) {
  const last = args[args.length - 1];
  if (last !== undefined && typeof last === "object" && !Array.isArray(last))
    return [args.slice(0, -1), last];
  return [args, {}];
}
function finish(t, o) {
  const d = o.device && o.device !== "cpu" ? t.to(o.device) : t;
  return o.requires_grad ? d.requires_grad_(true) : d;
}
var TYPED_DTYPE = [
  [Float32Array, "float32"],
  [Float64Array, "float64"],
  [Int32Array, "int32"],
  [Int8Array, "int8"],
  [Uint8Array, "uint8"]
];
function tensor(data, opts = {}) {
  if (ArrayBuffer.isView(data)) {
    const hit = TYPED_DTYPE.find(([C]) => data instanceof C);
    const dtype = opts.dtype ?? hit?.[1] ?? "float32";
    return finish(new Tensor(fromValues(dtype, [data.length], data)), opts);
  }
  const shape = [];
  let probe = data;
  while (Array.isArray(probe)) {
    shape.push(probe.length);
    probe = probe[0];
  }
  const flat = [];
  let sawFloat = false;
  let sawBool = false;
  let sawNumber = false;
  const walk = (v, d) => {
    if (d === shape.length) {
      if (Array.isArray(v))
        throw new LoomValueError(`[tensor] ragged nested sequence: expected a scalar at depth ${d} for shape ${fmtShape(shape)}`);
      if (typeof v === "boolean") {
        sawBool = true;
        flat.push(v ? 1 : 0);
        return;
      }
      if (typeof v !== "number")
        throw new LoomValueError(`[tensor] unsupported element ${String(v)}`);
      sawNumber = true;
      if (!Number.isInteger(v))
        sawFloat = true;
      flat.push(v);
      return;
    }
    if (!Array.isArray(v) || v.length !== shape[d]) {
      throw new LoomValueError(`[tensor] ragged nested sequence: expected a sequence of length ${shape[d]} at dim ${d}`);
    }
    for (const e of v)
      walk(e, d + 1);
  };
  walk(data, 0);
  const inferred = sawFloat || sawNumber && opts.requires_grad ? DEFAULT_FLOAT : sawNumber ? "int64" : sawBool ? "bool" : DEFAULT_FLOAT;
  return finish(new Tensor(fromValues(opts.dtype ?? inferred, shape, flat)), opts);
}
function full(size, fill_value, opts = {}) {
  const shape = checkShape("full", size);
  const dtype = opts.dtype ?? (typeof fill_value === "boolean" ? "bool" : Number.isInteger(fill_value) && !opts.requires_grad ? "int64" : DEFAULT_FLOAT);
  const d = allocData(dtype, shape);
  const v = fromValues(dtype, [], [Number(fill_value)]).data[0];
  if (v !== 0)
    d.data.fill(v);
  return finish(new Tensor(d), opts);
}
function zeros(...args) {
  const [s, o] = splitArgs(args);
  return finish(new Tensor(allocData(o.dtype ?? DEFAULT_FLOAT, shapeOf("zeros", s))), o);
}
function arange(start, end, step = 1, opts = {}) {
  if (end === undefined) {
    end = start;
    start = 0;
  }
  const dtype = opts.dtype ?? ([start, end, step].every(Number.isInteger) && !opts.requires_grad ? "int64" : DEFAULT_FLOAT);
  const int = isIntegral(dtype);
  const [xs, xe, xst] = int ? [Math.trunc(start), Math.trunc(end), Math.trunc(step)] : [start, end, step];
  if (xst === 0)
    throw new LoomValueError(`[arange] step must be nonzero (step ${step}${int ? ` is ${xst} as ${dtype}` : ""})`);
  if (!(xst > 0 && xe >= xs || xst < 0 && xe <= xs)) {
    throw new LoomValueError(`[arange] upper bound and larger bound inconsistent with step sign (start ${start}, end ${end}, step ${step})`);
  }
  const n = Math.ceil(dtype === "int64" ? (xe - xs) / xst : (end - start) / step);
  const vals = Array.from({ length: n }, (_, i) => xs + i * xst);
  return finish(new Tensor(fromValues(dtype, [n], vals)), opts);
}
// src/lazy/losses.ts
function checkReduction(op, reduction, allowed = ["none", "mean", "sum"]) {
  if (typeof reduction !== "string" || !allowed.includes(reduction)) {
    throw new LoomValueError(`[${op}] reduction must be one of ${allowed.map((r) => `"${r}"`).join(", ")}, got ${JSON.stringify(reduction) ?? String(reduction)}`);
  }
}
function checkClassWeight(op, weight, input, C) {
  if (weight && !shapesEqual(weight.shape, [C])) {
    throw new LoomShapeError(`[${op}] weight must have one entry per class, ${fmtShape([C])} for input ${fmtShape(input.shape)}, got ${fmtShape(weight.shape)}`);
  }
}
function pickClasses(op, input, target, weight, ignore_index) {
  if (input.ndim === 0)
    throw new LoomShapeError(`[${op}] input must have a class dim, got a 0-d input`);
  const cdim = input.ndim === 1 ? 0 : 1;
  const C = input.shape[cdim];
  if (target.dtype !== "int64" && target.dtype !== "int32") {
    throw new LoomDtypeError(`[${op}] expected a class-index target of dtype int64 or int32, got ${target.dtype} ${fmtShape(target.shape)} (input ${input.dtype} ${fmtShape(input.shape)})`);
  }
  const want = input.shape.filter((_, i) => i !== cdim);
  if (!shapesEqual(target.shape, want)) {
    throw new LoomShapeError(`[${op}] expected target of shape ${fmtShape(want)} for input ${fmtShape(input.shape)}, got ${fmtShape(target.shape)}`);
  }
  checkClassWeight(op, weight, input, C);
  const valid = target.ne(ignore_index);
  const safe = target.where(valid, 0).to("int64");
  const nll = input._apply(OPS.gather, [safe.unsqueeze(cdim)], { dim: cdim, caller: op }).squeeze(cdim).neg();
  let w = valid.to(input.dtype);
  if (weight)
    w = w.mul(weight._apply(OPS.index_select, [safe.flatten()], { dim: 0, caller: op }).reshape(safe.shape));
  return { loss: nll.where(valid, 0).mul(w), w, valid };
}
function cross_entropy(input, target, o = {}) {
  const { weight = null, ignore_index = -100, reduction = "mean", label_smoothing = 0 } = o;
  checkReduction("cross_entropy", reduction);
  if (input.ndim === 0)
    throw new LoomShapeError(`[cross_entropy] input must have a class dim, got a 0-d input`);
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw new LoomValueError(`[cross_entropy] label_smoothing must be between 0.0 and 1.0, got ${label_smoothing}`);
  const cdim = input.ndim === 1 ? 0 : 1;
  const C = input.shape[cdim];
  checkClassWeight("cross_entropy", weight, input, C);
  const logp = input.log_softmax(cdim);
  const wview = weight ? weight.reshape([C, ...Array(Math.max(0, input.ndim - cdim - 1)).fill(1)]) : null;
  if (target.is_floating_point()) {
    if (!shapesEqual(target.shape, input.shape))
      throw new LoomShapeError(`[cross_entropy] probability target ${fmtShape(target.shape)} must match input ${fmtShape(input.shape)}`);
    let t = label_smoothing > 0 ? target.mul(1 - label_smoothing).add(label_smoothing / C) : target;
    if (wview)
      t = t.mul(wview);
    const loss = logp.mul(t).sum(cdim).neg();
    if (reduction === "none")
      return loss;
    return reduction === "sum" ? loss.sum() : loss.sum().div(loss.numel());
  }
  const { loss, w, valid } = pickClasses("cross_entropy", logp, target, weight, ignore_index);
  const smooth = label_smoothing > 0 ? (wview ? logp.mul(wview) : logp).sum(cdim).neg().where(valid, 0) : null;
  if (reduction === "none") {
    return smooth ? loss.mul(1 - label_smoothing).add(smooth.mul(label_smoothing / C)) : loss;
  }
  const denom = reduction === "mean" ? w.sum() : null;
  let r = denom ? loss.sum().div(denom) : loss.sum();
  if (smooth) {
    const sr = denom ? smooth.sum().div(denom) : smooth.sum();
    r = r.mul(1 - label_smoothing).add(sr.mul(label_smoothing / C));
  }
  return r;
}
// src/lazy/conv.ts
var INDEX_CACHE = new Map;
// src/lazy/functional.ts
function linear(x, weight, bias) {
  const c = autocast_args("linear", [x, weight, bias]);
  if (c)
    [x, weight, bias] = c;
  const y = x.matmul(weight.t());
  return bias ? y.add(bias) : y;
}
function normDims(op, x, normalized_shape) {
  const n = normalized_shape.length;
  if (n === 0 || !shapesEqual(x.shape.slice(x.ndim - n), normalized_shape)) {
    throw new LoomShapeError(`[${op}] given normalized_shape=${fmtShape(normalized_shape)}, expected input with shape [*, ${normalized_shape.join(", ")}], but got input of size ${fmtShape(x.shape)}`);
  }
  return normalized_shape.map((_, i) => x.ndim - n + i);
}
function layer_norm(x, normalized_shape, weight, bias, eps = 0.00001) {
  const dims = normDims("layer_norm", x, normalized_shape);
  const d0 = x.sub(x.mean(dims, true).detach());
  const d = d0.sub(d0.mean(dims, true));
  let y = d.mul(d.mul(d).mean(dims, true).add(eps).rsqrt());
  if (weight)
    y = y.mul(weight);
  if (bias)
    y = y.add(bias);
  return y;
}
function _embedding(input, weight, opts, write) {
  const o = typeof opts === "number" || opts === null || opts === undefined ? { padding_idx: opts } : opts;
  if (input.dtype !== "int64" && input.dtype !== "int32")
    throw new LoomDtypeError(`[embedding] expected indices of dtype int64 or int32, got ${input.dtype}`);
  if (weight.ndim !== 2)
    throw new LoomShapeError(`[embedding] weight must be 2-D, got ${fmtShape(weight.shape)}`);
  const N = weight.shape[0];
  if (o.max_norm !== undefined && o.max_norm !== null && !(o.max_norm >= 0))
    throw new LoomValueError(`[embedding] max_norm must be non-negative, got ${o.max_norm}`);
  const flat = input.flatten();
  const needCounts = weight.shape[1] > 0 && ((o.max_norm ?? null) !== null || o.scale_grad_by_freq === true && weight.requires_grad && is_grad_enabled());
  const ct = weight.dtype === "float64" ? "float64" : "float32";
  const counts = needCounts ? no_grad(() => weight.detach().select(1, 0).full_like(0, ct).index_add(0, flat, flat.ones_like().to(ct))) : null;
  if (o.max_norm !== undefined && o.max_norm !== null && counts) {
    const max_norm = o.max_norm;
    no_grad(() => {
      const norm = weight.detach().norm(o.norm_type ?? 2, 1);
      const over = counts.gt(0).logical_and(norm.gt(max_norm));
      const scale = norm.full_like(max_norm).div(norm.add(0.0000001)).where(over, 1);
      write(weight, weight.detach().mul(scale.unsqueeze(1)));
    });
  }
  let rows = weight._apply(OPS.index_select, [flat], { dim: 0, caller: "embedding" });
  if (o.scale_grad_by_freq && counts && rows.requires_grad && is_grad_enabled()) {
    const s = no_grad(() => counts.index_select(0, flat).reciprocal().to(weight.dtype).unsqueeze(1));
    rows.register_hook((g) => g.mul(s));
  }
  let out = rows.reshape([...input.shape, weight.shape[1]]);
  if (o.padding_idx !== undefined && o.padding_idx !== null) {
    const p = o.padding_idx < 0 ? o.padding_idx + N : o.padding_idx;
    out = out.where(input.ne(p).unsqueeze(-1), out.detach());
  }
  return out;
}
function dropout(x, p = 0.5, training = true) {
  if (p < 0 || p > 1)
    throw new LoomValueError(`[dropout] probability has to be between 0 and 1, but got ${p}`);
  if (!training || p === 0)
    return x;
  if (p === 1)
    return x.mul(0);
  const n = x.numel();
  const keep = new Array(n);
  for (let i = 0;i < n; i++)
    keep[i] = default_generator.uniform() >= p ? 1 / (1 - p) : 0;
  return x.mul(x._constant(fromValues(x.dtype, x.shape, keep)));
}
function scaled_dot_product_attention(q, k, v, opts = {}) {
  const { attn_mask = null, dropout_p = 0, is_causal = false, scale = null, enable_gqa = false } = opts;
  if (enable_gqa)
    [k, v] = repeat_kv_heads(q, k, v);
  const E = q.shape[q.ndim - 1];
  if (k.shape[k.ndim - 1] !== E)
    throw new LoomShapeError(`[scaled_dot_product_attention] q ${fmtShape(q.shape)} and k ${fmtShape(k.shape)} must have the same last dim`);
  if (k.shape[k.ndim - 2] !== v.shape[v.ndim - 2])
    throw new LoomShapeError(`[scaled_dot_product_attention] k ${fmtShape(k.shape)} and v ${fmtShape(v.shape)} must have the same sequence length`);
  if (is_causal && attn_mask)
    throw new LoomValueError("[scaled_dot_product_attention] explicit attn_mask should not be set when is_causal=true");
  const L = q.shape[q.ndim - 2], Sk = k.shape[k.ndim - 2];
  let att = q.matmul(k.transpose(-2, -1)).mul(scale ?? 1 / Math.sqrt(E));
  if (is_causal) {
    const m = Array.from({ length: L * Sk }, (_, i) => i % Sk <= Math.floor(i / Sk) ? 1 : 0);
    att = att.masked_fill(q._constant(fromValues("bool", [L, Sk], m)).logical_not(), -Infinity);
  } else if (attn_mask) {
    att = attn_mask.dtype === "bool" ? att.masked_fill(attn_mask.logical_not(), -Infinity) : att.add(attn_mask);
  }
  att = att.softmax(-1);
  if (dropout_p > 0)
    att = dropout(att, dropout_p, true);
  return att.matmul(v);
}
function repeat_kv_heads(q, k, v) {
  const shapes = `q ${fmtShape(q.shape)}, k ${fmtShape(k.shape)}, v ${fmtShape(v.shape)}`;
  if (q.ndim < 3 || k.ndim < 3 || v.ndim < 3)
    throw new LoomShapeError(`[scaled_dot_product_attention] enable_gqa needs heads at dim -3 (at least 3-D inputs), got ${shapes}`);
  const Hq = q.shape[q.ndim - 3], Hkv = k.shape[k.ndim - 3];
  if (v.shape[v.ndim - 3] !== Hkv)
    throw new LoomShapeError(`[scaled_dot_product_attention] enable_gqa: k and v must have the same number of heads, got ${shapes}`);
  if (Hkv === Hq)
    return [k, v];
  if (Hq % Hkv !== 0)
    throw new LoomShapeError(`[scaled_dot_product_attention] enable_gqa: the ${Hq} query heads are not divisible by the ${Hkv} key/value heads (${shapes})`);
  const n_rep = Hq / Hkv;
  const rep = (t) => {
    const s = t.shape, d = t.ndim - 3;
    return t.unsqueeze(d + 1).expand(...s.slice(0, d + 1), n_rep, ...s.slice(d + 1)).reshape(...s.slice(0, d), Hq, ...s.slice(d + 1));
  };
  return [rep(k), rep(v)];
}
function lora_linear3(x, weight, lora_A, lora_B, scaling, bias) {
  const rest = bias ? [weight, lora_A, lora_B, bias] : [weight, lora_A, lora_B];
  return x._apply(OPS.lora_linear, rest, { scaling, has_bias: !!bias });
}
// src/lazy/dynamic_shapes.ts
function dynamic_dims(t) {
  return dynamicDims(t._d);
}
function carry_dynamic(src, dst) {
  for (const [dim, sym] of dynamic_dims(src)) {
    const n = dst.shape[dim];
    if (n !== undefined && n >= sym.min && n <= sym.max)
      markDynamic(dst._d, dim, sym);
  }
  return dst;
}
// src/io/json.ts
var QUOTE = 34;
var BACKSLASH = 92;
var LBRACE = 123;
var RBRACE = 125;
var LBRACKET = 91;
var RBRACKET = 93;
var COMMA = 44;
function findDuplicateKey(text) {
  const stack = [];
  let expectKey = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      let j = i + 1;
      let escaped = false;
      for (;; ) {
        const d = text.charCodeAt(j);
        if (d === BACKSLASH) {
          escaped = true;
          j += 2;
        } else if (d === QUOTE) {
          break;
        } else {
          j++;
        }
      }
      if (expectKey) {
        const top = stack[stack.length - 1];
        const key = escaped ? JSON.parse(text.slice(i, j + 1)) : text.slice(i + 1, j);
        if (top.keys.has(key))
          return { key, path: stack.slice(1).map((f) => f.label) };
        top.keys.add(key);
        top.at = key;
        expectKey = false;
      }
      i = j + 1;
      continue;
    }
    if (c === LBRACE || c === LBRACKET) {
      const parent = stack[stack.length - 1];
      stack.push({ keys: c === LBRACE ? new Set : null, at: 0, label: parent ? parent.at : null });
      expectKey = c === LBRACE;
    } else if (c === RBRACE || c === RBRACKET) {
      stack.pop();
      expectKey = false;
    } else if (c === COMMA) {
      const top = stack[stack.length - 1];
      if (top.keys)
        expectKey = true;
      else
        top.at = top.at + 1;
    }
    i++;
  }
  return null;
}
function formatJsonPath(path) {
  return path.map((p) => `[${JSON.stringify(p)}]`).join("");
}

// src/io/safetensors_header.ts
var SAFETENSORS_TO_DTYPE = {
  F64: "float64",
  F32: "float32",
  F16: "float16",
  BF16: "bfloat16",
  I64: "int64",
  I32: "int32",
  I8: "int8",
  U8: "uint8",
  BOOL: "bool"
};
var DTYPE_TO_SAFETENSORS = {
  float64: "F64",
  float32: "F32",
  float16: "F16",
  bfloat16: "BF16",
  int64: "I64",
  int32: "I32",
  int8: "I8",
  uint8: "U8",
  bool: "BOOL"
};
var FILE_ITEMSIZE = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I8: 1,
  U8: 1,
  BOOL: 1
};
var UNSUPPORTED = new Set([
  "U16",
  "I16",
  "U32",
  "U64",
  "F8_E4M3",
  "F8_E5M2",
  "F8_E8M0",
  "F6_E2M3",
  "F6_E3M2",
  "F4",
  "C64"
]);
var WRITE_RANK = {
  BOOL: 0,
  U8: 1,
  I8: 2,
  F16: 3,
  BF16: 4,
  I32: 5,
  F32: 6,
  F64: 7,
  I64: 8
};
var MAX_HEADER_SIZE = 1e8;
var MIN_HEADER_SIZE = 2;
var METADATA_KEY = "__metadata__";
function formatError(source, what, reason) {
  const where = source ? ` ${source}:` : "";
  return new LoomFormatError(`[safetensors]${where} ${what}: ${reason}`);
}
function describe3(v) {
  if (v === undefined)
    return "missing";
  if (v === null)
    return "null";
  if (Array.isArray(v))
    return "an array";
  return `a ${typeof v}`;
}
function isObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function readHeaderSize(prefix, file_size, source) {
  if (prefix.length < 8 || file_size < 8) {
    throw formatError(source, "file", `${file_size} bytes is too small: a safetensors file starts with an 8-byte header length`);
  }
  const view = new DataView(prefix.buffer, prefix.byteOffset, 8);
  const n = view.getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_SIZE)) {
    throw formatError(source, "header", `header length ${n} exceeds the maximum of ${MAX_HEADER_SIZE} bytes`);
  }
  const size = Number(n);
  if (size < MIN_HEADER_SIZE) {
    throw formatError(source, "header", `header length ${size} is too small (at least ${MIN_HEADER_SIZE}, "{}")`);
  }
  if (size > file_size - 8) {
    throw formatError(source, "header", `header length ${size} exceeds the ${file_size - 8} bytes after the length field (file size ${file_size}); the file may be truncated`);
  }
  return size;
}
function parseHeader(header_bytes, file_size, source) {
  const header_size = header_bytes.length;
  const data_start = 8 + header_size;
  const data_size = file_size - data_start;
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(header_bytes);
  } catch {
    throw formatError(source, "header", "is not valid UTF-8");
  }
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw formatError(source, "header", `is not valid JSON (${e.message})`);
  }
  checkDuplicates(text, source);
  if (!isObject(json))
    throw formatError(source, "header", `JSON is ${describe3(json)}, expected an object`);
  const metadata = parseMetadata(json[METADATA_KEY], source);
  const entries = [];
  for (const name of Object.keys(json)) {
    if (name === METADATA_KEY)
      continue;
    entries.push([name, parseEntry(name, json[name], data_size, source)]);
  }
  entries.sort(([, a], [, b]) => a.data_offsets[0] - b.data_offsets[0] || a.data_offsets[1] - b.data_offsets[1]);
  checkTiling(entries, data_size, source);
  return { tensors: new Map(entries), metadata, header_size, data_start, data_size };
}
function checkDuplicates(text, source) {
  const dup = findDuplicateKey(text);
  if (dup === null)
    return;
  const { key, path } = dup;
  const name = (k) => k === METADATA_KEY ? METADATA_KEY : `tensor ${JSON.stringify(k)}`;
  if (path.length === 0)
    throw formatError(source, name(key), "appears twice in the header; every key must be unique");
  if (path.length === 1)
    throw formatError(source, name(path[0]), `duplicate ${path[0] === METADATA_KEY ? "key" : "field"} ${JSON.stringify(key)}`);
  throw formatError(source, "header", `duplicate key ${JSON.stringify(key)} in ${formatJsonPath(path)}`);
}
function parseMetadata(raw, source) {
  if (raw === undefined || raw === null)
    return {};
  if (!isObject(raw))
    throw formatError(source, METADATA_KEY, `is ${describe3(raw)}, expected an object of strings`);
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== "string")
      throw formatError(source, METADATA_KEY, `value of key ${JSON.stringify(k)} is ${describe3(v)}, expected a string`);
  }
  return Object.fromEntries(Object.entries(raw));
}
function parseEntry(name, raw, data_size, source) {
  const what = `tensor ${JSON.stringify(name)}`;
  if (!isObject(raw))
    throw formatError(source, what, `entry is ${describe3(raw)}, expected an object with dtype, shape and data_offsets`);
  const st = raw.dtype;
  if (typeof st !== "string")
    throw formatError(source, what, `dtype is ${describe3(st)}, expected a string`);
  if (UNSUPPORTED.has(st))
    throw formatError(source, what, `dtype ${st} is not supported by Loom (supported: ${Object.keys(SAFETENSORS_TO_DTYPE).join(", ")})`);
  if (!Object.hasOwn(SAFETENSORS_TO_DTYPE, st))
    throw formatError(source, what, `unknown dtype ${JSON.stringify(st)} (expected one of ${Object.keys(SAFETENSORS_TO_DTYPE).join(", ")})`);
  const sdtype = st;
  const shape = raw.shape;
  if (!Array.isArray(shape))
    throw formatError(source, what, `shape is ${describe3(shape)}, expected an array of non-negative integers`);
  let numel = 1;
  for (let i = 0;i < shape.length; i++) {
    const d = shape[i];
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      throw formatError(source, what, `shape dim ${i} is ${JSON.stringify(d)}, expected a non-negative integer`);
    }
    numel *= d;
    if (numel > Number.MAX_SAFE_INTEGER)
      throw formatError(source, what, `shape ${fmtShape(shape)} overflows: the element count exceeds 2^53 - 1`);
  }
  const nbytes = numel * FILE_ITEMSIZE[sdtype];
  if (nbytes > Number.MAX_SAFE_INTEGER)
    throw formatError(source, what, `shape ${fmtShape(shape)} of ${sdtype} overflows: the byte size exceeds 2^53 - 1`);
  const off = raw.data_offsets;
  if (!Array.isArray(off) || off.length !== 2 || !off.every((x) => typeof x === "number" && Number.isSafeInteger(x) && x >= 0)) {
    throw formatError(source, what, `data_offsets ${JSON.stringify(off)} must be two non-negative integers [begin, end]`);
  }
  const [begin, end] = off;
  if (begin > end)
    throw formatError(source, what, `data_offsets [${begin}, ${end}]: begin > end`);
  if (end > data_size)
    throw formatError(source, what, `data_offsets [${begin}, ${end}] run past the end of the ${data_size}-byte data buffer`);
  if (end - begin !== nbytes) {
    throw formatError(source, what, `data_offsets [${begin}, ${end}] hold ${end - begin} bytes but ${sdtype} ${fmtShape(shape)} needs ${nbytes}`);
  }
  return { dtype: SAFETENSORS_TO_DTYPE[sdtype], shape: shape.slice(), data_offsets: [begin, end] };
}
function checkTiling(sorted, data_size, source) {
  let expected = 0;
  let prev = null;
  for (const [name, info] of sorted) {
    const [begin, end] = info.data_offsets;
    const what = `tensor ${JSON.stringify(name)}`;
    if (begin < expected) {
      throw formatError(source, what, `data_offsets [${begin}, ${end}] overlap tensor ${JSON.stringify(prev)}, which ends at ${expected}`);
    }
    if (begin > expected) {
      const after = prev === null ? "the start of the data buffer" : `tensor ${JSON.stringify(prev)} (ends at ${expected})`;
      throw formatError(source, what, `data_offsets [${begin}, ${end}] leave a gap of ${begin - expected} bytes after ${after}`);
    }
    expected = end;
    prev = name;
  }
  if (expected !== data_size) {
    throw formatError(source, "data", `${data_size - expected} trailing bytes after the last tensor are not covered by any data_offsets (data buffer is ${data_size} bytes)`);
  }
}
function compareNames(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0;i < n; i++) {
    const x = a.codePointAt(i);
    const y = b.codePointAt(i);
    if (x !== y)
      return x - y;
    if (x > 65535)
      i++;
  }
  return a.length - b.length;
}
function layoutEntries(entries) {
  const sorted = entries.slice().sort((a, b) => WRITE_RANK[DTYPE_TO_SAFETENSORS[b.dtype]] - WRITE_RANK[DTYPE_TO_SAFETENSORS[a.dtype]] || compareNames(a.name, b.name));
  let offset = 0;
  const order = sorted.map((e) => {
    const begin = offset;
    offset += e.nbytes;
    return { ...e, begin, end: offset };
  });
  return { order, data_size: offset };
}
function serializeHeader(order, metadata = {}) {
  const parts = [];
  const metaKeys = Object.keys(metadata).sort(compareNames);
  if (metaKeys.length > 0) {
    const kv = metaKeys.map((k) => {
      const v = metadata[k];
      if (typeof v !== "string")
        throw new LoomValueError(`[safetensors.save] metadata value of key ${JSON.stringify(k)} is ${describe3(v)}, expected a string`);
      return `${JSON.stringify(k)}:${JSON.stringify(v)}`;
    });
    parts.push(`${JSON.stringify(METADATA_KEY)}:{${kv.join(",")}}`);
  }
  for (const e of order) {
    if (e.name === METADATA_KEY)
      throw new LoomValueError(`[safetensors.save] a tensor cannot be named ${METADATA_KEY}, the key reserved for metadata`);
    parts.push(`${JSON.stringify(e.name)}:{"dtype":"${DTYPE_TO_SAFETENSORS[e.dtype]}","shape":[${e.shape.join(",")}],"data_offsets":[${e.begin},${e.end}]}`);
  }
  const json = new TextEncoder().encode(`{${parts.join(",")}}`);
  if (json.length > MAX_HEADER_SIZE) {
    throw new LoomValueError(`[safetensors.save] header of ${json.length} bytes exceeds the ${MAX_HEADER_SIZE}-byte limit readers enforce (${order.length} tensors)`);
  }
  const padded = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(32);
  padded.set(json);
  return padded;
}
function headerSizePrefix(n) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n), true);
  return out;
}

// src/io/safetensors.ts
var STORAGE = {
  float32: Float32Array,
  float64: Float64Array,
  int64: Float64Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int32: Int32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array
};
var LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
function assertLittleEndian() {
  if (!LITTLE_ENDIAN)
    throw new LoomFormatError("[safetensors] big-endian hosts are not supported");
}
var TWO_32 = 4294967296;
var INT64_LIMIT_HI = 2097152;
function decodeInt64(bytes, numel, name, source) {
  let words;
  if (bytes.byteOffset % 4 === 0) {
    words = new Int32Array(bytes.buffer, bytes.byteOffset, numel * 2);
  } else {
    const aligned = new Uint8Array(numel * 8);
    aligned.set(bytes);
    words = new Int32Array(aligned.buffer);
  }
  const out = new Float64Array(numel);
  for (let i = 0;i < numel; i++) {
    const lo = words[2 * i] >>> 0;
    const hi = words[2 * i + 1];
    if (hi > INT64_LIMIT_HI || hi < -INT64_LIMIT_HI || hi === INT64_LIMIT_HI && lo !== 0) {
      const exact = (BigInt(hi) << 32n) + BigInt(lo);
      throw formatError(source, `tensor ${JSON.stringify(name)}`, `I64 element ${i} is ${exact}, outside ±2^53: Loom stores int64 as float64 and cannot hold it exactly`);
    }
    out[i] = hi * TWO_32 + lo;
  }
  return out;
}
function checkBool(a, name, source) {
  for (let i = 0;i < a.length; i++) {
    if (a[i] > 1)
      throw formatError(source, `tensor ${JSON.stringify(name)}`, `BOOL element ${i} is byte ${a[i]}, expected 0 or 1`);
  }
}
function numelOf2(shape) {
  let n = 1;
  for (const d of shape)
    n *= d;
  return n;
}
function extract(file, header, name, info, copy, source) {
  const start = header.data_start + info.data_offsets[0];
  const end = header.data_start + info.data_offsets[1];
  const numel = numelOf2(info.shape);
  const bytes = file.subarray(start, end);
  if (bytes.length !== end - start)
    throw formatError(source, `tensor ${JSON.stringify(name)}`, "data lies outside the buffer");
  if (info.dtype === "int64")
    return decodeInt64(bytes, numel, name, source);
  const Ctor = STORAGE[info.dtype];
  let out;
  if (!copy && numel > 0 && bytes.byteOffset % Ctor.BYTES_PER_ELEMENT === 0) {
    out = new Ctor(bytes.buffer, bytes.byteOffset, numel);
  } else {
    out = new Ctor(numel);
    new Uint8Array(out.buffer).set(bytes);
  }
  if (info.dtype === "bool")
    checkBool(out, name, source);
  return out;
}
function loadFrom(file, source, options) {
  assertLittleEndian();
  const header = headerOf(file, source);
  const tensors = new Map;
  for (const [name, info] of header.tensors) {
    tensors.set(name, { dtype: info.dtype, shape: info.shape.slice(), data: extract(file, header, name, info, options.copy ?? false, source) });
  }
  return { tensors, metadata: header.metadata };
}
function headerOf(file, source) {
  const n = readHeaderSize(file, file.length, source);
  return parseHeader(file.subarray(8, 8 + n), file.length, source);
}
function read_header_file(path) {
  const { fd, size } = openFile(path);
  try {
    const prefix = readAt(fd, 0, Math.min(8, size));
    const n = readHeaderSize(prefix, size, path);
    return parseHeader(readAt(fd, 8, n), size, path);
  } finally {
    closeSync(fd);
  }
}
function openFile(path) {
  return openRegularFile(path, (reason) => formatError(path, "file", reason));
}
function load2(bytes, options = {}) {
  return loadFrom(bytes, undefined, options);
}
function mapFile(path) {
  const { fd, size } = openFile(path);
  try {
    if (size >= 8) {
      const mapped = mmapFile(path);
      if (mapped)
        return mapped;
    }
    return readAt(fd, 0, size);
  } finally {
    closeSync(fd);
  }
}
class SafetensorsFile {
  path;
  header;
  bytes;
  constructor(path, bytes) {
    assertLittleEndian();
    this.path = path;
    this.bytes = bytes;
    this.header = headerOf(bytes, path);
  }
  keys() {
    return [...this.header.tensors.keys()];
  }
  metadata() {
    return this.header.metadata;
  }
  has(name) {
    return this.header.tensors.has(name);
  }
  info(name) {
    const info = this.header.tensors.get(name);
    if (!info) {
      const some = this.keys().slice(0, 5).map((k) => JSON.stringify(k)).join(", ");
      throw new LoomValueError(`[safetensors] ${this.path}: no tensor named ${JSON.stringify(name)} (${this.header.tensors.size} tensors: ${some}${this.header.tensors.size > 5 ? ", ..." : ""})`);
    }
    return info;
  }
  get_tensor(name, options = {}) {
    const info = this.info(name);
    if (!this.bytes)
      throw new LoomValueError(`[safetensors] ${this.path}: get_tensor(${JSON.stringify(name)}) after close()`);
    return { dtype: info.dtype, shape: info.shape.slice(), data: extract(this.bytes, this.header, name, info, options.copy ?? false, this.path) };
  }
  close() {
    this.bytes = null;
  }
}
function safe_open(path) {
  return new SafetensorsFile(path, mapFile(path));
}
function entriesOf(tensors) {
  return tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors);
}
function encodeInt64(data, name) {
  const words = new Int32Array(data.length * 2);
  for (let i = 0;i < data.length; i++) {
    const v = data[i];
    if (!Number.isInteger(v) || Math.abs(v) > 2 ** 53) {
      throw new LoomValueError(`[safetensors.save] tensor ${JSON.stringify(name)}: int64 element ${i} is ${v}, expected an integer within ±2^53`);
    }
    const hi = Math.floor(v / TWO_32);
    words[2 * i] = v - hi * TWO_32 | 0;
    words[2 * i + 1] = hi;
  }
  return new Uint8Array(words.buffer);
}
function rawBytes(a) {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}
function prepare2(name, t) {
  const what = `[safetensors.save] tensor ${JSON.stringify(name)}`;
  if (typeof t !== "object" || t === null)
    throw new LoomValueError(`${what}: expected {dtype, shape, data}, got ${t === null ? "null" : typeof t}`);
  const dtype = t.dtype;
  if (typeof dtype !== "string" || !Object.hasOwn(DTYPE_TO_SAFETENSORS, dtype)) {
    throw new LoomValueError(`${what}: unknown dtype ${JSON.stringify(dtype)} (expected one of ${Object.keys(DTYPE_TO_SAFETENSORS).join(", ")})`);
  }
  const shape = t.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new LoomValueError(`${what}: shape ${JSON.stringify(shape)} must be an array of non-negative integers`);
  }
  const numel = numelOf2(shape);
  const Ctor = STORAGE[dtype];
  if (!(t.data instanceof Ctor)) {
    throw new LoomValueError(`${what}: ${dtype} data must be a ${Ctor.name}, got ${t.data?.constructor?.name ?? typeof t.data}`);
  }
  if (t.data.length !== numel) {
    throw new LoomValueError(`${what}: shape ${fmtShape(shape)} has ${numel} elements but data has ${t.data.length}`);
  }
  const data = t.data;
  let bytes;
  if (dtype === "int64")
    bytes = () => encodeInt64(data, name);
  else if (dtype === "bool")
    bytes = () => data.every((b) => b <= 1) ? rawBytes(data) : data.map((b) => b ? 1 : 0);
  else
    bytes = () => rawBytes(data);
  return { name, dtype, shape: shape.slice(), nbytes: numel * FILE_ITEMSIZE[DTYPE_TO_SAFETENSORS[dtype]], bytes };
}
function plan2(tensors, metadata) {
  assertLittleEndian();
  const { order, data_size } = layoutEntries(entriesOf(tensors).map(([name, t]) => prepare2(name, t)));
  const header = serializeHeader(order, metadata ?? {});
  return { order, data_size, header };
}
function writeAll(fd, bytes) {
  const CHUNK = 1 << 30;
  let done = 0;
  while (done < bytes.length)
    done += writeSync(fd, bytes, done, Math.min(CHUNK, bytes.length - done));
}
function save_file(tensors, path, metadata) {
  const { order, header } = plan2(tensors, metadata);
  const tmp = `${path}.tmp-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  const fd = openSync(tmp, "w");
  let written = false;
  try {
    writeAll(fd, headerSizePrefix(header.length));
    writeAll(fd, header);
    for (const e of order)
      writeAll(fd, e.bytes());
    written = true;
  } finally {
    closeSync(fd);
    if (!written)
      unlinkSync(tmp);
  }
  renameSync(tmp, path);
}
// src/lazy/runtime_info.ts
function runtime_info() {
  const cpu = backendFor("cpu").name;
  return {
    runtime: RUNTIME,
    version: runtimeDescription(),
    ffi: ffi()?.name ?? null,
    cpu_backend: cpu,
    native_unavailable_reason: cpu === "native" ? "" : nativeUnavailableReason()
  };
}
// src/io/sharded.ts
var SAFE_WEIGHTS_NAME = "model.safetensors";
var SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json";
var MAX_SHARD_SIZE = 5000000000;
var FILENAME_PATTERN = "model{suffix}.safetensors";
var MAX_INDEX_SIZE = 1e8;
var UNITS = {
  B: 1,
  KB: 1000,
  MB: 1e6,
  GB: 1e9,
  TB: 1000000000000,
  KIB: 2 ** 10,
  MIB: 2 ** 20,
  GIB: 2 ** 30,
  TIB: 2 ** 40
};
function parse_size_to_int(size) {
  let bytes;
  if (typeof size === "number") {
    bytes = size;
  } else {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(size);
    const unit = m ? (m[2] || "B").toUpperCase() : "";
    if (!m || !Object.hasOwn(UNITS, unit)) {
      throw new LoomValueError(`[save_sharded] max_shard_size ${JSON.stringify(size)}: expected bytes or a size like "5GB", "200MB", "2GiB"`);
    }
    bytes = Math.floor(Number(m[1]) * UNITS[unit]);
  }
  if (!Number.isSafeInteger(bytes) || bytes < 1)
    throw new LoomValueError(`[save_sharded] max_shard_size ${JSON.stringify(size)}: expected a positive whole number of bytes`);
  return bytes;
}
function nbytesOf(name, t) {
  if (!Object.hasOwn(DTYPE_TO_SAFETENSORS, t?.dtype))
    throw new LoomValueError(`[save_sharded] tensor ${JSON.stringify(name)}: unknown dtype ${JSON.stringify(t?.dtype)}`);
  let n = FILE_ITEMSIZE[DTYPE_TO_SAFETENSORS[t.dtype]];
  for (const d of t.shape)
    n *= d;
  return n;
}
function split_state_dict_into_shards(tensors, options = {}) {
  const max = parse_size_to_int(options.max_shard_size ?? MAX_SHARD_SIZE);
  const pattern = options.filename_pattern ?? FILENAME_PATTERN;
  if (!pattern.includes("{suffix}"))
    throw new LoomValueError(`[save_sharded] filename_pattern ${JSON.stringify(pattern)} must contain "{suffix}"`);
  const shards = [];
  let current = [];
  let current_size = 0;
  let total_size = 0;
  for (const [name, t] of entriesOf(tensors)) {
    const size = nbytesOf(name, t);
    total_size += size;
    if (size > max) {
      shards.push([name]);
      continue;
    }
    if (current_size + size > max) {
      shards.push(current);
      current = [];
      current_size = 0;
    }
    current.push(name);
    current_size += size;
  }
  if (current.length > 0 || shards.length === 0)
    shards.push(current);
  const n = shards.length;
  const pad = (i) => String(i).padStart(5, "0");
  const filename_to_tensors = new Map;
  const tensor_to_filename = new Map;
  shards.forEach((names, i) => {
    const file = pattern.replace("{suffix}", n === 1 ? "" : `-${pad(i + 1)}-of-${pad(n)}`);
    filename_to_tensors.set(file, names);
    for (const name of names)
      tensor_to_filename.set(name, file);
  });
  return { is_sharded: n > 1, metadata: { total_size }, filename_to_tensors, tensor_to_filename };
}
function sortedJson(obj, indent) {
  const keys = [...obj.keys()].sort(compareNames);
  if (keys.length === 0)
    return "{}";
  const inner = indent + "  ";
  const lines = keys.map((k) => {
    const v = obj.get(k);
    const text = v instanceof Map ? sortedJson(v, inner) : JSON.stringify(v);
    return `${inner}${JSON.stringify(k)}: ${text}`;
  });
  return `{
${lines.join(`,
`)}
${indent}}`;
}
function save_sharded(tensors, save_directory, options = {}) {
  const split = split_state_dict_into_shards(tensors, options);
  const all = new Map(entriesOf(tensors));
  const shard_metadata = { format: "pt", ...options.metadata };
  mkdirSync(save_directory, { recursive: true });
  for (const [file, names] of split.filename_to_tensors) {
    save_file(new Map(names.map((n) => [n, all.get(n)])), join(save_directory, file), shard_metadata);
  }
  removeStale(save_directory, options.filename_pattern ?? FILENAME_PATTERN, split);
  if (split.is_sharded) {
    const metadata = new Map([["total_size", split.metadata.total_size], ...Object.entries(options.metadata ?? {})]);
    const index = new Map([["metadata", metadata], ["weight_map", split.tensor_to_filename]]);
    writeFileSync(join(save_directory, indexNameFor(options.filename_pattern ?? FILENAME_PATTERN)), sortedJson(index, "") + `
`);
  }
  return split;
}
function indexNameFor(pattern) {
  return `${pattern.replace("{suffix}", "")}.index.json`;
}
function removeStale(dir, pattern, split) {
  const escaped = pattern.split("{suffix}").map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const shard_re = new RegExp(`^${escaped.join("(-\\d{5}-of-\\d{5})?")}$`);
  for (const f of readdirSync(dir)) {
    if (shard_re.test(f) && !split.filename_to_tensors.has(f))
      unlinkSync(join(dir, f));
  }
  const index = join(dir, indexNameFor(pattern));
  if (!split.is_sharded && existsSync(index))
    unlinkSync(index);
}
function isObject2(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function checkShardName(shard, tensor, source) {
  const bad = shard === "" || shard.includes("\x00") || shard.includes("\\") || isAbsolute(shard) || /^[A-Za-z]:/.test(shard) || shard.split("/").some((seg) => seg === "" || seg === "." || seg === "..");
  if (bad) {
    throw formatError(source, `weight_map[${JSON.stringify(tensor)}]`, `shard file name ${JSON.stringify(shard)} escapes the checkpoint directory: it must be a relative path without "..", "." or empty segments`);
  }
}
function readIndex(path) {
  const bytes = readRegularFile(path, (reason) => formatError(path, "index", reason), MAX_INDEX_SIZE);
  let json;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw formatError(path, "index", `is not valid UTF-8 JSON (${e.message})`);
  }
  if (!isObject2(json))
    throw formatError(path, "index", 'must be a JSON object with "weight_map"');
  const meta = json.metadata ?? {};
  if (!isObject2(meta))
    throw formatError(path, "index", '"metadata" must be an object');
  const wm = json.weight_map;
  if (!isObject2(wm))
    throw formatError(path, "index", '"weight_map" must be an object of tensor name -> shard file');
  const weight_map = new Map;
  for (const [tensor, shard] of Object.entries(wm)) {
    if (typeof shard !== "string")
      throw formatError(path, `weight_map[${JSON.stringify(tensor)}]`, `shard is ${shard === null ? "null" : typeof shard}, expected a file name`);
    checkShardName(shard, tensor, path);
    weight_map.set(tensor, shard);
  }
  return { metadata: { ...meta }, weight_map };
}

class ShardedCheckpoint {
  directory;
  source;
  metadata;
  weight_map;
  by_shard = new Map;
  root;
  open_shard = null;
  constructor(directory, source, metadata, weight_map) {
    this.directory = directory;
    this.source = source;
    this.metadata = metadata;
    this.weight_map = weight_map;
    this.root = checkpointRoot(directory);
    for (const [tensor, shard] of weight_map) {
      const list = this.by_shard.get(shard);
      if (list)
        list.push(tensor);
      else
        this.by_shard.set(shard, [tensor]);
    }
  }
  static open(path) {
    const isDir = statSync(path).isDirectory();
    const directory = resolve2(isDir ? path : dirname(path));
    const member = (name, file) => resolveCheckpointFile(directory, name, (reason) => formatError(file, "file", reason));
    let file = path;
    if (isDir) {
      const found = [SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME].find((name) => member(name, join(path, name)) !== null);
      if (found === undefined)
        throw new LoomFormatError(`[safetensors] ${path}: no ${SAFE_WEIGHTS_INDEX_NAME} or ${SAFE_WEIGHTS_NAME} in this directory`);
      file = join(path, found);
    } else {
      member(basename(path), path);
    }
    if (file.endsWith(".json")) {
      const { metadata, weight_map } = readIndex(file);
      return new ShardedCheckpoint(directory, file, metadata, weight_map);
    }
    const header = read_header_file(file);
    const shard = basename(file);
    return new ShardedCheckpoint(directory, file, header.metadata, new Map([...header.tensors.keys()].map((k) => [k, shard])));
  }
  keys() {
    return [...this.weight_map.keys()];
  }
  has(name) {
    return this.weight_map.has(name);
  }
  shard_files() {
    return [...this.by_shard.keys()];
  }
  tensors_in(shard) {
    return (this.by_shard.get(shard) ?? []).slice();
  }
  resolveShard(shard) {
    const first = this.by_shard.get(shard)?.[0] ?? "?";
    const what = `shard ${JSON.stringify(shard)}`;
    const full = resolveCheckpointFile(this.directory, shard, (reason) => formatError(this.source, what, reason), this.root);
    if (full === null)
      throw formatError(this.source, what, `file not found in ${this.directory} (it should hold tensor ${JSON.stringify(first)})`);
    return full;
  }
  openShard(shard) {
    const file = safe_open(this.resolveShard(shard));
    this.checkPresence(shard, file.header);
    return file;
  }
  checkPresence(shard, header) {
    for (const name of this.by_shard.get(shard) ?? []) {
      if (!header.tensors.has(name)) {
        throw formatError(this.source, `tensor ${JSON.stringify(name)}`, `the index maps it to shard ${JSON.stringify(shard)}, which does not contain it`);
      }
    }
  }
  get_tensor(name, options = {}) {
    const shard = this.weight_map.get(name);
    if (shard === undefined)
      throw new LoomValueError(`[safetensors] ${this.source}: no tensor named ${JSON.stringify(name)} in the index`);
    if (this.open_shard?.shard !== shard) {
      this.close();
      this.open_shard = { shard, file: this.openShard(shard) };
    }
    return this.open_shard.file.get_tensor(name, options);
  }
  *shards(options = {}) {
    for (const shard of this.shard_files()) {
      let file = this.openShard(shard);
      const tensors = new Map;
      for (const name of this.by_shard.get(shard))
        tensors.set(name, file.get_tensor(name, options));
      file.close();
      file = null;
      yield [shard, tensors];
    }
  }
  *items(options = {}) {
    for (const [, tensors] of this.shards(options))
      yield* tensors;
  }
  verify() {
    for (const shard of this.shard_files())
      this.checkPresence(shard, read_header_file(this.resolveShard(shard)));
  }
  close() {
    this.open_shard?.file.close();
    this.open_shard = null;
  }
}
function open_sharded(path) {
  return ShardedCheckpoint.open(path);
}
// src/nn/parameter.ts
class Parameter extends Tensor {
  constructor(data, requires_grad = true) {
    const t = data instanceof Tensor ? data : data.eval();
    if (!(t instanceof Tensor))
      throw new LoomValueError("[Parameter] data must be a Tensor");
    super(t._d, t.device);
    this._vc = t._version_counter();
    if (requires_grad)
      this.requires_grad = true;
  }
  toString() {
    return `Parameter containing:
${super.toString()}`;
  }
}
// src/nn/execution.ts
var mode = "lazy";
function set_execution_mode(m) {
  if (m !== "lazy" && m !== "eager")
    throw new LoomValueError(`[set_execution_mode] expected "lazy" or "eager", got ${String(m)}`);
  mode = m;
}
function with_execution_mode(m, fn) {
  const prev = mode;
  set_execution_mode(m);
  try {
    return fn();
  } finally {
    mode = prev;
  }
}
var scope = null;
function lift(t, like) {
  if (t === null || t === undefined)
    return null;
  if (!like.isLazy)
    return t instanceof LazyTensor ? t.eval() : t;
  return liftToLazy(t);
}
function liftToLazy(t) {
  if (t instanceof LazyTensor)
    return t;
  const e = t;
  if (!scope)
    return e.lazy();
  const cache = is_grad_enabled() ? scope.grad : scope.nograd;
  let l = cache.get(e);
  if (!l) {
    l = e._lift();
    cache.set(e, l);
  }
  return l;
}
function mapTree(v, f) {
  if (v instanceof TensorOps)
    return f(v);
  if (Array.isArray(v))
    return v.map((x) => mapTree(x, f));
  if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapTree(x, f)]));
  }
  return v;
}
function anyLazy(v) {
  let found = false;
  mapTree(v, (t) => {
    if (t.isLazy)
      found = true;
    return t;
  });
  return found;
}
function deferTree(out) {
  return mapTree(out, (t) => t instanceof LazyTensor ? t.defer(true) : t);
}
function run_forward(fn, args) {
  if (scope || mode === "eager" || anyLazy(args))
    return fn(...args);
  const prev = scope, prevLift = mixed_lift.fn;
  scope = { grad: new Map, nograd: new Map };
  mixed_lift.fn = liftToLazy;
  let out;
  try {
    const lazyArgs = args.map((a) => mapTree(a, liftToLazy));
    out = fn(...lazyArgs);
  } finally {
    scope = prev;
    mixed_lift.fn = prevLift;
  }
  return deferTree(out);
}

// src/nn/hooks.ts
class HookList {
  items = [];
  add(fn) {
    const entry = { fn };
    this.items.push(entry);
    return { remove: () => {
      const i = this.items.indexOf(entry);
      if (i >= 0)
        this.items.splice(i, 1);
    } };
  }
  get size() {
    return this.items.length;
  }
}

class ModuleHooks {
  forwardPre = new HookList;
  forward = new HookList;
  backwardPre = new HookList;
  backward = new HookList;
  get empty() {
    return this.forwardPre.size + this.forward.size + this.backwardPre.size + this.backward.size === 0;
  }
  call(module, name, args, run) {
    for (const { fn } of this.forwardPre.items) {
      const r = fn(module, args);
      if (r !== undefined)
        args = Array.isArray(r) ? r : [r];
    }
    const backward = this.backwardPre.size + this.backward.size > 0;
    if (backward && (args.length !== 1 || !(args[0] instanceof TensorOps))) {
      throw new LoomValueError(`[${name}] backward hooks take a module called with one tensor; got ${args.length} argument(s)`);
    }
    let alias = null;
    const prepare = (xs) => {
      const x = xs[0];
      return backward && x.requires_grad ? [alias = x.view(x.shape)] : xs;
    };
    let out = run(args, prepare);
    for (const { fn } of this.forward.items) {
      const r = fn(module, args, out);
      if (r !== undefined)
        out = r;
    }
    if (backward) {
      if (!(out instanceof TensorOps))
        throw new LoomValueError(`[${name}] backward hooks take a module that returns one tensor`);
      if (out.requires_grad)
        this.hookGradients(module, alias, out);
    }
    return out;
  }
  hookGradients(module, alias, out) {
    let gradOutput = [];
    out.register_hook((g) => {
      let go = [g];
      for (const { fn } of this.backwardPre.items)
        go = fn(module, go) ?? go;
      gradOutput = go;
      if (!alias)
        for (const { fn } of this.backward.items)
          fn(module, [], go);
      return go[0];
    });
    alias?.register_hook((g) => {
      let gi = [g];
      for (const { fn } of this.backward.items)
        gi = fn(module, gi, gradOutput) ?? gi;
      return gi[0];
    });
  }
}

// src/nn/module.ts
function checkName(kind, name) {
  if (typeof name !== "string")
    throw new LoomValueError(`[${kind}] name should be a string, got ${typeof name}`);
  if (name === "")
    throw new LoomValueError(`[${kind}] name can't be empty string ""`);
  if (name.includes("."))
    throw new LoomValueError(`[${kind}] name can't contain ".", got "${name}"`);
}

class Module {
  training = true;
  _buffer_persistence = new Map;
  _local_entries() {
    const self = this;
    return Object.keys(this).map((k) => [k, self[k]]);
  }
  _set_local(name, value) {
    this[name] = value;
  }
  _checkFree(kind, name, ok) {
    checkName(kind, name);
    if (name in this && !ok(this[name])) {
      throw new LoomValueError(`[${kind}] attribute '${name}' already exists on ${this._get_name()}`);
    }
  }
  register_parameter(name, param) {
    this._checkFree("register_parameter", name, (v) => v === undefined || v === null || v instanceof Parameter);
    if (param !== null && !(param instanceof Parameter)) {
      throw new LoomValueError(`[register_parameter] cannot assign a ${param?.constructor?.name ?? typeof param} as parameter '${name}' (nn.Parameter or null expected)`);
    }
    if (this._buffer_persistence.has(name))
      throw new LoomValueError(`[register_parameter] attribute '${name}' already exists as a buffer`);
    this._set_local(name, param);
  }
  register_buffer(name, tensor, persistent = true) {
    this._checkFree("register_buffer", name, (v) => v === undefined || v === null || v instanceof TensorOps && !(v instanceof Parameter));
    if (tensor !== null && !(tensor instanceof TensorOps)) {
      throw new LoomValueError(`[register_buffer] cannot assign a ${tensor?.constructor?.name ?? typeof tensor} as buffer '${name}' (Tensor or null expected)`);
    }
    this._buffer_persistence.set(name, persistent);
    this._set_local(name, tensor instanceof LazyTensor ? tensor.eval() : tensor);
  }
  add_module(name, module) {
    this._checkFree("add_module", name, (v) => v === undefined || v === null || v instanceof Module);
    if (module !== null && !(module instanceof Module)) {
      throw new LoomValueError(`[add_module] ${module?.constructor?.name ?? typeof module} is not a Module subclass`);
    }
    this._set_local(name, module);
  }
  register_module(name, module) {
    this.add_module(name, module);
  }
  _local_modules() {
    return this._local_entries().filter((e) => e[1] instanceof Module);
  }
  _local_parameters() {
    return this._local_entries().filter((e) => e[1] instanceof Parameter && !this._buffer_persistence.has(e[0]));
  }
  _local_buffers() {
    const out = [];
    for (const [k, v] of this._local_entries()) {
      const p = this._buffer_persistence.get(k);
      if (p !== undefined && v instanceof TensorOps)
        out.push([k, v, p]);
    }
    return out;
  }
  named_children() {
    const seen = new Set;
    return this._local_modules().filter(([, m]) => seen.has(m) ? false : (seen.add(m), true));
  }
  children() {
    return this.named_children().map(([, m]) => m);
  }
  named_modules(prefix = "", remove_duplicate = true) {
    const out = [];
    const memo = new Set;
    const onPath = new Set;
    const walk = (m, p) => {
      if (onPath.has(m))
        return;
      if (remove_duplicate) {
        if (memo.has(m))
          return;
        memo.add(m);
      }
      out.push([p, m]);
      onPath.add(m);
      for (const [n, c] of m._local_modules())
        walk(c, p ? `${p}.${n}` : n);
      onPath.delete(m);
    };
    walk(this, prefix);
    return out;
  }
  modules() {
    return this.named_modules().map(([, m]) => m);
  }
  named_parameters(prefix = "", recurse = true, remove_duplicate = true) {
    const mods = recurse ? this.named_modules(prefix, remove_duplicate) : [[prefix, this]];
    const seen = new Set;
    const out = [];
    for (const [mp, m] of mods) {
      for (const [n, p] of m._local_parameters()) {
        if (remove_duplicate && seen.has(p))
          continue;
        seen.add(p);
        out.push([mp ? `${mp}.${n}` : n, p]);
      }
    }
    return out;
  }
  parameters(recurse = true) {
    return this.named_parameters("", recurse).map(([, p]) => p);
  }
  named_buffers(prefix = "", recurse = true, remove_duplicate = true) {
    const mods = recurse ? this.named_modules(prefix, remove_duplicate) : [[prefix, this]];
    const seen = new Set;
    const out = [];
    for (const [mp, m] of mods) {
      for (const [n, b] of m._local_buffers()) {
        if (remove_duplicate && seen.has(b))
          continue;
        seen.add(b);
        out.push([mp ? `${mp}.${n}` : n, b]);
      }
    }
    return out;
  }
  buffers(recurse = true) {
    return this.named_buffers("", recurse).map(([, b]) => b);
  }
  get_submodule(target) {
    if (target === "")
      return this;
    let m = this;
    for (const part of target.split(".")) {
      const next = m._local_modules().find(([n]) => n === part)?.[1];
      if (!next)
        throw new LoomValueError(`[get_submodule] ${m._get_name()} has no submodule \`${part}\` (looking up "${target}")`);
      m = next;
    }
    return m;
  }
  get_parameter(target) {
    const i = target.lastIndexOf(".");
    const m = this.get_submodule(i < 0 ? "" : target.slice(0, i));
    const name = target.slice(i + 1);
    const p = m._local_parameters().find(([n]) => n === name)?.[1];
    if (!p)
      throw new LoomValueError(`[get_parameter] ${m._get_name()} has no parameter \`${name}\` (looking up "${target}")`);
    return p;
  }
  get_buffer(target) {
    const i = target.lastIndexOf(".");
    const m = this.get_submodule(i < 0 ? "" : target.slice(0, i));
    const name = target.slice(i + 1);
    const b = m._local_buffers().find(([n]) => n === name)?.[1];
    if (!b)
      throw new LoomValueError(`[get_buffer] ${m._get_name()} has no buffer \`${name}\` (looking up "${target}")`);
    return b;
  }
  state_dict(opts = {}) {
    const out = {};
    const onPath = new Set;
    const walk = (m, prefix) => {
      if (onPath.has(m))
        return;
      onPath.add(m);
      for (const [n, p] of m._local_parameters())
        out[prefix + n] = opts.keep_vars ? p : p.detach();
      for (const [n, b, persistent] of m._local_buffers())
        if (persistent)
          out[prefix + n] = opts.keep_vars ? b : b.detach();
      for (const [n, c] of m._local_modules())
        walk(c, `${prefix}${n}.`);
      onPath.delete(m);
    };
    walk(this, opts.prefix ?? "");
    return out;
  }
  load_state_dict(state_dict, strict = true) {
    const given = state_dict instanceof Map ? state_dict : new Map(Object.entries(state_dict));
    const own = this.state_dict({ keep_vars: true });
    const missing_keys = Object.keys(own).filter((k) => !given.has(k));
    const unexpected_keys = [...given.keys()].filter((k) => !Object.hasOwn(own, k));
    const errors = [];
    if (strict) {
      if (missing_keys.length)
        errors.push(`Missing key(s) in state_dict: ${missing_keys.map((k) => `"${k}"`).join(", ")}.`);
      if (unexpected_keys.length)
        errors.push(`Unexpected key(s) in state_dict: ${unexpected_keys.map((k) => `"${k}"`).join(", ")}.`);
    }
    const copies = [];
    for (const [k, dst] of Object.entries(own)) {
      const src = given.get(k);
      if (src === undefined)
        continue;
      if (!(src instanceof TensorOps)) {
        errors.push(`While copying the parameter named "${k}", expected a Tensor from checkpoint but received ${src?.constructor?.name ?? typeof src}.`);
        continue;
      }
      const a = src.shape, b = dst.shape;
      if (a.length !== b.length || a.some((s, i) => s !== b[i])) {
        errors.push(`size mismatch for ${k}: copying a param with shape ${fmtShape(a)} from checkpoint, the shape in current model is ${fmtShape(b)}.`);
        continue;
      }
      copies.push([dst, src]);
    }
    if (errors.length) {
      throw new LoomValueError(`[load_state_dict] Error(s) in loading state_dict for ${this._get_name()}:
	${errors.join(`
	`)}`);
    }
    no_grad(() => {
      for (const [dst, src] of copies)
        dst.copy_(src instanceof LazyTensor ? src.eval() : src);
    });
    return { missing_keys, unexpected_keys };
  }
  train(mode = true) {
    if (typeof mode !== "boolean")
      throw new LoomValueError(`[train] training mode is expected to be boolean, got ${typeof mode}`);
    for (const m of this.modules())
      m.training = mode;
    return this;
  }
  eval() {
    return this.train(false);
  }
  requires_grad_(requires_grad = true) {
    for (const p of this.parameters())
      p.requires_grad_(requires_grad);
    return this;
  }
  zero_grad(set_to_none = true) {
    for (const p of this.parameters()) {
      if (!p.grad)
        continue;
      if (set_to_none) {
        p.grad = null;
        continue;
      }
      const g = p.grad.detach();
      no_grad(() => g.zero_());
      p.grad = g;
    }
  }
  apply(fn) {
    for (const c of this.children())
      c.apply(fn);
    fn(this);
    return this;
  }
  to(dtype) {
    if (!DTYPES.includes(dtype))
      return this._to_device(dtype);
    if (!isFloating(dtype))
      throw new LoomValueError(`[to] nn.Module.to only accepts floating point dtypes, but got desired dtype=${dtype}`);
    const done = new Map;
    no_grad(() => {
      for (const m of this.modules()) {
        for (const [n, p] of m._local_parameters()) {
          if (!isFloating(p.dtype) || p.dtype === dtype)
            continue;
          let q = done.get(p);
          if (!q) {
            q = new Parameter(p.detach().to(dtype), p.requires_grad);
            if (p.grad)
              q.grad = p.grad.detach().to(dtype);
            done.set(p, q);
          }
          m._set_local_param(n, q);
        }
        for (const [n, b] of m._local_buffers()) {
          if (!isFloating(b.dtype) || b.dtype === dtype)
            continue;
          let c = done.get(b);
          if (!c) {
            c = b.to(dtype);
            done.set(b, c);
          }
          m[n] = c;
        }
      }
    });
    return this;
  }
  _to_device(device) {
    const done = new Map;
    no_grad(() => {
      for (const m of this.modules()) {
        for (const [n, p] of m._local_parameters()) {
          if (p.device === device)
            continue;
          let q = done.get(p);
          if (!q) {
            q = new Parameter(p.detach().to(device), p.requires_grad);
            if (p.grad)
              q.grad = p.grad.detach().to(device);
            done.set(p, q);
          }
          m._set_local_param(n, q);
        }
        for (const [n, b] of m._local_buffers()) {
          if (b.device === device)
            continue;
          let c = done.get(b);
          if (!c) {
            c = b.to(device);
            done.set(b, c);
          }
          m[n] = c;
        }
      }
    });
    return this;
  }
  _set_local_param(name, p) {
    this[name] = p;
  }
  float() {
    return this.to("float32");
  }
  double() {
    return this.to("float64");
  }
  half() {
    return this.to("float16");
  }
  bfloat16() {
    return this.to("bfloat16");
  }
  forward_lazy(..._args) {
    throw new LoomValueError(`[forward] Module [${this._get_name()}] is missing the required "forward" function (override forward, or the generic forward_lazy)`);
  }
  forward(...args) {
    return this._run(this.forward_lazy, args);
  }
  _run(fn, args) {
    const h = this._module_hooks;
    if (!h || h.empty)
      return run_forward(fn.bind(this), args);
    return h.call(this, this._get_name(), args, (a, prepare) => run_forward((...xs) => fn.apply(this, prepare(xs)), a));
  }
  get _plain_forward() {
    return this.forward_lazy === Module.prototype.forward_lazy && this.forward !== Module.prototype.forward;
  }
  _module_hooks = null;
  get _hooks_() {
    return this._module_hooks ??= new ModuleHooks;
  }
  register_forward_pre_hook(hook) {
    return this._hooks_.forwardPre.add(hook);
  }
  register_forward_hook(hook) {
    return this._hooks_.forward.add(hook);
  }
  register_full_backward_pre_hook(hook) {
    return this._hooks_.backwardPre.add(hook);
  }
  register_full_backward_hook(hook) {
    return this._hooks_.backward.add(hook);
  }
  _get_name() {
    return this.constructor.name;
  }
  extra_repr() {
    return "";
  }
  toString() {
    const kids = this._local_modules();
    const extra = this.extra_repr();
    if (kids.length === 0)
      return `${this._get_name()}(${extra})`;
    const lines = extra ? extra.split(`
`) : [];
    for (const [n, c] of kids)
      lines.push(`(${n}): ${c.toString().split(`
`).join(`
  `)}`);
    return `${this._get_name()}(
  ${lines.join(`
  `)}
)`;
  }
  [Symbol.for("nodejs.util.inspect.custom")]() {
    return this.toString();
  }
}

class TensorModule extends Module {
  forward(x) {
    return super.forward(x);
  }
}
Object.defineProperties(Module.prototype, {
  call: {
    value: function call(...args) {
      if (this._plain_forward)
        return this._run(this.forward, args);
      return this.forward(...args);
    },
    writable: true,
    configurable: true
  },
  forward_eager: {
    value: function forward_eager(...args) {
      return with_execution_mode("eager", () => this.call(...args));
    },
    writable: true,
    configurable: true
  }
});
function py_float(x) {
  if (!Number.isFinite(x))
    return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x) && Math.abs(x) < 10000000000000000)
    return `${x}.0`;
  if (x !== 0 && (Math.abs(x) < 0.0001 || Math.abs(x) >= 10000000000000000)) {
    const [m, e] = x.toExponential().split("e");
    const sign = e.startsWith("-") ? "-" : "+";
    return `${m}e${sign}${e.replace(/^[+-]/, "").padStart(2, "0")}`;
  }
  return String(x);
}
function py_bool(b) {
  return b ? "True" : "False";
}
// src/nn/init.ts
function fill(t, draw) {
  const n = t.numel();
  const vals = new Float64Array(n);
  for (let i = 0;i < n; i++)
    vals[i] = draw(i);
  no_grad(() => t.copy_(t._constant(fromValues("float64", t.shape, vals))));
  return t;
}
function unit(t, g) {
  return t.dtype === "float64" ? () => g.uniform53() : () => g.uniform();
}
function checkFloat(op, t) {
  if (!isFloating(t.dtype))
    throw new LoomValueError(`[${op}] expected a floating point tensor, got ${t.dtype}`);
}
function calculate_gain(nonlinearity, param) {
  const linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"];
  if (linear.includes(nonlinearity) || nonlinearity === "sigmoid")
    return 1;
  if (nonlinearity === "tanh")
    return 5 / 3;
  if (nonlinearity === "relu")
    return Math.SQRT2;
  if (nonlinearity === "leaky_relu") {
    const slope = param ?? 0.01;
    if (typeof slope !== "number" || Number.isNaN(slope))
      throw new LoomValueError(`[calculate_gain] negative_slope ${String(slope)} not a valid number`);
    return Math.sqrt(2 / (1 + slope * slope));
  }
  if (nonlinearity === "selu")
    return 3 / 4;
  throw new LoomValueError(`[calculate_gain] Unsupported nonlinearity ${String(nonlinearity)}`);
}
function calculate_fan_in_and_fan_out(t) {
  if (t.shape.length < 2) {
    throw new LoomValueError("[init] Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  }
  const receptive = t.shape.slice(2).reduce((p, s) => p * s, 1);
  return { fan_in: t.shape[1] * receptive, fan_out: t.shape[0] * receptive };
}
function correctFan(t, mode) {
  if (mode !== "fan_in" && mode !== "fan_out")
    throw new LoomValueError(`[init] Mode ${String(mode)} not supported, please use one of fan_in, fan_out`);
  return calculate_fan_in_and_fan_out(t)[mode];
}
function uniform_(t, a = 0, b = 1, opts = {}) {
  checkFloat("uniform_", t);
  const u = unit(t, opts.generator ?? default_generator);
  return fill(t, () => a + (b - a) * u());
}
function normal_(t, mean = 0, std = 1, opts = {}) {
  checkFloat("normal_", t);
  const g = opts.generator ?? default_generator;
  return fill(t, () => mean + std * g.normal());
}
function constant_(t, val) {
  no_grad(() => t.fill_(val));
  return t;
}
function zeros_(t) {
  return constant_(t, 0);
}
function ones_(t) {
  return constant_(t, 1);
}
function kaiming_uniform_(t, a = 0, mode = "fan_in", nonlinearity = "leaky_relu", opts = {}) {
  if (t.numel() === 0)
    return t;
  const std = calculate_gain(nonlinearity, a) / Math.sqrt(correctFan(t, mode));
  const bound = Math.sqrt(3) * std;
  return uniform_(t, -bound, bound, opts);
}

// src/nn/linear.ts
class Linear extends TensorModule {
  weight;
  bias;
  in_features;
  out_features;
  constructor(in_features, out_features, opts = {}) {
    super();
    for (const [n, v] of [["in_features", in_features], ["out_features", out_features]]) {
      if (!Number.isInteger(v) || v < 0)
        throw new LoomValueError(`[Linear] ${n} must be a non-negative integer, got ${v}`);
    }
    this.in_features = in_features;
    this.out_features = out_features;
    const dtype = opts.dtype ?? "float32";
    this.weight = new Parameter(zeros([out_features, in_features], { dtype }));
    this.bias = opts.bias === false ? null : new Parameter(zeros([out_features], { dtype }));
    this.reset_parameters(opts.generator);
  }
  reset_parameters(generator) {
    kaiming_uniform_(this.weight, Math.sqrt(5), "fan_in", "leaky_relu", { generator });
    if (this.bias) {
      const fan_in = this.in_features;
      const bound = fan_in > 0 ? 1 / Math.sqrt(fan_in) : 0;
      uniform_(this.bias, -bound, bound, { generator });
    }
  }
  forward_lazy(x) {
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== this.in_features) {
      throw new LoomShapeError(`[Linear] input ${fmtShape(x.shape)} does not end in in_features=${this.in_features} (weight ${fmtShape(this.weight.shape)})`);
    }
    return linear(x, lift(this.weight, x), lift(this.bias, x));
  }
  extra_repr() {
    return `in_features=${this.in_features}, out_features=${this.out_features}, bias=${this.bias ? "True" : "False"}`;
  }
}

class Embedding extends TensorModule {
  weight;
  num_embeddings;
  embedding_dim;
  padding_idx;
  max_norm;
  norm_type;
  scale_grad_by_freq;
  constructor(num_embeddings, embedding_dim, opts = {}) {
    super();
    this.num_embeddings = num_embeddings;
    this.embedding_dim = embedding_dim;
    let p = opts.padding_idx ?? null;
    if (p !== null) {
      if (p >= num_embeddings || p < -num_embeddings || !Number.isInteger(p)) {
        throw new LoomValueError(`[Embedding] padding_idx must be within num_embeddings (${num_embeddings}), got ${p}`);
      }
      if (p < 0)
        p += num_embeddings;
    }
    this.padding_idx = p;
    if (opts.max_norm !== undefined && opts.max_norm !== null && !(opts.max_norm >= 0))
      throw new LoomValueError(`[Embedding] max_norm must be non-negative, got ${opts.max_norm}`);
    if (opts.sparse)
      throw new LoomValueError("[Embedding] sparse gradients are not supported (sparse: true)");
    this.max_norm = opts.max_norm ?? null;
    this.norm_type = opts.norm_type ?? 2;
    this.scale_grad_by_freq = opts.scale_grad_by_freq ?? false;
    if (opts._weight) {
      const want = [num_embeddings, embedding_dim];
      if (opts._weight.ndim !== 2 || opts._weight.shape[0] !== want[0] || opts._weight.shape[1] !== want[1]) {
        throw new LoomShapeError(`[Embedding] _weight ${fmtShape(opts._weight.shape)} does not match num_embeddings, embedding_dim ${fmtShape(want)}`);
      }
      this.weight = new Parameter(opts._weight);
    } else {
      this.weight = new Parameter(zeros([num_embeddings, embedding_dim], { dtype: opts.dtype ?? "float32" }));
      this.reset_parameters(opts.generator);
    }
  }
  reset_parameters(generator) {
    normal_(this.weight, 0, 1, { generator });
    if (this.padding_idx !== null) {
      const row = this.weight.narrow(0, this.padding_idx, 1);
      no_grad(() => row.zero_());
    }
  }
  static from_pretrained(embeddings, opts = {}) {
    if (embeddings.ndim !== 2)
      throw new LoomShapeError(`[Embedding.from_pretrained] embeddings must be 2-dimensional, got ${fmtShape(embeddings.shape)}`);
    const { freeze: _f, ...rest } = opts;
    const e = new Embedding(embeddings.shape[0], embeddings.shape[1], { ...rest, _weight: embeddings });
    e.weight.requires_grad = !(opts.freeze ?? true);
    return e;
  }
  forward_lazy(input) {
    const opts = { padding_idx: this.padding_idx, max_norm: this.max_norm, norm_type: this.norm_type, scale_grad_by_freq: this.scale_grad_by_freq };
    return _embedding(input, lift(this.weight, input), opts, (w, v) => this._renorm_write(w, v));
  }
  _renorm_write(w, value) {
    if (w instanceof LazyTensor)
      no_grad(() => w.copy_(value));
    else
      this.weight._write_private(value);
  }
  extra_repr() {
    let s = `${this.num_embeddings}, ${this.embedding_dim}`;
    if (this.padding_idx !== null)
      s += `, padding_idx=${this.padding_idx}`;
    if (this.max_norm !== null)
      s += `, max_norm=${py_float(this.max_norm)}`;
    if (this.norm_type !== 2)
      s += `, norm_type=${py_float(this.norm_type)}`;
    if (this.scale_grad_by_freq)
      s += ", scale_grad_by_freq=True";
    return s;
  }
}
// src/nn/conv1d.ts
class Conv1D extends TensorModule {
  weight;
  bias;
  nf;
  nx;
  constructor(nf, nx, opts = {}) {
    super();
    for (const [n, v] of [["nf", nf], ["nx", nx]]) {
      if (!Number.isInteger(v) || v < 0)
        throw new LoomValueError(`[Conv1D] ${n} must be a non-negative integer, got ${v}`);
    }
    this.nf = nf;
    this.nx = nx;
    const dtype = opts.dtype ?? "float32";
    this.weight = new Parameter(zeros([nx, nf], { dtype }));
    this.bias = new Parameter(zeros([nf], { dtype }));
    normal_(this.weight, 0, 0.02, { generator: opts.generator });
  }
  get in_features() {
    return this.nx;
  }
  get out_features() {
    return this.nf;
  }
  forward_lazy(x) {
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== this.nx) {
      throw new LoomShapeError(`[Conv1D] input ${fmtShape(x.shape)} does not end in nx=${this.nx} (weight ${fmtShape(this.weight.shape)})`);
    }
    return x.matmul(lift(this.weight, x)).add(lift(this.bias, x));
  }
  extra_repr() {
    return `nf=${this.nf}, nx=${this.nx}`;
  }
}
// src/nn/activation.ts
class ReLU extends TensorModule {
  forward_lazy(x) {
    return x.relu();
  }
}

class GELU extends TensorModule {
  approximate;
  constructor(approximate = "none") {
    super();
    if (approximate !== "none" && approximate !== "tanh")
      throw new LoomValueError(`[GELU] approximate must be "none" or "tanh", got ${String(approximate)}`);
    this.approximate = approximate;
  }
  forward_lazy(x) {
    return x.gelu(this.approximate);
  }
  extra_repr() {
    return `approximate='${this.approximate}'`;
  }
}

class SiLU extends TensorModule {
  forward_lazy(x) {
    return x.silu();
  }
}
class Tanh extends TensorModule {
  forward_lazy(x) {
    return x.tanh();
  }
}
class Identity extends TensorModule {
  constructor(..._args) {
    super();
  }
  forward_lazy(x) {
    return x;
  }
}

class Dropout extends TensorModule {
  p;
  inplace;
  constructor(p = 0.5, inplace = false) {
    super();
    if (!(p >= 0 && p <= 1))
      throw new LoomValueError(`[Dropout] dropout probability has to be between 0 and 1, but got ${p}`);
    this.p = p;
    this.inplace = inplace;
  }
  forward_lazy(x) {
    return dropout(x, this.p, this.training);
  }
  extra_repr() {
    return `p=${py_float(this.p)}, inplace=${py_bool(this.inplace)}`;
  }
}
// src/nn/normalization.ts
function normShape(op, s) {
  const shape = typeof s === "number" ? [s] : [...s];
  if (shape.length === 0 || shape.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new LoomValueError(`[${op}] normalized_shape must be a non-empty list of non-negative integers, got [${shape.join(", ")}]`);
  }
  return shape;
}
function tuple(s) {
  return s.length === 1 ? `(${s[0]},)` : `(${s.join(", ")})`;
}

class LayerNorm extends TensorModule {
  weight;
  bias;
  normalized_shape;
  eps;
  elementwise_affine;
  constructor(normalized_shape, opts = {}) {
    super();
    this.normalized_shape = normShape("LayerNorm", normalized_shape);
    this.eps = opts.eps ?? 0.00001;
    this.elementwise_affine = opts.elementwise_affine ?? true;
    const dtype = opts.dtype ?? "float32";
    this.weight = this.elementwise_affine ? new Parameter(full(this.normalized_shape, 1, { dtype })) : null;
    this.bias = this.elementwise_affine && opts.bias !== false ? new Parameter(full(this.normalized_shape, 0, { dtype })) : null;
  }
  forward_lazy(x) {
    return layer_norm(x, this.normalized_shape, lift(this.weight, x), lift(this.bias, x), this.eps);
  }
  extra_repr() {
    return `${tuple(this.normalized_shape)}, eps=${py_float(this.eps)}, elementwise_affine=${py_bool(this.elementwise_affine)}`;
  }
}
// src/nn/container.ts
function checkModule(op, m) {
  if (!(m instanceof Module))
    throw new LoomValueError(`[${op}] ${m?.constructor?.name ?? typeof m} is not a Module subclass`);
}
function numbered(m) {
  const self = m;
  const out = [];
  for (let i = 0;self[String(i)] instanceof Module; i++)
    out.push(self[String(i)]);
  return out;
}
function normIndex(op, i, n) {
  const j = i < 0 ? i + n : i;
  if (!Number.isInteger(i) || j < 0 || j >= n)
    throw new LoomIndexError(`[${op}] index ${i} is out of range for a container of length ${n}`);
  return j;
}
class ModuleList extends Module {
  constructor(modules = []) {
    super();
    this.extend(modules);
  }
  get length() {
    return numbered(this).length;
  }
  get(i) {
    const mods = numbered(this);
    return mods[normIndex("ModuleList", i, mods.length)];
  }
  set(i, m) {
    checkModule("ModuleList.set", m);
    const j = normIndex("ModuleList", i, this.length);
    this._set_local(String(j), m);
  }
  append(m) {
    checkModule("ModuleList.append", m);
    this._set_local(String(this.length), m);
    return this;
  }
  extend(modules) {
    for (const m of modules)
      this.append(m);
    return this;
  }
  insert(i, m) {
    checkModule("ModuleList.insert", m);
    const mods = numbered(this);
    const n = mods.length;
    const j = Math.min(Math.max(i < 0 ? i + n : i, 0), n);
    mods.splice(j, 0, m);
    mods.forEach((x, k) => this._set_local(String(k), x));
  }
  [Symbol.iterator]() {
    return numbered(this)[Symbol.iterator]();
  }
  map(fn) {
    return numbered(this).map(fn);
  }
}

class ModuleDict extends Module {
  _dict = new Map;
  constructor(modules = {}) {
    super();
    this.update(modules);
  }
  _local_entries() {
    return [...super._local_entries(), ...this._dict];
  }
  _set_local(name, value) {
    if (value instanceof Module)
      this._dict.set(name, value);
    else
      super._set_local(name, value);
  }
  add_module(name, module) {
    if (typeof name !== "string" || name === "" || name.includes(".")) {
      throw new LoomValueError(`[ModuleDict] key must be a non-empty string without ".", got ${JSON.stringify(name)}`);
    }
    if (module === null) {
      this._dict.delete(name);
      return;
    }
    checkModule("ModuleDict", module);
    this._dict.set(name, module);
  }
  get(key) {
    const m = this._dict.get(key);
    if (!m)
      throw new LoomValueError(`[ModuleDict] no module under key '${key}' (keys: ${[...this._dict.keys()].join(", ")})`);
    return m;
  }
  set(key, m) {
    this.add_module(key, m);
  }
  has(key) {
    return this._dict.has(key);
  }
  pop(key) {
    const m = this.get(key);
    this._dict.delete(key);
    return m;
  }
  clear() {
    this._dict.clear();
  }
  update(modules) {
    const entries = modules instanceof Map || Symbol.iterator in modules ? [...modules] : Object.entries(modules);
    for (const [k, m] of entries)
      this.add_module(k, m);
  }
  keys() {
    return [...this._dict.keys()];
  }
  values() {
    return [...this._dict.values()];
  }
  items() {
    return [...this._dict];
  }
  get length() {
    return this._dict.size;
  }
  [Symbol.iterator]() {
    return this._dict.keys();
  }
}
// src/lora/config.ts
var ADAPTER_CONFIG_NAME = "adapter_config.json";
var DEFAULTS2 = {
  r: 8,
  lora_alpha: 8,
  lora_dropout: 0,
  target_modules: null,
  fan_in_fan_out: false,
  bias: "none",
  init_lora_weights: true,
  use_rslora: false,
  rank_pattern: {},
  alpha_pattern: {},
  layers_to_transform: null,
  layers_pattern: null,
  modules_to_save: null,
  peft_type: "LORA",
  task_type: null,
  base_model_name_or_path: null,
  revision: null,
  inference_mode: false,
  use_dora: false
};
var DEFAULT_TARGET_MODULES = { gpt2: ["c_attn"] };

class LoraConfig {
  r;
  lora_alpha;
  lora_dropout;
  target_modules;
  fan_in_fan_out;
  bias;
  init_lora_weights;
  use_rslora;
  rank_pattern;
  alpha_pattern;
  layers_to_transform;
  layers_pattern;
  modules_to_save;
  peft_type;
  task_type;
  base_model_name_or_path;
  revision;
  inference_mode;
  use_dora;
  extra = {};
  constructor(fields = {}) {
    const known = new Set(Object.keys(DEFAULTS2));
    const self = this;
    for (const k of known)
      self[k] = structuredClone(fields[k] ?? DEFAULTS2[k]);
    for (const [k, v] of Object.entries(fields))
      if (!known.has(k))
        Object.defineProperty(this.extra, k, { value: v, enumerable: true, writable: true, configurable: true });
    if (!Number.isInteger(this.r) || this.r <= 0)
      throw new LoomValueError(`[LoraConfig] \`r\` should be a positive integer value but the value passed is ${this.r}`);
    if (typeof this.lora_alpha !== "number" || !Number.isFinite(this.lora_alpha))
      throw new LoomValueError(`[LoraConfig] lora_alpha must be a finite number, got ${String(this.lora_alpha)}`);
    if (!(this.lora_dropout >= 0 && this.lora_dropout < 1))
      throw new LoomValueError(`[LoraConfig] lora_dropout must be in [0, 1), got ${this.lora_dropout}`);
    if (!["none", "all", "lora_only"].includes(this.bias))
      throw new LoomValueError(`[LoraConfig] bias must be "none", "all" or "lora_only", got ${JSON.stringify(this.bias)}`);
    if (![true, false, "gaussian"].includes(this.init_lora_weights)) {
      throw new LoomValueError(`[LoraConfig] init_lora_weights must be true, false or "gaussian" (others are not supported by Loom), got ${JSON.stringify(this.init_lora_weights)}`);
    }
    if (this.peft_type !== "LORA")
      throw new LoomValueError(`[LoraConfig] peft_type must be "LORA", got ${JSON.stringify(this.peft_type)}`);
    if (this.use_dora)
      throw new LoomValueError("[LoraConfig] use_dora=true is not supported by Loom");
    if (this.modules_to_save !== null && this.modules_to_save.length > 0)
      throw new LoomValueError("[LoraConfig] modules_to_save is not supported by Loom");
    if (typeof this.target_modules === "string" && this.layers_to_transform !== null) {
      throw new LoomValueError("[LoraConfig] `layers_to_transform` cannot be used when `target_modules` is a str.");
    }
    const tm = this.target_modules;
    if (tm !== null && typeof tm !== "string" && !Array.isArray(tm)) {
      throw new LoomValueError(`[LoraConfig] target_modules must be null, a regular expression string or a list of module names, got ${JSON.stringify(tm)}`);
    }
    if (Array.isArray(tm) && tm.some((t) => typeof t !== "string" || t === "")) {
      throw new LoomValueError(`[LoraConfig] target_modules entries must be non-empty strings, got ${JSON.stringify(tm)}`);
    }
    if (typeof tm === "string")
      targetRegex(tm);
    for (const [name, pat] of [["rank_pattern", this.rank_pattern], ["alpha_pattern", this.alpha_pattern]]) {
      if (typeof pat !== "object" || pat === null || Array.isArray(pat))
        throw new LoomValueError(`[LoraConfig] ${name} must be an object of pattern -> value, got ${JSON.stringify(pat)}`);
      for (const [k, v] of Object.entries(pat)) {
        patternRegex(name, k);
        if (typeof v !== "number" || name === "rank_pattern" && (!Number.isInteger(v) || v <= 0))
          throw new LoomValueError(`[LoraConfig] ${name}[${JSON.stringify(k)}] must be ${name === "rank_pattern" ? "a positive integer" : "a number"}, got ${JSON.stringify(v)}`);
      }
    }
  }
  to_dict() {
    const self = this;
    const d = { ...this.extra };
    for (const k of Object.keys(DEFAULTS2))
      d[k] = structuredClone(self[k]);
    return Object.fromEntries(Object.keys(d).sort().map((k) => [k, d[k]]));
  }
  replace(fields) {
    return new LoraConfig({ ...this.to_dict(), ...fields });
  }
  to_json_string() {
    return JSON.stringify(this.to_dict(), null, 2) + `
`;
  }
  save_pretrained(dir) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, ADAPTER_CONFIG_NAME), this.to_json_string());
  }
  static from_dict(d) {
    return new LoraConfig(d);
  }
  static from_pretrained(dir) {
    const path = join(dir, ADAPTER_CONFIG_NAME);
    const bytes = readCheckpointFile(dir, ADAPTER_CONFIG_NAME, "[LoraConfig.from_pretrained]");
    if (bytes === null)
      throw new LoomValueError(`[LoraConfig.from_pretrained] no ${ADAPTER_CONFIG_NAME} in ${dir}`);
    let d;
    try {
      d = JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new LoomValueError(`[LoraConfig.from_pretrained] ${path} is not valid JSON: ${e.message}`);
    }
    if (typeof d !== "object" || d === null || Array.isArray(d))
      throw new LoomValueError(`[LoraConfig.from_pretrained] ${path} must hold a JSON object`);
    return LoraConfig.from_dict(d);
  }
}
var SHARED_ESCAPES = new Set("dDwWsSbBnrtfvxu");
function checkRegex(field, pattern, wrap) {
  const bad = (why) => new LoomValueError(`[LoraConfig] ${field} ${JSON.stringify(pattern)} ${why}`);
  for (let i = 0;i < pattern.length; i++) {
    if (pattern[i] !== "\\")
      continue;
    const c = pattern[++i] ?? "";
    const hex = c === "x" ? 2 : c === "u" ? 4 : 0;
    const ok = !/[A-Za-z]/.test(c) || SHARED_ESCAPES.has(c) && new RegExp(`^[0-9A-Fa-f]{${hex}}`).test(pattern.slice(i + 1));
    if (!ok)
      throw bad(`uses \\${c}, which Python's re (PEFT) and JavaScript read differently; write it another way`);
  }
  try {
    new RegExp(pattern);
    return new RegExp(wrap(pattern));
  } catch (e) {
    throw bad(`does not compile as a JavaScript regular expression (${e.message})`);
  }
}
function targetRegex(pattern) {
  return checkRegex("target_modules", pattern, (p) => `^(?:${p})$`);
}
function patternRegex(field, pattern) {
  return checkRegex(`${field} key`, pattern, (p) => `^(.*\\.)?${p}$`);
}
function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
function check_target_module_exists(config, key, target_modules = config.target_modules ?? []) {
  if (typeof target_modules === "string")
    return targetRegex(target_modules).test(key);
  const found = target_modules.includes(key) || target_modules.some((t) => key.endsWith(`.${t}`));
  if (!found || config.layers_to_transform === null)
    return found;
  const wanted = typeof config.layers_to_transform === "number" ? [config.layers_to_transform] : config.layers_to_transform;
  const patterns = config.layers_pattern === null ? null : typeof config.layers_pattern === "string" ? [config.layers_pattern] : config.layers_pattern;
  let m = null;
  if (patterns === null)
    m = key.match(/^.*\.[^.]*\.(\d+)\./);
  else
    for (const p of patterns)
      if (m = key.match(new RegExp(`^.*\\.${escapeRe(p)}\\.(\\d+)\\.`)))
        break;
  return m !== null && wanted.includes(Number(m[1]));
}
function pattern_value(pattern, key, fallback) {
  for (const [p, v] of Object.entries(pattern))
    if (patternRegex("pattern", p).test(key))
      return v;
  return fallback;
}
// src/lora/layer.ts
function is_lora_target_layer(m) {
  return m instanceof Linear || m instanceof Conv1D;
}

class LoraLayer extends TensorModule {
  base_layer;
  lora_dropout;
  lora_A;
  lora_B;
  r = {};
  lora_alpha = {};
  scaling = {};
  merged_adapters = [];
  active_adapters;
  disable_adapters = false;
  fan_in_fan_out;
  in_features;
  out_features;
  constructor(base_layer, adapter_name, spec) {
    super();
    if (!is_lora_target_layer(base_layer)) {
      throw new LoomValueError(`[LoraLayer] Target module ${base_layer._get_name()} is not supported. Currently, only Linear and Conv1D are supported.`);
    }
    this.base_layer = base_layer;
    this.lora_dropout = new ModuleDict;
    this.lora_A = new ModuleDict;
    this.lora_B = new ModuleDict;
    this.fan_in_fan_out = base_layer instanceof Conv1D;
    this.in_features = base_layer.in_features;
    this.out_features = base_layer.out_features;
    this.active_adapters = [adapter_name];
    this.update_layer(adapter_name, spec);
  }
  get adapters() {
    return this.lora_A.keys();
  }
  get merged() {
    return this.merged_adapters.length > 0;
  }
  update_layer(name, spec) {
    const { r, lora_alpha } = spec;
    if (!Number.isInteger(r) || r <= 0)
      throw new LoomValueError(`[LoraLayer] \`r\` should be a positive integer value but the value passed is ${r}`);
    this.r[name] = r;
    this.lora_alpha[name] = lora_alpha;
    this.lora_dropout.set(name, spec.lora_dropout > 0 ? new Dropout(spec.lora_dropout) : new Identity);
    const dtype = this.base_layer.weight.dtype;
    const g = spec.generator;
    this.lora_A.set(name, new Linear(this.in_features, r, { bias: false, dtype, generator: g }));
    this.lora_B.set(name, new Linear(r, this.out_features, { bias: false, dtype, generator: g }));
    this.scaling[name] = spec.use_rslora ? lora_alpha / Math.sqrt(r) : lora_alpha / r;
    this.reset_lora_parameters(name, spec.init_lora_weights, g);
    const device = this.base_layer.weight.device;
    if (device !== "cpu") {
      this.lora_A.get(name).to(device);
      this.lora_B.get(name).to(device);
    }
    this.lora_dropout.get(name).train(this.training);
    this.set_adapter(this.active_adapters);
  }
  reset_lora_parameters(name, init, generator) {
    if (init === false)
      return;
    const A = this.lora_A.get(name).weight;
    if (init === "gaussian")
      normal_(A, 0, 1 / this.r[name], { generator });
    else
      kaiming_uniform_(A, Math.sqrt(5), "fan_in", "leaky_relu", { generator });
    zeros_(this.lora_B.get(name).weight);
  }
  set_adapter(names) {
    const list = typeof names === "string" ? [names] : [...names];
    for (const n of list)
      if (!this.lora_A.has(n))
        throw new LoomValueError(`[LoraLayer] adapter "${n}" not found (adapters: ${this.adapters.join(", ")})`);
    for (const n of this.adapters) {
      const on = list.includes(n) && !this.disable_adapters;
      this.lora_A.get(n).requires_grad_(on);
      this.lora_B.get(n).requires_grad_(on);
    }
    this.active_adapters = list;
  }
  enable_adapters(enabled) {
    this.disable_adapters = !enabled;
    this.set_adapter(this.active_adapters);
  }
  delete_adapter(name) {
    if (!this.lora_A.has(name))
      throw new LoomValueError(`[LoraLayer] adapter "${name}" not found (adapters: ${this.adapters.join(", ")})`);
    if (this.merged_adapters.includes(name))
      throw new LoomValueError(`[LoraLayer] adapter "${name}" is merged into the base weight: unmerge() before deleting it`);
    this.lora_A.pop(name);
    this.lora_B.pop(name);
    this.lora_dropout.pop(name);
    delete this.r[name];
    delete this.lora_alpha[name];
    delete this.scaling[name];
    if (this.active_adapters.includes(name)) {
      const rest = this.active_adapters.filter((n) => n !== name);
      this.active_adapters = rest.length > 0 ? rest : this.adapters.slice(0, 1);
    }
  }
  get_delta_weight(name) {
    return no_grad(() => {
      const d = this.lora_B.get(name).weight.matmul(this.lora_A.get(name).weight).mul(this.scaling[name]);
      return this.fan_in_fan_out ? d.t().contiguous() : d;
    });
  }
  merge(opts = {}) {
    const names = opts.adapter_names ?? this.active_adapters;
    no_grad(() => {
      for (const n of names) {
        if (!this.lora_A.has(n))
          throw new LoomValueError(`[LoraLayer.merge] adapter "${n}" not found (adapters: ${this.adapters.join(", ")})`);
        if (this.merged_adapters.includes(n))
          continue;
        const W = this.base_layer.weight;
        const delta = this.get_delta_weight(n);
        if (opts.safe_merge) {
          const merged = W.add(delta);
          if (!merged.dataSync().every(Number.isFinite)) {
            throw new LoomValueError(`[LoraLayer.merge] NaNs detected in the merged weights. The adapter ${n} seems to be broken`);
          }
          W.copy_(merged);
        } else {
          W.add_(delta);
        }
        this.merged_adapters.push(n);
      }
    });
  }
  unmerge() {
    no_grad(() => {
      while (this.merged_adapters.length > 0) {
        const n = this.merged_adapters.pop();
        this.base_layer.weight.sub_(this.get_delta_weight(n));
      }
    });
  }
  forward_lazy(x) {
    if (this.disable_adapters) {
      if (this.merged)
        this.unmerge();
      return this.base_layer.forward(x);
    }
    if (this.merged)
      return this.base_layer.forward(x);
    let result = null;
    for (const n of this.active_adapters) {
      if (!this.lora_A.has(n))
        continue;
      const A = this.lora_A.get(n), B = this.lora_B.get(n), drop = this.lora_dropout.get(n);
      const s = this.scaling[n];
      const dropping = drop instanceof Dropout && drop.training && drop.p > 0;
      if (result === null && !dropping && x.dtype === A.weight.dtype && x.dtype === this.base_layer.weight.dtype) {
        const W = lift(this.base_layer.weight, x);
        result = lora_linear3(x, this.fan_in_fan_out ? W.t() : W, lift(A.weight, x), lift(B.weight, x), s, lift(this.base_layer.bias, x));
        continue;
      }
      result ??= this.base_layer.forward(x);
      const xa = x.dtype === A.weight.dtype ? x : x.to(A.weight.dtype);
      const delta = B.forward(A.forward(drop.forward(xa))).mul(s);
      result = result.add(delta.dtype === result.dtype ? delta : delta.to(result.dtype));
    }
    return result ?? this.base_layer.forward(x);
  }
  extra_repr() {
    const rs = this.adapters.map((n) => `${n}: r=${this.r[n]}, lora_alpha=${this.lora_alpha[n]}`).join("; ");
    return `fan_in_fan_out=${this.fan_in_fan_out ? "True" : "False"}${rs ? `, ${rs}` : ""}`;
  }
}
// src/lora/model.ts
var STATE = new WeakMap;

class LoraModel extends Module {
  model;
  constructor(model) {
    super();
    this.model = model;
  }
  forward_lazy(...args) {
    return this.model.forward_lazy(...args);
  }
}
function unwrap(model) {
  if (model instanceof LoraModel)
    return model.model;
  const base = model.base_model;
  return base instanceof LoraModel ? base.model : model;
}
function lora_layers(model) {
  return unwrap(model).named_modules().filter((e) => e[1] instanceof LoraLayer);
}
function parentOf(root, path) {
  const i = path.lastIndexOf(".");
  return [root.get_submodule(i < 0 ? "" : path.slice(0, i)), path.slice(i + 1)];
}
function replaceModule(root, path, child) {
  const [parent, name] = parentOf(root, path);
  parent.add_module(name, child);
}
function inject_adapter_in_model(config, model, adapter_name = "default", opts = {}) {
  const root = unwrap(model);
  if (adapter_name.includes(".") || adapter_name === "")
    throw new LoomValueError(`[inject_adapter_in_model] adapter name must be non-empty and contain no ".", got ${JSON.stringify(adapter_name)}`);
  let state = STATE.get(root);
  if (state?.peft_config.has(adapter_name))
    throw new LoomValueError(`[inject_adapter_in_model] adapter "${adapter_name}" already exists`);
  const cfg = config.replace({});
  let targets = cfg.target_modules;
  if (targets === null) {
    const model_type = root.config?.model_type;
    const dflt = model_type ? DEFAULT_TARGET_MODULES[model_type] : undefined;
    if (!dflt)
      throw new LoomValueError("[inject_adapter_in_model] Please specify `target_modules` in `peft_config`");
    targets = cfg.target_modules = [...dflt];
  }
  const wrapped = new Set(lora_layers(root).map(([p]) => p));
  const inside = (p) => [...wrapped].some((w) => p.startsWith(`${w}.`));
  const matched = [];
  for (const [path, m] of root.named_modules()) {
    if (path === "" || inside(path) || !check_target_module_exists(cfg, path, targets))
      continue;
    matched.push(path);
    const r = pattern_value(cfg.rank_pattern, path, cfg.r);
    const spec = {
      r,
      lora_alpha: pattern_value(cfg.alpha_pattern, path, cfg.lora_alpha),
      lora_dropout: cfg.lora_dropout,
      init_lora_weights: cfg.init_lora_weights,
      use_rslora: cfg.use_rslora,
      generator: opts.generator
    };
    if (m instanceof LoraLayer) {
      m.update_layer(adapter_name, spec);
      continue;
    }
    if (!is_lora_target_layer(m)) {
      throw new LoomValueError(`[inject_adapter_in_model] Target module ${m._get_name()} at "${path}" is not supported. Currently, only Linear and Conv1D are supported.`);
    }
    const fifo = m instanceof Conv1D;
    if (cfg.fan_in_fan_out !== fifo) {
      console.warn(`[lora] fan_in_fan_out is set to ${cfg.fan_in_fan_out} but the target module is \`${m._get_name()}\`. Setting fan_in_fan_out to ${fifo}.`);
      cfg.fan_in_fan_out = fifo;
    }
    const layer = new LoraLayer(m, adapter_name, spec);
    layer.train(m.training);
    replaceModule(root, path, layer);
  }
  if (matched.length === 0) {
    throw new LoomValueError(`[inject_adapter_in_model] Target modules ${JSON.stringify(targets)} not found in the base model. Please check the target modules and try again.`);
  }
  if (!state)
    STATE.set(root, state = { peft_config: new Map, active_adapter: adapter_name });
  state.peft_config.set(adapter_name, cfg);
  for (const [, l] of lora_layers(root))
    l.set_adapter(activeList(state.active_adapter).filter((n) => l.adapters.includes(n)));
  mark_only_lora_as_trainable(root, cfg.bias);
  return model;
}
function activeList(a) {
  return typeof a === "string" ? [a] : a;
}
function mark_only_lora_as_trainable(model, bias = "none") {
  const root = unwrap(model);
  for (const [n, p] of root.named_parameters())
    if (!n.includes("lora_"))
      p.requires_grad_(false);
  if (bias === "all") {
    for (const [n, p] of root.named_parameters())
      if (n.endsWith("bias"))
        p.requires_grad_(true);
  } else if (bias === "lora_only") {
    for (const [, l] of lora_layers(root))
      l.base_layer.bias?.requires_grad_(true);
  }
}
// src/lora/tensor_io.ts
function tensor_from_io(t) {
  return new Tensor({ dtype: t.dtype, shape: t.shape.slice(), strides: contiguousStrides(t.shape), offset: 0, data: t.data });
}
function tensor_to_io(t) {
  const r = t instanceof Tensor ? t : t.eval();
  const e = r.device === "cpu" ? r : r.to("cpu");
  const d = toContiguous(e._d);
  return { dtype: d.dtype, shape: d.shape, data: d.data };
}

// src/lora/save_load.ts
var PEFT_PREFIX = "base_model.model.";
function set_peft_model_state_dict(model, state, adapter_name = "default") {
  const root = unwrap(model);
  const own = root.state_dict({ keep_vars: true });
  const want = new Map;
  for (const [path, l] of lora_layers(root)) {
    if (!l.adapters.includes(adapter_name))
      continue;
    want.set(`${path}.lora_A.weight`, l.lora_A.get(adapter_name).weight);
    want.set(`${path}.lora_B.weight`, l.lora_B.get(adapter_name).weight);
  }
  const errors = [];
  const copies = [];
  const seen = new Set;
  for (const [key, t] of state) {
    const k = key.startsWith(PEFT_PREFIX) ? key.slice(PEFT_PREFIX.length) : key;
    const dst = want.get(k) ?? (k.includes("lora_") || !Object.hasOwn(own, k) ? undefined : own[k]);
    if (!dst) {
      errors.push(`unexpected key "${key}" (no such LoRA weight or parameter for adapter "${adapter_name}")`);
      continue;
    }
    seen.add(k);
    if (t.shape.length !== dst.shape.length || t.shape.some((s, i) => s !== dst.shape[i])) {
      errors.push(`size mismatch for ${key}: copying a param with shape ${fmtShape(t.shape)} from checkpoint, the shape in current model is ${fmtShape(dst.shape)}`);
      continue;
    }
    copies.push([dst, t]);
  }
  const missing = [...want.keys()].filter((k) => !seen.has(k));
  if (missing.length)
    errors.push(`missing LoRA weights: ${missing.map((k) => PEFT_PREFIX + k).join(", ")}`);
  if (errors.length)
    throw new LoomValueError(`[set_peft_model_state_dict] Error(s) loading adapter "${adapter_name}":
	${errors.join(`
	`)}`);
  for (const [dst, src] of copies)
    dst.detach().copy_(src.device === dst.device ? src : src.to(dst.device));
}
// src/models/gpt2_config.ts
var ACTIVATIONS = ["gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu", "swish", "tanh"];
var CONFIG_NAME = "config.json";
var DEFAULTS3 = {
  vocab_size: 50257,
  n_positions: 1024,
  n_embd: 768,
  n_layer: 12,
  n_head: 12,
  n_inner: null,
  activation_function: "gelu_new",
  resid_pdrop: 0.1,
  embd_pdrop: 0.1,
  attn_pdrop: 0.1,
  layer_norm_epsilon: 0.00001,
  initializer_range: 0.02,
  scale_attn_weights: true,
  tie_word_embeddings: true,
  bos_token_id: 50256,
  eos_token_id: 50256,
  model_type: "gpt2",
  architectures: ["GPT2LMHeadModel"]
};
function checkInt(name, v, min) {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min)
    throw new LoomValueError(`[GPT2Config] ${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return v;
}
function checkProb(name, v) {
  if (typeof v !== "number" || !(v >= 0 && v <= 1))
    throw new LoomValueError(`[GPT2Config] ${name} must be a probability in [0, 1], got ${JSON.stringify(v)}`);
  return v;
}

class GPT2Config {
  vocab_size;
  n_positions;
  n_embd;
  n_layer;
  n_head;
  n_inner;
  activation_function;
  resid_pdrop;
  embd_pdrop;
  attn_pdrop;
  layer_norm_epsilon;
  initializer_range;
  scale_attn_weights;
  tie_word_embeddings;
  bos_token_id;
  eos_token_id;
  model_type;
  architectures;
  extra = {};
  constructor(fields = {}) {
    const known = new Set(Object.keys(DEFAULTS3));
    const merged = { ...DEFAULTS3, ...fields };
    for (const k of known)
      this[k] = merged[k];
    for (const [k, v] of Object.entries(fields))
      if (!known.has(k))
        this.extra[k] = v;
    for (const flag of ["reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx", "add_cross_attention"]) {
      if (this.extra[flag] === true)
        throw new LoomValueError(`[GPT2Config] ${flag}=true is not supported by Loom's GPT-2`);
    }
    checkInt("vocab_size", this.vocab_size, 1);
    checkInt("n_positions", this.n_positions, 1);
    checkInt("n_embd", this.n_embd, 1);
    checkInt("n_layer", this.n_layer, 0);
    checkInt("n_head", this.n_head, 1);
    if (this.n_inner !== null)
      checkInt("n_inner", this.n_inner, 1);
    if (this.n_embd % this.n_head !== 0)
      throw new LoomValueError(`[GPT2Config] n_embd (${this.n_embd}) must be divisible by n_head (${this.n_head})`);
    for (const p of ["resid_pdrop", "embd_pdrop", "attn_pdrop"])
      checkProb(p, this[p]);
    if (!ACTIVATIONS.includes(this.activation_function)) {
      throw new LoomValueError(`[GPT2Config] activation_function "${this.activation_function}" is not supported (one of ${ACTIVATIONS.join(", ")})`);
    }
    if (!(this.layer_norm_epsilon > 0))
      throw new LoomValueError(`[GPT2Config] layer_norm_epsilon must be > 0, got ${this.layer_norm_epsilon}`);
  }
  get head_dim() {
    return this.n_embd / this.n_head;
  }
  get inner_dim() {
    return this.n_inner ?? 4 * this.n_embd;
  }
  static char_small(vocab_size, overrides = {}) {
    return new GPT2Config({
      vocab_size,
      n_positions: 32,
      n_embd: 64,
      n_layer: 2,
      n_head: 4,
      n_inner: null,
      resid_pdrop: 0,
      embd_pdrop: 0,
      attn_pdrop: 0,
      bos_token_id: null,
      eos_token_id: null,
      ...overrides
    });
  }
  to_dict() {
    const out = {};
    for (const k of Object.keys(DEFAULTS3))
      out[k] = this[k];
    return { ...this.extra, ...out };
  }
  to_json_string() {
    const d = this.to_dict();
    const sorted = Object.fromEntries(Object.keys(d).sort().map((k) => [k, d[k]]));
    return JSON.stringify(sorted, null, 2) + `
`;
  }
  static from_dict(d) {
    if (d.model_type !== undefined && d.model_type !== "gpt2")
      throw new LoomValueError(`[GPT2Config] model_type is "${String(d.model_type)}", expected "gpt2"`);
    return new GPT2Config(d);
  }
  save_pretrained(dir) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, CONFIG_NAME), this.to_json_string());
  }
  static from_pretrained(dir) {
    const path = join(dir, CONFIG_NAME);
    const bytes = readCheckpointFile(dir, CONFIG_NAME, "[GPT2Config.from_pretrained]");
    if (bytes === null)
      throw new LoomValueError(`[GPT2Config.from_pretrained] no ${CONFIG_NAME} in ${dir}`);
    let d;
    try {
      d = JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new LoomValueError(`[GPT2Config.from_pretrained] ${path} is not valid JSON: ${e.message}`);
    }
    if (typeof d !== "object" || d === null || Array.isArray(d))
      throw new LoomValueError(`[GPT2Config.from_pretrained] ${path} must hold a JSON object`);
    return GPT2Config.from_dict(d);
  }
}
// src/models/hf_checkpoint.ts
function load_checkpoint(model, dir, opts = {}) {
  const exists = (name) => {
    try {
      lstatSync(join(dir, name));
      return true;
    } catch {
      return false;
    }
  };
  if (!exists(SAFE_WEIGHTS_NAME) && !exists(SAFE_WEIGHTS_INDEX_NAME)) {
    throw new LoomValueError(`[from_pretrained] ${dir} holds neither ${SAFE_WEIGHTS_NAME} nor ${SAFE_WEIGHTS_INDEX_NAME}`);
  }
  const ckpt = open_sharded(dir);
  const own = new Set(Object.keys(model.state_dict()));
  const prefix = opts.base_model_prefix ? `${opts.base_model_prefix}.` : "";
  const addPrefix = prefix !== "" && [...own].some((k) => k.startsWith(prefix)) && !ckpt.keys().some((k) => k.startsWith(prefix));
  const rename = (k) => addPrefix ? prefix + k : k;
  const ignored = (k) => (opts.ignore_unexpected ?? []).some((re) => re.test(k));
  const present = new Set(ckpt.keys().map(rename));
  const allow = new Set(opts.allow_missing ?? []);
  const missing_keys = [...own].filter((k) => !present.has(k) && !allow.has(k));
  const unexpected_keys = ckpt.keys().map(rename).filter((k) => !own.has(k) && !ignored(k));
  if ((opts.strict ?? true) && (missing_keys.length || unexpected_keys.length)) {
    const parts = [];
    if (missing_keys.length)
      parts.push(`missing keys: ${missing_keys.join(", ")}`);
    if (unexpected_keys.length)
      parts.push(`unexpected keys: ${unexpected_keys.join(", ")}`);
    throw new LoomValueError(`[from_pretrained] ${dir} does not match ${model._get_name()}: ${parts.join("; ")}`);
  }
  for (const [, tensors] of ckpt.shards()) {
    const sd = new Map;
    for (const [k, t] of tensors)
      if (own.has(rename(k)))
        sd.set(rename(k), tensor_from_io(t));
    model.load_state_dict(sd, false);
  }
  ckpt.close();
  return { missing_keys, unexpected_keys };
}
function save_checkpoint(model, dir, opts = {}) {
  const skip = new Set(opts.skip ?? []);
  const tensors = new Map;
  for (const [k, t] of Object.entries(model.state_dict()))
    if (!skip.has(k))
      tensors.set(k, tensor_to_io(t));
  save_sharded(tensors, dir, { max_shard_size: opts.max_shard_size });
  return [...tensors.keys()];
}

// src/models/generate.ts
function sample_logits(row, temperature, top_k, u) {
  const V = row.length;
  let best = 0;
  for (let j = 1;j < V; j++)
    if (row[j] > row[best])
      best = j;
  if (temperature === 0)
    return best;
  let cutoff = -Infinity;
  if (top_k !== null && top_k < V) {
    const sorted = Array.from(row).sort((a, b) => b - a);
    cutoff = sorted[top_k - 1];
  }
  const p = new Float64Array(V);
  let sum = 0;
  for (let j = 0;j < V; j++) {
    if (row[j] < cutoff)
      continue;
    p[j] = Math.exp((row[j] - row[best]) / temperature);
    sum += p[j];
  }
  let r = u() * sum;
  for (let j = 0;j < V; j++) {
    if (p[j] === 0)
      continue;
    r -= p[j];
    if (r < 0)
      return j;
  }
  return best;
}
function generate_tokens(model, idx, max_new_tokens, opts) {
  const { temperature = 1, top_k = null, generator = default_generator, on_token } = opts;
  if (!(temperature >= 0) || !Number.isFinite(temperature))
    throw new LoomValueError(`[generate] temperature must be a finite number >= 0, got ${temperature}`);
  if (top_k !== null && (!Number.isInteger(top_k) || top_k < 1))
    throw new LoomValueError(`[generate] top_k must be a positive integer, got ${top_k}`);
  if (!Number.isInteger(max_new_tokens) || max_new_tokens < 0)
    throw new LoomValueError(`[generate] max_new_tokens must be an integer >= 0, got ${max_new_tokens}`);
  if (idx.ndim !== 2 || idx.shape[1] === 0)
    throw new LoomShapeError(`[generate] idx must be [B, T] with T >= 1, got ${fmtShape(idx.shape)}`);
  const [B, T0] = idx.shape;
  const fed = T0 + max_new_tokens - 1;
  const T_max = Math.min(opts.past_key_values?.max_cache_len ?? Infinity, model.config.n_positions);
  const use_cache = opts.use_cache ?? (opts.past_key_values ? true : fed <= T_max);
  if (use_cache && fed > T_max) {
    throw new LoomIndexError(`[generate] a prompt of ${T0} and ${max_new_tokens} new tokens need positions up to ${fed - 1}, past T_max=${T_max}; use_cache: false crops the context instead`);
  }
  const rows = idx.tolist();
  const device = model.transformer.wte.weight.device;
  const u = () => generator.uniform53();
  const pick = (logits, step) => {
    const T = logits.shape[1], V = logits.shape[2];
    const last = logits.narrow(1, T - 1, 1).contiguous().dataSync();
    const next = rows.map((_, b) => sample_logits(last.subarray(b * V, (b + 1) * V), temperature, top_k, u));
    next.forEach((t, b) => rows[b].push(t));
    on_token?.(step, next);
  };
  const was_training = model.training;
  model.eval();
  try {
    no_grad(() => {
      if (max_new_tokens === 0)
        return;
      if (!use_cache) {
        const ctx = model.config.n_positions;
        for (let s = 0;s < max_new_tokens; s++) {
          const cond = rows.map((r) => r.slice(-ctx));
          pick(model.forward(carry_dynamic(idx, tensor(cond, { dtype: "int64", device }))).logits, s);
        }
        return;
      }
      const cache = opts.past_key_values ?? model.make_cache({ shape: [B, T0], device });
      if (opts.past_key_values)
        cache.reset();
      pick(model.forward(carry_dynamic(idx, tensor(rows, { dtype: "int64", device })), { past_key_values: cache }).logits, 0);
      for (let s = 1;s < max_new_tokens; s++) {
        const last = tensor(rows.map((r) => [r[r.length - 1]]), { dtype: "int64", device });
        pick(model.forward(last, { past_key_values: cache }).logits, s);
      }
    });
  } finally {
    model.train(was_training);
  }
  return tensor(rows, { dtype: "int64" });
}

// src/models/kv_cache.ts
function resolveShape(opts) {
  const c = opts.config ?? opts;
  const int = (k, v) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1)
      throw new LoomValueError(`[StaticCache] ${k} must be a positive integer, got ${v}`);
    return v;
  };
  if (c.n_layer !== undefined) {
    const n_head = int("n_head", c.n_head), n_embd = int("n_embd", c.n_embd);
    if (n_embd % n_head !== 0)
      throw new LoomValueError(`[StaticCache] n_embd=${n_embd} is not divisible by n_head=${n_head}`);
    return { num_layers: int("n_layer", c.n_layer), num_kv_heads: n_head, head_dim: n_embd / n_head, max_cache_len: c.n_positions };
  }
  if (c.num_hidden_layers !== undefined) {
    const heads = int("num_attention_heads", c.num_attention_heads), hidden = int("hidden_size", c.hidden_size);
    const kv = int("num_key_value_heads", c.num_key_value_heads ?? heads);
    if (heads % kv !== 0)
      throw new LoomValueError(`[StaticCache] num_attention_heads=${heads} is not divisible by num_key_value_heads=${kv}`);
    if (c.head_dim === undefined && hidden % heads !== 0)
      throw new LoomValueError(`[StaticCache] hidden_size=${hidden} is not divisible by num_attention_heads=${heads} (and no head_dim is given)`);
    return { num_layers: int("num_hidden_layers", c.num_hidden_layers), num_kv_heads: kv, head_dim: int("head_dim", c.head_dim ?? hidden / heads), max_cache_len: c.max_position_embeddings };
  }
  if (c.num_layers !== undefined) {
    return { num_layers: int("num_layers", c.num_layers), num_kv_heads: int("num_kv_heads", c.num_kv_heads), head_dim: int("head_dim", c.head_dim), max_cache_len: c.max_cache_len };
  }
  throw new LoomValueError("[StaticCache] needs a config with GPT-2 names (n_layer, n_head, n_embd, n_positions), HF names (num_hidden_layers, num_attention_heads, hidden_size, max_position_embeddings), or num_layers, num_kv_heads, head_dim, max_cache_len");
}
function finfo_min(dtype) {
  switch (dtype) {
    case "float16":
      return -65504;
    case "bfloat16":
      return -338953138925153550000000000000000000000;
    case "float64":
      return -Number.MAX_VALUE;
    default:
      return -340282346638528860000000000000000000000;
  }
}
var KNOWN_POSITIONS = new WeakMap;

class StaticCache {
  max_batch_size;
  max_cache_len;
  num_heads;
  head_dim;
  num_layers;
  dtype;
  device;
  key_cache;
  value_cache;
  slots;
  seen = 0;
  constructor(opts) {
    const shape = resolveShape(opts);
    const { max_batch_size = 1, max_cache_len = shape.max_cache_len, device = "cpu", dtype = "float32" } = opts;
    for (const [k, v] of [["max_batch_size", max_batch_size], ["max_cache_len", max_cache_len]]) {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1)
        throw new LoomValueError(`[StaticCache] ${k} must be a positive integer, got ${v}`);
    }
    if (!isFloating(dtype))
      throw new LoomDtypeError(`[StaticCache] keys and values must have a floating dtype, got ${dtype}`);
    this.max_batch_size = max_batch_size;
    this.max_cache_len = max_cache_len;
    this.num_heads = shape.num_kv_heads;
    this.head_dim = shape.head_dim;
    this.num_layers = shape.num_layers;
    this.dtype = dtype;
    this.device = device;
    const dims = this.shape;
    this.key_cache = Array.from({ length: this.num_layers }, () => zeros(dims, { dtype, device }));
    this.value_cache = Array.from({ length: this.num_layers }, () => zeros(dims, { dtype, device }));
    this.slots = arange(this.max_cache_len, undefined, 1, { dtype: "int64", device });
  }
  get_seq_length() {
    return this.seen;
  }
  get_max_cache_shape() {
    return this.max_cache_len;
  }
  get shape() {
    return [this.max_batch_size, this.num_heads, this.max_cache_len, this.head_dim];
  }
  cache_positions(T, like, start = this.seen) {
    const positions = Array.from({ length: T }, (_, i) => start + i);
    this.check_positions(positions);
    const t = lift(arange(start, start + T, 1, { dtype: "int64", device: this.device }), like);
    KNOWN_POSITIONS.set(t, positions);
    return t;
  }
  reset() {
    for (const t of [...this.key_cache, ...this.value_cache])
      t.zero_();
    this.seen = 0;
  }
  check_positions(positions) {
    for (const p of positions) {
      if (!Number.isInteger(p) || p < 0 || p >= this.max_cache_len) {
        throw new LoomIndexError(`[StaticCache] cannot write position ${p}: the cache holds T_max=${this.max_cache_len} positions (0..${this.max_cache_len - 1}); decoding past T_max is an error, the cache never wraps`);
      }
    }
  }
  check_states(key, value, layer_idx) {
    if (!Number.isInteger(layer_idx) || layer_idx < 0 || layer_idx >= this.num_layers) {
      throw new LoomIndexError(`[StaticCache.update] layer_idx ${layer_idx} out of range for a cache of ${this.num_layers} layers`);
    }
    const [B, H, , D] = this.shape;
    for (const [name, s] of [["key_states", key], ["value_states", value]]) {
      if (s.shape.length !== 4 || s.shape[0] !== B || s.shape[1] !== H || s.shape[3] !== D || s.shape[2] > this.max_cache_len) {
        throw new LoomShapeError(`[StaticCache.update] ${name} ${fmtShape(s.shape)} does not fit the cache ${fmtShape(this.shape)}: expected [${B}, ${H}, T <= ${this.max_cache_len}, ${D}]`);
      }
      if (s.dtype !== this.dtype)
        throw new LoomDtypeError(`[StaticCache.update] ${name} has dtype ${s.dtype} but the cache holds ${this.dtype}`);
    }
    if (key.shape[2] !== value.shape[2])
      throw new LoomShapeError(`[StaticCache.update] key_states ${fmtShape(key.shape)} and value_states ${fmtShape(value.shape)} differ in length`);
  }
  update(key_states, value_states, layer_idx, cache_kwargs) {
    this.check_states(key_states, value_states, layer_idx);
    const pos = cache_kwargs.cache_position;
    const T = key_states.shape[2];
    if (pos.ndim !== 1 || pos.shape[0] !== T || pos.dtype !== "int64" && pos.dtype !== "int32") {
      throw new LoomShapeError(`[StaticCache.update] cache_position must be int64 [${T}] (one slot per new position), got ${pos.dtype} ${fmtShape(pos.shape)}`);
    }
    const known = KNOWN_POSITIONS.get(pos) ?? (pos.isLazy ? null : Array.from(pos.dataSync()));
    if (known) {
      this.check_positions(known);
      if (layer_idx === 0)
        this.advance(Math.max(...known) + 1);
    }
    const positions = pos.isLazy ? null : known;
    if (positions && !key_states.requires_grad && !value_states.requires_grad) {
      const k = this.key_cache[layer_idx], v = this.value_cache[layer_idx];
      for (let t = 0;t < T; ) {
        let n = 1;
        while (t + n < T && positions[t + n] === positions[t] + n)
          n++;
        k.narrow(2, positions[t], n).copy_(key_states.narrow(2, t, n));
        v.narrow(2, positions[t], n).copy_(value_states.narrow(2, t, n));
        t += n;
      }
      return [k, v];
    }
    const onehot = pos.unsqueeze(1).eq(lift(this.slots, key_states).unsqueeze(0));
    const out = [];
    for (const [cache, states] of [[this.key_cache[layer_idx], key_states], [this.value_cache[layer_idx], value_states]]) {
      const old = lift(cache, states);
      let full;
      if (T === 1) {
        full = states.where(onehot.view(this.max_cache_len, 1), old);
      } else {
        const written = onehot.to("int32").sum(0).gt(0).view(this.max_cache_len, 1);
        full = onehot.to(this.dtype).transpose(0, 1).matmul(states).where(written, old);
      }
      cache._write_private(full.detach());
      out.push(full);
    }
    return [out[0], out[1]];
  }
  advance(end) {
    this.seen = Math.max(this.seen, end);
  }
  attention_mask(cache_position) {
    const slots = lift(this.slots, cache_position).unsqueeze(0);
    const allowed = slots.le(cache_position.unsqueeze(1));
    const T = cache_position.shape[0];
    return allowed.to(this.dtype).zeros_like().masked_fill(allowed.logical_not(), finfo_min(this.dtype)).view(1, 1, T, this.max_cache_len);
  }
}

// src/models/gpt2.ts
function activation_module(name) {
  switch (name) {
    case "gelu_new":
    case "gelu_pytorch_tanh":
      return new GELU("tanh");
    case "gelu":
      return new GELU("none");
    case "relu":
      return new ReLU;
    case "silu":
    case "swish":
      return new SiLU;
    case "tanh":
      return new Tanh;
  }
}

class GPT2Attention extends TensorModule {
  c_attn;
  c_proj;
  attn_dropout;
  resid_dropout;
  n_embd;
  n_head;
  scale_attn_weights;
  constructor(config, opts = {}) {
    super();
    const o = { dtype: opts.dtype, generator: opts.generator };
    this.c_attn = new Conv1D(3 * config.n_embd, config.n_embd, o);
    this.c_proj = new Conv1D(config.n_embd, config.n_embd, o);
    this.attn_dropout = new Dropout(config.attn_pdrop);
    this.resid_dropout = new Dropout(config.resid_pdrop);
    this.n_embd = config.n_embd;
    this.n_head = config.n_head;
    this.scale_attn_weights = config.scale_attn_weights;
  }
  forward_lazy(x, kv = null) {
    const [B, T, C] = x.shape;
    const nh = this.n_head, hd = C / nh;
    const [q, k, v] = this.c_attn.forward(x).split(C, 2);
    const heads = (t) => t.view(B, T, nh, hd).transpose(1, 2);
    const sdpa = { dropout_p: this.training ? this.attn_dropout.p : 0, scale: this.scale_attn_weights ? 1 / Math.sqrt(hd) : 1 };
    let y;
    if (kv) {
      const [keys, values] = kv.past_key_values.update(heads(k), heads(v), kv.layer_idx, { cache_position: kv.cache_position });
      y = scaled_dot_product_attention(heads(q), keys, values, { ...sdpa, attn_mask: kv.attention_mask });
    } else {
      y = scaled_dot_product_attention(heads(q), heads(k), heads(v), { ...sdpa, is_causal: true });
    }
    const merged = y.transpose(1, 2).contiguous().view(B, T, C);
    return this.resid_dropout.forward(this.c_proj.forward(merged));
  }
}

class GPT2MLP extends TensorModule {
  c_fc;
  act;
  c_proj;
  dropout;
  constructor(config, opts = {}) {
    super();
    const o = { dtype: opts.dtype, generator: opts.generator };
    this.c_fc = new Conv1D(config.inner_dim, config.n_embd, o);
    this.act = activation_module(config.activation_function);
    this.c_proj = new Conv1D(config.n_embd, config.inner_dim, o);
    this.dropout = new Dropout(config.resid_pdrop);
  }
  forward_lazy(x) {
    return this.dropout.forward(this.c_proj.forward(this.act.forward(this.c_fc.forward(x))));
  }
}

class GPT2Block extends TensorModule {
  ln_1;
  attn;
  ln_2;
  mlp;
  constructor(config, opts = {}) {
    super();
    const ln = { eps: config.layer_norm_epsilon, dtype: opts.dtype };
    this.ln_1 = new LayerNorm(config.n_embd, ln);
    this.attn = new GPT2Attention(config, opts);
    this.ln_2 = new LayerNorm(config.n_embd, ln);
    this.mlp = new GPT2MLP(config, opts);
  }
  forward_lazy(x, kv = null) {
    const a = this.ln_1.forward(x);
    const h = x.add(kv ? this.attn.forward_lazy(a, kv) : this.attn.forward(a));
    return h.add(this.mlp.forward(this.ln_2.forward(h)));
  }
}

class GPT2Model extends TensorModule {
  wte;
  wpe;
  drop;
  h;
  ln_f;
  config;
  constructor(config, opts = {}) {
    super();
    this.config = config;
    const e = { dtype: opts.dtype, generator: opts.generator };
    this.wte = new Embedding(config.vocab_size, config.n_embd, e);
    this.wpe = new Embedding(config.n_positions, config.n_embd, e);
    this.drop = new Dropout(config.embd_pdrop);
    this.h = new ModuleList(Array.from({ length: config.n_layer }, () => new GPT2Block(config, opts)));
    this.ln_f = new LayerNorm(config.n_embd, { eps: config.layer_norm_epsilon, dtype: opts.dtype });
  }
  forward_lazy(input_ids, inputs = {}) {
    if (input_ids.ndim !== 2)
      throw new LoomShapeError(`[GPT2Model] input_ids must be [B, T], got ${fmtShape(input_ids.shape)}`);
    const T = input_ids.shape[1];
    if (T > this.config.n_positions) {
      throw new LoomShapeError(`[GPT2Model] sequence length ${T} exceeds n_positions=${this.config.n_positions}`);
    }
    const cache = inputs.use_cache === false ? null : inputs.past_key_values ?? null;
    if (inputs.use_cache && !cache)
      throw new LoomValueError("[GPT2Model] use_cache needs past_key_values (a StaticCache); GPT2LMHeadModel makes one itself");
    let cache_position = null;
    let end = 0;
    if (cache) {
      this.check_cache(cache, input_ids);
      let positions;
      if (inputs.cache_position) {
        cache_position = inputs.cache_position;
        positions = Array.from(cache_position.dataSync());
      } else {
        const past = cache.get_seq_length();
        positions = Array.from({ length: T }, (_, i) => past + i);
      }
      cache.check_positions(positions);
      if (new Set(positions).size !== positions.length)
        throw new LoomValueError(`[GPT2Model] cache_position [${positions.join(", ")}] repeats a slot`);
      cache_position ??= lift(arange(positions[0], positions[0] + T, 1, { dtype: "int64", device: input_ids.device }), input_ids);
      if (cache_position.ndim !== 1 || cache_position.shape[0] !== T)
        throw new LoomShapeError(`[GPT2Model] cache_position must be [${T}], got ${fmtShape(cache_position.shape)}`);
      if (!inputs.position_ids && Math.max(...positions) >= this.config.n_positions) {
        throw new LoomIndexError(`[GPT2Model] position ${Math.max(...positions)} has no position embedding (n_positions=${this.config.n_positions})`);
      }
      end = Math.max(...positions) + 1;
    }
    const position_ids = inputs.position_ids ?? cache_position?.unsqueeze(0) ?? lift(arange(T, undefined, 1, { dtype: "int64", device: input_ids.device }), input_ids);
    if (inputs.position_ids && (position_ids.ndim !== 2 || position_ids.shape[1] !== T))
      throw new LoomShapeError(`[GPT2Model] position_ids ${fmtShape(position_ids.shape)} must be [B, ${T}] or [1, ${T}]`);
    let x = this.drop.forward(this.wte.forward(input_ids).add(this.wpe.forward(position_ids)));
    if (cache) {
      const attention_mask = cache.attention_mask(cache_position);
      let layer_idx = 0;
      for (const block of this.h)
        x = block.forward_lazy(x, { past_key_values: cache, layer_idx: layer_idx++, cache_position, attention_mask });
      cache.advance(end);
    } else {
      for (const block of this.h)
        x = block.forward(x);
    }
    return this.ln_f.forward(x);
  }
  check_cache(cache, input_ids) {
    const c = this.config, hd = c.n_embd / c.n_head;
    if (!(cache instanceof StaticCache))
      throw new LoomValueError("[GPT2Model] past_key_values must be a StaticCache");
    if (cache.num_layers !== c.n_layer || cache.num_heads !== c.n_head || cache.head_dim !== hd) {
      throw new LoomShapeError(`[GPT2Model] past_key_values has ${cache.num_layers} layers of ${fmtShape(cache.shape)} but the model needs ${c.n_layer} layers of [B, ${c.n_head}, T_max, ${hd}]`);
    }
    if (cache.max_batch_size !== input_ids.shape[0]) {
      throw new LoomShapeError(`[GPT2Model] input_ids ${fmtShape(input_ids.shape)} has batch ${input_ids.shape[0]} but past_key_values ${fmtShape(cache.shape)} holds batch ${cache.max_batch_size}`);
    }
    const dtype = this.wte.weight.dtype;
    if (cache.dtype !== dtype)
      throw new LoomDtypeError(`[GPT2Model] past_key_values holds ${cache.dtype} but the model computes in ${dtype}`);
  }
}

class GPT2LMHeadModel extends Module {
  transformer;
  lm_head;
  config;
  constructor(config, opts = {}) {
    super();
    this.config = config;
    this.transformer = new GPT2Model(config, opts);
    this.lm_head = new Linear(config.n_embd, config.vocab_size, { bias: false, dtype: opts.dtype });
    if (opts.init !== false)
      this.init_weights(opts.generator);
    if (config.tie_word_embeddings)
      this.tie_weights();
  }
  tie_weights() {
    this.lm_head.weight = this.transformer.wte.weight;
  }
  init_weights(generator) {
    const std = this.config.initializer_range;
    const g = { generator };
    for (const [name, m] of this.named_modules()) {
      if (m instanceof Conv1D || m instanceof Linear) {
        const projStd = name.endsWith("c_proj") ? std / Math.sqrt(2 * this.config.n_layer) : std;
        normal_(m.weight, 0, projStd, g);
        if (m.bias)
          zeros_(m.bias);
      } else if (m instanceof Embedding) {
        normal_(m.weight, 0, std, g);
      } else if (m instanceof LayerNorm) {
        if (m.weight)
          ones_(m.weight);
        if (m.bias)
          zeros_(m.bias);
      }
    }
  }
  forward_lazy(input_ids, inputs = {}) {
    const past_key_values = inputs.use_cache === false ? null : inputs.past_key_values ?? (inputs.use_cache ? this.make_cache(input_ids) : null);
    const { position_ids, cache_position } = inputs;
    const hidden = this.transformer.forward_lazy(input_ids, { past_key_values, position_ids, cache_position });
    const logits = this.lm_head.forward(hidden);
    const { labels = null, targets = null } = inputs;
    if (labels && targets)
      throw new LoomValueError("[GPT2LMHeadModel] pass labels (HF, shifted inside) or targets (already shifted), not both");
    let loss = null;
    const [B, T, V] = logits.shape;
    if (labels) {
      if (labels.ndim !== 2 || labels.shape[0] !== B || labels.shape[1] !== T) {
        throw new LoomShapeError(`[GPT2LMHeadModel] labels ${fmtShape(labels.shape)} must match input_ids [${B}, ${T}]`);
      }
      const l = logits.narrow(1, 0, T - 1).reshape([-1, V]);
      loss = cross_entropy(l, labels.narrow(1, 1, T - 1).reshape([-1]));
    } else if (targets) {
      if (targets.ndim !== 2 || targets.shape[0] !== B || targets.shape[1] !== T) {
        throw new LoomShapeError(`[GPT2LMHeadModel] targets ${fmtShape(targets.shape)} must match input_ids [${B}, ${T}]`);
      }
      loss = cross_entropy(logits.reshape([-1, V]), targets.reshape([-1]));
    }
    return { logits, loss, past_key_values };
  }
  make_cache(input_ids, max_cache_len = this.config.n_positions) {
    return new StaticCache({ config: this.config, max_batch_size: input_ids.shape[0], max_cache_len, device: input_ids.device, dtype: this.transformer.wte.weight.dtype });
  }
  forward(input_ids, inputs = {}) {
    return super.forward(input_ids, inputs);
  }
  static from_pretrained(dir, opts = {}) {
    const config = GPT2Config.from_pretrained(dir);
    const model = new GPT2LMHeadModel(config, { dtype: opts.dtype, init: false });
    load_checkpoint(model, dir, {
      base_model_prefix: "transformer",
      ignore_unexpected: [/(^|\.)attn\.(masked_)?bias$/],
      allow_missing: config.tie_word_embeddings ? ["lm_head.weight"] : [],
      strict: opts.strict
    });
    return model.eval();
  }
  save_pretrained(dir, opts = {}) {
    const tied = this.lm_head.weight === this.transformer.wte.weight;
    this.config.save_pretrained(dir);
    save_checkpoint(this, dir, { skip: tied ? ["lm_head.weight"] : [], max_shard_size: opts.max_shard_size });
  }
  num_parameters(only_trainable = false) {
    return this.parameters().filter((p) => !only_trainable || p.requires_grad).reduce((n, p) => n + p.numel(), 0);
  }
  generate(idx, max_new_tokens, opts = {}) {
    return generate_tokens(this, idx, max_new_tokens, opts);
  }
}
// src/models/char_tokenizer.ts
var VOCAB_NAME = "vocab.json";

class CharTokenizer {
  itos;
  stoi;
  constructor(chars) {
    if (chars.length === 0)
      throw new LoomValueError("[CharTokenizer] the vocabulary is empty");
    this.itos = chars.slice();
    this.stoi = new Map(chars.map((c, i) => [c, i]));
    if (this.stoi.size !== chars.length)
      throw new LoomValueError("[CharTokenizer] the vocabulary repeats a character");
  }
  static from_text(text) {
    const set = new Set(Array.from(text));
    return new CharTokenizer([...set].sort((a, b) => a.codePointAt(0) - b.codePointAt(0)));
  }
  get vocab_size() {
    return this.itos.length;
  }
  encode(text, opts = {}) {
    const out = [];
    for (const c of text) {
      const id = this.stoi.get(c);
      if (id !== undefined)
        out.push(id);
      else if (opts.unknown !== "skip")
        throw new LoomValueError(`[CharTokenizer.encode] character ${JSON.stringify(c)} is not in the vocabulary`);
    }
    return out;
  }
  decode(ids) {
    let s = "";
    for (const id of ids) {
      const c = this.itos[id];
      if (c === undefined)
        throw new LoomValueError(`[CharTokenizer.decode] id ${id} is outside [0, ${this.vocab_size})`);
      s += c;
    }
    return s;
  }
  save_pretrained(dir) {
    mkdirSync(dir, { recursive: true });
    const vocab = Object.fromEntries(this.itos.map((c, i) => [c, i]));
    writeFileSync(join(dir, VOCAB_NAME), JSON.stringify(vocab, null, 2) + `
`);
  }
  static from_pretrained(dir) {
    const path = join(dir, VOCAB_NAME);
    if (!existsSync(path))
      throw new LoomValueError(`[CharTokenizer.from_pretrained] no ${VOCAB_NAME} in ${dir}`);
    const vocab = JSON.parse(readFileSync(path, "utf8"));
    const chars = [];
    for (const [c, id] of Object.entries(vocab)) {
      if (!Number.isInteger(id) || id < 0 || chars[id] !== undefined)
        throw new LoomValueError(`[CharTokenizer.from_pretrained] ${path}: bad or repeated id ${id} for ${JSON.stringify(c)}`);
      chars[id] = c;
    }
    if (chars.length !== Object.keys(vocab).length)
      throw new LoomValueError(`[CharTokenizer.from_pretrained] ${path}: ids must be 0..${Object.keys(vocab).length - 1}`);
    return new CharTokenizer(chars);
  }
}
// ../../main/node_modules/@huggingface/jinja/dist/index.js
var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => (key in obj) ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => {
  __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);
  return value;
};
var TOKEN_TYPES = Object.freeze({
  Text: "Text",
  NumericLiteral: "NumericLiteral",
  StringLiteral: "StringLiteral",
  Identifier: "Identifier",
  Equals: "Equals",
  OpenParen: "OpenParen",
  CloseParen: "CloseParen",
  OpenStatement: "OpenStatement",
  CloseStatement: "CloseStatement",
  OpenExpression: "OpenExpression",
  CloseExpression: "CloseExpression",
  OpenSquareBracket: "OpenSquareBracket",
  CloseSquareBracket: "CloseSquareBracket",
  OpenCurlyBracket: "OpenCurlyBracket",
  CloseCurlyBracket: "CloseCurlyBracket",
  Comma: "Comma",
  Dot: "Dot",
  Colon: "Colon",
  Pipe: "Pipe",
  CallOperator: "CallOperator",
  AdditiveBinaryOperator: "AdditiveBinaryOperator",
  MultiplicativeBinaryOperator: "MultiplicativeBinaryOperator",
  ExponentiationBinaryOperator: "ExponentiationBinaryOperator",
  ComparisonBinaryOperator: "ComparisonBinaryOperator",
  UnaryOperator: "UnaryOperator",
  Comment: "Comment"
});
var ORDERED_MAPPING_TABLE = [
  ["{%", TOKEN_TYPES.OpenStatement],
  ["%}", TOKEN_TYPES.CloseStatement],
  ["{{", TOKEN_TYPES.OpenExpression],
  ["}}", TOKEN_TYPES.CloseExpression],
  ["(", TOKEN_TYPES.OpenParen],
  [")", TOKEN_TYPES.CloseParen],
  ["{", TOKEN_TYPES.OpenCurlyBracket],
  ["}", TOKEN_TYPES.CloseCurlyBracket],
  ["[", TOKEN_TYPES.OpenSquareBracket],
  ["]", TOKEN_TYPES.CloseSquareBracket],
  [",", TOKEN_TYPES.Comma],
  [".", TOKEN_TYPES.Dot],
  [":", TOKEN_TYPES.Colon],
  ["|", TOKEN_TYPES.Pipe],
  ["<=", TOKEN_TYPES.ComparisonBinaryOperator],
  [">=", TOKEN_TYPES.ComparisonBinaryOperator],
  ["==", TOKEN_TYPES.ComparisonBinaryOperator],
  ["!=", TOKEN_TYPES.ComparisonBinaryOperator],
  ["<", TOKEN_TYPES.ComparisonBinaryOperator],
  [">", TOKEN_TYPES.ComparisonBinaryOperator],
  ["+", TOKEN_TYPES.AdditiveBinaryOperator],
  ["-", TOKEN_TYPES.AdditiveBinaryOperator],
  ["~", TOKEN_TYPES.AdditiveBinaryOperator],
  ["**", TOKEN_TYPES.ExponentiationBinaryOperator],
  ["*", TOKEN_TYPES.MultiplicativeBinaryOperator],
  ["//", TOKEN_TYPES.MultiplicativeBinaryOperator],
  ["/", TOKEN_TYPES.MultiplicativeBinaryOperator],
  ["%", TOKEN_TYPES.MultiplicativeBinaryOperator],
  ["=", TOKEN_TYPES.Equals]
];
function titleCase(value) {
  return value.replace(/\b\w/g, (c) => c.toUpperCase());
}
function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
function replace(str, oldvalue, newvalue, count) {
  if (count === 0) {
    return str;
  }
  let remaining = count == null || count < 0 ? Infinity : count;
  const pattern = oldvalue.length === 0 ? new RegExp("(?=)", "gu") : new RegExp(escapeRegExp(oldvalue), "gu");
  return str.replaceAll(pattern, (match) => {
    if (remaining > 0) {
      --remaining;
      return newvalue;
    }
    return match;
  });
}
var EMPTY_BUILTINS = /* @__PURE__ */ new Map;
var RuntimeValue = class {
  type = "RuntimeValue";
  value;
  get builtins() {
    return EMPTY_BUILTINS;
  }
  constructor(value = undefined) {
    this.value = value;
  }
  __bool__() {
    return new BooleanValue(!!this.value);
  }
  toString() {
    return String(this.value);
  }
};
var IntegerValue = class extends RuntimeValue {
  type = "IntegerValue";
};
var FloatValue = class extends RuntimeValue {
  type = "FloatValue";
  toString() {
    if (Object.is(this.value, -0)) {
      return "-0.0";
    }
    return this.value % 1 === 0 ? this.value.toFixed(1) : this.value.toString();
  }
};
var StringValue = class extends RuntimeValue {
  type = "StringValue";
  _builtins;
  get builtins() {
    return this._builtins ??= /* @__PURE__ */ new Map([
      [
        "upper",
        new FunctionValue(() => {
          return new StringValue(this.value.toUpperCase());
        })
      ],
      [
        "lower",
        new FunctionValue(() => {
          return new StringValue(this.value.toLowerCase());
        })
      ],
      [
        "strip",
        new FunctionValue(() => {
          return new StringValue(this.value.trim());
        })
      ],
      [
        "title",
        new FunctionValue(() => {
          return new StringValue(titleCase(this.value));
        })
      ],
      [
        "capitalize",
        new FunctionValue(() => {
          return new StringValue(this.value.charAt(0).toUpperCase() + this.value.slice(1));
        })
      ],
      ["length", new IntegerValue(this.value.length)],
      [
        "rstrip",
        new FunctionValue(() => {
          return new StringValue(this.value.trimEnd());
        })
      ],
      [
        "lstrip",
        new FunctionValue(() => {
          return new StringValue(this.value.trimStart());
        })
      ],
      [
        "startswith",
        new FunctionValue((args) => {
          if (args.length === 0) {
            throw new Error("startswith() requires at least one argument");
          }
          const pattern = args[0];
          if (pattern instanceof StringValue) {
            return new BooleanValue(this.value.startsWith(pattern.value));
          } else if (pattern instanceof ArrayValue) {
            for (const item of pattern.value) {
              if (!(item instanceof StringValue)) {
                throw new Error("startswith() tuple elements must be strings");
              }
              if (this.value.startsWith(item.value)) {
                return new BooleanValue(true);
              }
            }
            return new BooleanValue(false);
          }
          throw new Error("startswith() argument must be a string or tuple of strings");
        })
      ],
      [
        "endswith",
        new FunctionValue((args) => {
          if (args.length === 0) {
            throw new Error("endswith() requires at least one argument");
          }
          const pattern = args[0];
          if (pattern instanceof StringValue) {
            return new BooleanValue(this.value.endsWith(pattern.value));
          } else if (pattern instanceof ArrayValue) {
            for (const item of pattern.value) {
              if (!(item instanceof StringValue)) {
                throw new Error("endswith() tuple elements must be strings");
              }
              if (this.value.endsWith(item.value)) {
                return new BooleanValue(true);
              }
            }
            return new BooleanValue(false);
          }
          throw new Error("endswith() argument must be a string or tuple of strings");
        })
      ],
      [
        "split",
        new FunctionValue((args) => {
          const sep = args[0] ?? new NullValue;
          if (!(sep instanceof StringValue || sep instanceof NullValue)) {
            throw new Error("sep argument must be a string or null");
          }
          const maxsplit = args[1] ?? new IntegerValue(-1);
          if (!(maxsplit instanceof IntegerValue)) {
            throw new Error("maxsplit argument must be a number");
          }
          let result = [];
          if (sep instanceof NullValue) {
            const text = this.value.trimStart();
            for (const { 0: match, index } of text.matchAll(/\S+/g)) {
              if (maxsplit.value !== -1 && result.length >= maxsplit.value && index !== undefined) {
                result.push(match + text.slice(index + match.length));
                break;
              }
              result.push(match);
            }
          } else {
            if (sep.value === "") {
              throw new Error("empty separator");
            }
            result = this.value.split(sep.value);
            if (maxsplit.value !== -1 && result.length > maxsplit.value) {
              result.push(result.splice(maxsplit.value).join(sep.value));
            }
          }
          return new ArrayValue(result.map((part) => new StringValue(part)));
        })
      ],
      [
        "replace",
        new FunctionValue((args) => {
          if (args.length < 2) {
            throw new Error("replace() requires at least two arguments");
          }
          const oldValue = args[0];
          const newValue = args[1];
          if (!(oldValue instanceof StringValue && newValue instanceof StringValue)) {
            throw new Error("replace() arguments must be strings");
          }
          let count;
          if (args.length > 2) {
            if (args[2].type === "KeywordArgumentsValue") {
              count = args[2].value.get("count") ?? new NullValue;
            } else {
              count = args[2];
            }
          } else {
            count = new NullValue;
          }
          if (!(count instanceof IntegerValue || count instanceof NullValue)) {
            throw new Error("replace() count argument must be a number or null");
          }
          return new StringValue(replace(this.value, oldValue.value, newValue.value, count.value));
        })
      ]
    ]);
  }
};
var BooleanValue = class extends RuntimeValue {
  type = "BooleanValue";
};
var NON_ASCII_CHARS = /[\x7f-\uffff]/g;
function makeAsciiSafe(str) {
  return str.replace(NON_ASCII_CHARS, (char) => "\\u" + char.charCodeAt(0).toString(16).padStart(4, "0"));
}
function toJSON(input, options = {}, depth = 0, convertUndefinedToNull = true) {
  const { indent = null, ensureAscii = false, separators = null, sortKeys = false } = options;
  let itemSeparator;
  let keySeparator;
  if (separators) {
    [itemSeparator, keySeparator] = separators;
  } else if (indent) {
    itemSeparator = ",";
    keySeparator = ": ";
  } else {
    itemSeparator = ", ";
    keySeparator = ": ";
  }
  switch (input.type) {
    case "NullValue":
      return "null";
    case "UndefinedValue":
      return convertUndefinedToNull ? "null" : "undefined";
    case "IntegerValue":
    case "FloatValue":
    case "BooleanValue":
      return JSON.stringify(input.value);
    case "StringValue": {
      let result = JSON.stringify(input.value);
      if (ensureAscii) {
        result = makeAsciiSafe(result);
      }
      return result;
    }
    case "ArrayValue":
    case "NamespaceValue":
    case "ObjectValue": {
      const indentValue = indent ? " ".repeat(indent) : "";
      const basePadding = `
` + indentValue.repeat(depth);
      const childrenPadding = basePadding + indentValue;
      if (input.type === "ArrayValue") {
        const core = input.value.map((x) => toJSON(x, options, depth + 1, convertUndefinedToNull));
        return indent && core.length > 0 ? `[${childrenPadding}${core.join(`${itemSeparator}${childrenPadding}`)}${basePadding}]` : `[${core.join(itemSeparator)}]`;
      } else {
        let entries = Array.from(input.value.entries());
        if (sortKeys) {
          entries = entries.sort(([a], [b]) => a.localeCompare(b));
        }
        const core = entries.map(([key, value]) => {
          let keyStr = JSON.stringify(key);
          if (ensureAscii) {
            keyStr = makeAsciiSafe(keyStr);
          }
          const v = `${keyStr}${keySeparator}${toJSON(value, options, depth + 1, convertUndefinedToNull)}`;
          return indent ? `${childrenPadding}${v}` : v;
        });
        return indent && core.length > 0 ? `{${core.join(itemSeparator)}${basePadding}}` : `{${core.join(itemSeparator)}}`;
      }
    }
    default:
      throw new Error(`Cannot convert to JSON: ${input.type}`);
  }
}
var ObjectValue = class extends RuntimeValue {
  type = "ObjectValue";
  _builtins;
  __bool__() {
    return new BooleanValue(this.value.size > 0);
  }
  get builtins() {
    return this._builtins ??= /* @__PURE__ */ new Map([
      [
        "get",
        new FunctionValue(([key, defaultValue]) => {
          if (!(key instanceof StringValue)) {
            throw new Error(`Object key must be a string: got ${key.type}`);
          }
          return this.value.get(key.value) ?? defaultValue ?? new NullValue;
        })
      ],
      ["items", new FunctionValue(() => this.items())],
      ["keys", new FunctionValue(() => this.keys())],
      ["values", new FunctionValue(() => this.values())],
      [
        "dictsort",
        new FunctionValue((args) => {
          let kwargs = /* @__PURE__ */ new Map;
          const positionalArgs = args.filter((arg) => {
            if (arg instanceof KeywordArgumentsValue) {
              kwargs = arg.value;
              return false;
            }
            return true;
          });
          const caseSensitive = positionalArgs.at(0) ?? kwargs.get("case_sensitive") ?? new BooleanValue(false);
          if (!(caseSensitive instanceof BooleanValue)) {
            throw new Error("case_sensitive must be a boolean");
          }
          const by = positionalArgs.at(1) ?? kwargs.get("by") ?? new StringValue("key");
          if (!(by instanceof StringValue)) {
            throw new Error("by must be a string");
          }
          if (!["key", "value"].includes(by.value)) {
            throw new Error("by must be either 'key' or 'value'");
          }
          const reverse = positionalArgs.at(2) ?? kwargs.get("reverse") ?? new BooleanValue(false);
          if (!(reverse instanceof BooleanValue)) {
            throw new Error("reverse must be a boolean");
          }
          const items = Array.from(this.value.entries()).map(([key, value]) => new ArrayValue([new StringValue(key), value])).sort((a, b) => {
            const index = by.value === "key" ? 0 : 1;
            const aVal = a.value[index];
            const bVal = b.value[index];
            const result = compareRuntimeValues(aVal, bVal, caseSensitive.value);
            return reverse.value ? -result : result;
          });
          return new ArrayValue(items);
        })
      ]
    ]);
  }
  items() {
    return new ArrayValue(Array.from(this.value.entries()).map(([key, value]) => new ArrayValue([new StringValue(key), value])));
  }
  keys() {
    return new ArrayValue(Array.from(this.value.keys()).map((key) => new StringValue(key)));
  }
  values() {
    return new ArrayValue(Array.from(this.value.values()));
  }
  toString() {
    return toJSON(this, {}, 0, false);
  }
};
var KeywordArgumentsValue = class extends ObjectValue {
  type = "KeywordArgumentsValue";
};
var NamespaceValue = class extends RuntimeValue {
  type = "NamespaceValue";
  toString() {
    return toJSON(this, {}, 0, false);
  }
};
var ArrayValue = class extends RuntimeValue {
  type = "ArrayValue";
  _builtins;
  get builtins() {
    return this._builtins ??= /* @__PURE__ */ new Map([["length", new IntegerValue(this.value.length)]]);
  }
  __bool__() {
    return new BooleanValue(this.value.length > 0);
  }
  toString() {
    return toJSON(this, {}, 0, false);
  }
};
var FunctionValue = class extends RuntimeValue {
  type = "FunctionValue";
};
var NullValue = class extends RuntimeValue {
  type = "NullValue";
};
var UndefinedValue = class extends RuntimeValue {
  type = "UndefinedValue";
};
function normalizeNamespaceEntry(pair) {
  let values;
  if (pair instanceof ArrayValue) {
    values = pair.value;
  } else if (pair instanceof StringValue) {
    values = Array.from(pair.value, (char) => new StringValue(char));
  }
  if (!values || values.length !== 2) {
    throw new Error("namespace expected an object or an iterable of [key, value] pairs");
  }
  const [key, value] = values;
  if (!(key instanceof StringValue)) {
    throw new Error("namespace keys must be strings");
  }
  return [key, value];
}
var _Environment = class {
  constructor(parent) {
    this.parent = parent;
  }
  variables = /* @__PURE__ */ new Map([
    [
      "namespace",
      new FunctionValue((args) => {
        const positional = args.slice();
        let kwargs;
        if (positional.at(-1) instanceof KeywordArgumentsValue) {
          kwargs = positional.pop();
        }
        if (positional.length > 1) {
          throw new Error(`namespace expected at most 1 argument, got ${positional.length}`);
        }
        const entries = /* @__PURE__ */ new Map;
        if (positional.length === 1) {
          const source = positional[0];
          if (source instanceof ObjectValue) {
            for (const [key, value] of source.value) {
              entries.set(key, value);
            }
          } else if (source instanceof ArrayValue) {
            for (const pair of source.value) {
              const [key, value] = normalizeNamespaceEntry(pair);
              entries.set(key.value, value);
            }
          } else {
            throw new Error(`'${source.type}' object is not iterable`);
          }
        }
        if (kwargs) {
          for (const [key, value] of kwargs.value) {
            entries.set(key, value);
          }
        }
        return new NamespaceValue(entries);
      })
    ]
  ]);
  tests = _Environment.TESTS;
  set(name, value) {
    return this.declareVariable(name, convertToRuntimeValues(value));
  }
  declareVariable(name, value) {
    if (this.variables.has(name)) {
      throw new SyntaxError(`Variable already declared: ${name}`);
    }
    this.variables.set(name, value);
    return value;
  }
  setVariable(name, value) {
    this.variables.set(name, value);
    return value;
  }
  resolve(name) {
    if (this.variables.has(name)) {
      return this;
    }
    if (this.parent) {
      return this.parent.resolve(name);
    }
    throw new Error(`Unknown variable: ${name}`);
  }
  lookupVariable(name) {
    try {
      return this.resolve(name).variables.get(name) ?? new UndefinedValue;
    } catch {
      return new UndefinedValue;
    }
  }
};
var Environment = _Environment;
__publicField(Environment, "TESTS", /* @__PURE__ */ new Map([
  ["boolean", (operand) => operand.type === "BooleanValue"],
  ["callable", (operand) => operand instanceof FunctionValue],
  [
    "odd",
    (operand) => {
      if (!(operand instanceof IntegerValue)) {
        throw new Error(`cannot odd on ${operand.type}`);
      }
      return operand.value % 2 !== 0;
    }
  ],
  [
    "even",
    (operand) => {
      if (!(operand instanceof IntegerValue)) {
        throw new Error(`cannot even on ${operand.type}`);
      }
      return operand.value % 2 === 0;
    }
  ],
  ["false", (operand) => operand.type === "BooleanValue" && !operand.value],
  ["true", (operand) => operand.type === "BooleanValue" && operand.value],
  ["none", (operand) => operand.type === "NullValue"],
  ["string", (operand) => operand.type === "StringValue"],
  ["number", (operand) => operand instanceof IntegerValue || operand instanceof FloatValue],
  ["integer", (operand) => operand instanceof IntegerValue],
  ["iterable", (operand) => operand.type === "ArrayValue" || operand.type === "StringValue"],
  ["mapping", (operand) => operand instanceof ObjectValue],
  [
    "sequence",
    (operand) => operand instanceof ArrayValue || operand instanceof ObjectValue || operand instanceof StringValue
  ],
  [
    "lower",
    (operand) => {
      const str = operand.value;
      return operand.type === "StringValue" && str === str.toLowerCase();
    }
  ],
  [
    "upper",
    (operand) => {
      const str = operand.value;
      return operand.type === "StringValue" && str === str.toUpperCase();
    }
  ],
  ["none", (operand) => operand.type === "NullValue"],
  ["defined", (operand) => operand.type !== "UndefinedValue"],
  ["undefined", (operand) => operand.type === "UndefinedValue"],
  ["equalto", (a, b) => a.value === b.value],
  ["eq", (a, b) => a.value === b.value]
]));
function isNumericLikeValue(value) {
  return value instanceof IntegerValue || value instanceof FloatValue || value instanceof BooleanValue;
}
function getNumericValue(value) {
  return value instanceof BooleanValue ? Number(value.value) : value.value;
}
function compareRuntimeValues(a, b, caseSensitive = false) {
  if (a instanceof NullValue && b instanceof NullValue) {
    return 0;
  }
  if (a instanceof NullValue || b instanceof NullValue) {
    throw new Error(`Cannot compare ${a.type} with ${b.type}`);
  }
  if (a instanceof UndefinedValue && b instanceof UndefinedValue) {
    return 0;
  }
  if (a instanceof UndefinedValue || b instanceof UndefinedValue) {
    throw new Error(`Cannot compare ${a.type} with ${b.type}`);
  }
  if (isNumericLikeValue(a) && isNumericLikeValue(b)) {
    const aNum = getNumericValue(a);
    const bNum = getNumericValue(b);
    return aNum < bNum ? -1 : aNum > bNum ? 1 : 0;
  }
  if (a.type !== b.type) {
    throw new Error(`Cannot compare different types: ${a.type} and ${b.type}`);
  }
  switch (a.type) {
    case "StringValue": {
      let aStr = a.value;
      let bStr = b.value;
      if (!caseSensitive) {
        aStr = aStr.toLowerCase();
        bStr = bStr.toLowerCase();
      }
      return aStr < bStr ? -1 : aStr > bStr ? 1 : 0;
    }
    default:
      throw new Error(`Cannot compare type: ${a.type}`);
  }
}
function convertToRuntimeValues(input) {
  switch (typeof input) {
    case "number":
      return Number.isInteger(input) ? new IntegerValue(input) : new FloatValue(input);
    case "string":
      return new StringValue(input);
    case "boolean":
      return new BooleanValue(input);
    case "undefined":
      return new UndefinedValue;
    case "object":
      if (input === null) {
        return new NullValue;
      } else if (Array.isArray(input)) {
        return new ArrayValue(input.map(convertToRuntimeValues));
      } else {
        return new ObjectValue(new Map(Object.entries(input).map(([key, value]) => [key, convertToRuntimeValues(value)])));
      }
    case "function":
      return new FunctionValue((args, _scope) => {
        const result = input(...args.map((x) => x.value)) ?? null;
        return convertToRuntimeValues(result);
      });
    default:
      throw new Error(`Cannot convert to runtime value: ${input}`);
  }
}
var PRECEDENCE = Object.freeze({
  CONDITIONAL: 0,
  LOGICAL_OR: 1,
  LOGICAL_AND: 2,
  LOGICAL_NOT: 3,
  COMPARISON: 4,
  ADDITIVE: 5,
  MULTIPLICATIVE: 6,
  EXPONENTIATION: 7,
  TEST: 8,
  FILTER: 9,
  UNARY_SIGN: 10,
  ATOM: 11
});

// src/tokenizers/chat_template.ts
var compiled = new Map;

// ../../main/node_modules/@huggingface/tokenizers/dist/tokenizers.mjs
var UNICODE_WORD_CHARS_IN_CLASS = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
var UNICODE_WORD_CHARS = `${UNICODE_WORD_CHARS_IN_CLASS}\\u00B2\\u00B3\\u00B9\\u00BC-\\u00BE`;
var UNICODE_WORD_CLASS = `[${UNICODE_WORD_CHARS}]`;
var UNICODE_NON_WORD_CLASS = `[^${UNICODE_WORD_CHARS}]`;
var UNICODE_WORD_BOUNDARY = `(?:(?<!${UNICODE_WORD_CLASS})(?=${UNICODE_WORD_CLASS})|(?<=${UNICODE_WORD_CLASS})(?!${UNICODE_WORD_CLASS}))`;
var UNICODE_NON_WORD_BOUNDARY = `(?:(?<!${UNICODE_WORD_CLASS})(?!${UNICODE_WORD_CLASS})|(?<=${UNICODE_WORD_CLASS})(?=${UNICODE_WORD_CLASS}))`;
var HEX_DIGIT_CHARS = "0-9A-Fa-f";
var ESCAPE_REWRITES = /* @__PURE__ */ new Map([
  ["A", "(?<![\\s\\S])"],
  ["z", "(?![\\s\\S])"],
  ["Z", "(?=\\n?(?![\\s\\S]))"],
  ["h", `[${HEX_DIGIT_CHARS}]`],
  ["H", `[^${HEX_DIGIT_CHARS}]`],
  ["w", UNICODE_WORD_CLASS],
  ["W", UNICODE_NON_WORD_CLASS],
  ["d", "\\p{Nd}"],
  ["D", "\\P{Nd}"],
  ["s", "\\p{White_Space}"],
  ["S", "\\P{White_Space}"],
  ["b", UNICODE_WORD_BOUNDARY],
  ["B", UNICODE_NON_WORD_BOUNDARY],
  ["a", "\\x07"],
  ["e", "\\x1B"]
]);
var CLASS_COMPLEMENT_ALTERNATIVES = /* @__PURE__ */ new Map([
  ["W", `[^${UNICODE_WORD_CHARS_IN_CLASS}]`],
  ["H", `[^${HEX_DIGIT_CHARS}]`]
]);
var BYTES_TO_UNICODE = (() => {
  const bs = [
    ...Array.from({ length: 126 - 33 + 1 }, (_, i) => i + 33),
    ...Array.from({ length: "¬".charCodeAt(0) - "¡".charCodeAt(0) + 1 }, (_, i) => i + "¡".charCodeAt(0)),
    ...Array.from({ length: "ÿ".charCodeAt(0) - "®".charCodeAt(0) + 1 }, (_, i) => i + "®".charCodeAt(0))
  ];
  const cs = bs.slice();
  let n = 0;
  for (let b = 0;b < 256; ++b) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n += 1;
    }
  }
  const ccs = cs.map((n2) => String.fromCharCode(n2));
  return Object.fromEntries(bs.map((b, i) => [b, ccs[i]]));
})();
var reverse_dictionary = (data) => Object.fromEntries(Object.entries(data).map(([key, value]) => [value, key]));
var UNICODE_TO_BYTES = reverse_dictionary(BYTES_TO_UNICODE);
// examples/browser/demo.ts
async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok)
    throw new LoomValueError(`[demo] GET ${url}: ${r.status} ${r.statusText}`);
  return new Uint8Array(await r.arrayBuffer());
}
async function fetchJson(url) {
  return JSON.parse(new TextDecoder().decode(await fetchBytes(url)));
}
async function fetchOptionalJson(url) {
  const r = await fetch(url);
  return r.ok ? await r.json() : null;
}
function tensorsOf(bytes) {
  return new Map([...load2(bytes).tensors].map(([k, t]) => [k, tensor_from_io(t)]));
}
async function loadModel(modelUrl, adapterUrl, wantGpu = true) {
  const base = modelUrl.endsWith("/") ? modelUrl : `${modelUrl}/`;
  const config = GPT2Config.from_dict(await fetchJson(`${base}config.json`));
  const model = new GPT2LMHeadModel(config, { init: false });
  model.load_state_dict(tensorsOf(await fetchBytes(`${base}model.safetensors`)), false);
  if (config.tie_word_embeddings)
    model.tie_weights();
  const vocab = await fetchOptionalJson(`${base}vocab.json`);
  let tokenizer = null;
  if (vocab) {
    const chars = [];
    for (const [c, id] of Object.entries(vocab))
      chars[id] = c;
    tokenizer = new CharTokenizer(chars);
  }
  if (adapterUrl) {
    const a = adapterUrl.endsWith("/") ? adapterUrl : `${adapterUrl}/`;
    const cfg = LoraConfig.from_dict(await fetchJson(`${a}adapter_config.json`)).replace({ inference_mode: true });
    inject_adapter_in_model(cfg, model);
    set_peft_model_state_dict(model, tensorsOf(await fetchBytes(`${a}adapter_model.safetensors`)));
  }
  model.eval();
  let device = "cpu", description = `cpu (${runtime_info().cpu_backend})`;
  if (wantGpu) {
    const s = await init_webgpu();
    if (s.available) {
      model.to("webgpu");
      device = "webgpu";
      description = `webgpu: ${s.device}`;
    } else
      description += `; no WebGPU: ${s.reason}`;
  }
  return { model, tokenizer, device, description };
}
async function logitsOf(m, ids) {
  const x = tensor([ids], { dtype: "int64" }).to(m.device);
  const out = no_grad(() => m.model.forward(x).logits);
  return out.data();
}
async function generate(m, prompt, n, onToken) {
  const ctx = m.model.config.n_positions;
  const ids = [...prompt];
  const t0 = performance.now();
  for (let i = 0;i < n; i++) {
    const window = ids.slice(-ctx);
    const logits = await logitsOf(m, window);
    const V = m.model.config.vocab_size, last = logits.subarray((window.length - 1) * V, window.length * V);
    let best = 0;
    for (let v = 1;v < V; v++)
      if (last[v] > last[best])
        best = v;
    ids.push(best);
    onToken?.(best);
  }
  const seconds = (performance.now() - t0) / 1000;
  return { ids: ids.slice(prompt.length), tokensPerSecond: n / seconds, seconds };
}

// examples/browser/main.ts
var q = new URLSearchParams(location.search);
var $ = (id) => document.getElementById(id);
var status = (s) => {
  $("status").textContent = s;
};
async function main() {
  const modelUrl = q.get("model") ?? "../../checkpoints/char-gpt/";
  const adapterParam = q.get("adapter") ?? "../../checkpoints/char-gpt-lora-names/";
  const adapterUrl = adapterParam === "none" ? null : adapterParam;
  const n = Number(q.get("tokens") ?? 64);
  status(`loading ${modelUrl}${adapterUrl ? ` + ${adapterUrl}` : ""}...`);
  const m = await loadModel(modelUrl, adapterUrl, q.get("device") !== "cpu");
  $("device").textContent = m.description;
  const tok = m.tokenizer;
  const prompt = q.get("prompt") ?? `
`;
  const promptIds = tok ? tok.encode(prompt, { unknown: "skip" }) : [0];
  const logits = await logitsOf(m, promptIds);
  status("generating...");
  const out = $("out");
  out.textContent = prompt;
  const g = await generate(m, promptIds, n, (id) => {
    out.textContent += tok ? tok.decode([id]) : ` ${id}`;
  });
  $("speed").textContent = `${g.ids.length} tokens in ${g.seconds.toFixed(2)} s: ${g.tokensPerSecond.toFixed(1)} tokens/s`;
  status("done");
  const report = q.get("report");
  if (report) {
    await fetch(report, {
      method: "POST",
      body: JSON.stringify({ ok: true, device: m.device, description: m.description, promptIds, logits: [...logits], ids: g.ids, text: out.textContent, tokensPerSecond: g.tokensPerSecond })
    });
  }
}
main().catch(async (e) => {
  status(`error: ${e.message}`);
  const report = q.get("report");
  if (report)
    await fetch(report, { method: "POST", body: JSON.stringify({ ok: false, error: `${e.name}: ${e.message}
${e.stack ?? ""}` }) });
});
