/**
 * torch-like printing: `tensor([[1.0000, 2.0000]], grad_fn=<add>)`.
 */
import { isFloating, type DType } from "../tensor/dtype.ts";

const MAX_SHOWN = 1000;

type FloatMode = "int" | "fixed" | "sci";

/**
 * One notation for the whole float tensor, chosen from its nonzero finite values as torch's
 * `_Formatter` does: scientific when max/min > 1000, max > 1e8, or (non-integers) min < 1e-4.
 */
function floatMode(values: Float64Array): FloatMode {
  let min = Infinity, max = 0, ints = true;
  for (const v of values) {
    if (!Number.isFinite(v) || v === 0) continue;
    const a = Math.abs(v);
    if (a < min) min = a;
    if (a > max) max = a;
    if (!Number.isInteger(v)) ints = false;
  }
  if (max === 0) return "int";
  if (max / min > 1000 || max > 1e8 || (!ints && min < 1e-4)) return "sci";
  return ints ? "int" : "fixed";
}

function fmtValue(v: number, dtype: DType, mode: FloatMode): string {
  if (dtype === "bool") return v ? "True" : "False";
  if (!isFloating(dtype)) return String(v);
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  const sign = Object.is(v, -0) ? "-" : "";
  if (mode === "int") return `${sign}${v.toFixed(0)}.`;
  if (mode === "fixed") return sign + v.toFixed(4);
  // Python's "{:.4e}" writes at least two exponent digits: 1.0000e-05
  return sign + v.toExponential(4).replace(/e([+-])(\d)$/, "e$10$2");
}

export function formatTensor(shape: readonly number[], dtype: DType, values: Float64Array, gradFn: string | null, requiresGrad: boolean): string {
  const floating = isFloating(dtype);
  const mode = floating ? floatMode(values) : "fixed";
  const shown = values.subarray(0, MAX_SHOWN);
  const strs = Array.from(shown, (v) => fmtValue(v, dtype, mode));
  // torch pads to the widest nonzero finite value: nan, inf and 0 do not widen the columns
  const width = strs.reduce((w, s, i) => (!floating || (Number.isFinite(shown[i]!) && shown[i] !== 0) ? Math.max(w, s.length) : w), 1);
  const build = (d: number, off: number, indent: string): string => {
    if (d === shape.length) return (strs[off] ?? "...").padStart(width);
    const stride = shape.slice(d + 1).reduce((p, x) => p * x, 1);
    const parts: string[] = [];
    for (let i = 0; i < shape[d]!; i++) {
      if (off + i * stride >= MAX_SHOWN) { parts.push("..."); break; }
      parts.push(build(d + 1, off + i * stride, indent + " "));
    }
    const sep = d === shape.length - 1 ? ", " : ",\n" + "\n".repeat(Math.max(0, shape.length - d - 2)) + indent + " ";
    return `[${parts.join(sep)}]`;
  };
  const body = build(0, 0, "       ");
  const extras: string[] = [];
  if (dtype !== "float32" && dtype !== "int64" && dtype !== "bool") extras.push(`dtype=${dtype}`);
  if (gradFn) extras.push(`grad_fn=<${gradFn}>`);
  else if (requiresGrad) extras.push("requires_grad=True");
  return `tensor(${body}${extras.length ? ", " + extras.join(", ") : ""})`;
}
