/**
 * torch-like printing: `tensor([[1.0000, 2.0000]], grad_fn=<add>)`.
 */
import { isFloating, type DType } from "../tensor/dtype.ts";

const MAX_SHOWN = 1000;

function fmtValue(v: number, dtype: DType, intLike: boolean): string {
  if (dtype === "bool") return v ? "True" : "False";
  if (!isFloating(dtype)) return String(v);
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  if (intLike) return `${v.toFixed(0)}.`;
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e8 || a < 1e-4) ? v.toExponential(4) : v.toFixed(4);
}

export function formatTensor(shape: readonly number[], dtype: DType, values: Float64Array, gradFn: string | null, requiresGrad: boolean): string {
  const intLike = values.every((v) => !Number.isFinite(v) || Number.isInteger(v));
  const strs = Array.from(values.subarray(0, MAX_SHOWN), (v) => fmtValue(v, dtype, intLike));
  const width = strs.reduce((w, s) => Math.max(w, s.length), 0);
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
