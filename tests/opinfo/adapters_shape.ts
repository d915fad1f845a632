/**
 * OpInfo adapters for the shape and indexing ops of issue 16 (src/lazy/shape_ops.ts,
 * scatter_ops.ts, einsum.ts), spread into ADAPTERS (adapters.ts) so that table stays one list.
 */
import * as loom from "../../src/index.ts";
import { isT, params, Unsupported, type Adapter, type Call } from "./adapters.ts";

const repeatLike = (m: "repeat" | "tile"): Adapter => ({ run: (c) => { const [sizes] = params(c, [m === "repeat" ? "repeats" : "dims"]); return m === "repeat" ? c.input.repeat(sizes) : c.input.tile(sizes); } });
const scatterReduce: Adapter = {
  run: (c) => {
    const [dim, index, src, reduce, include_self] = params(c, ["dim", "index", "src", "reduce", "include_self"]);
    return c.input.scatter_reduce(dim, index, src, reduce, { include_self: include_self ?? true });
  },
};
const round: Adapter = { run: (c) => { const [decimals] = params(c, ["decimals"]); return c.input.round({ decimals: decimals ?? 0 }); } };
const pad: Adapter = {
  run: (c: Call) => {
    const [p, mode, value] = params(c, ["pad", "mode", "value"]);
    return loom.nn.F.pad(c.input, p, { mode: mode ?? "constant", value: value ?? undefined });
  },
};

export const SHAPE_ADAPTERS: Record<string, Adapter> = {
  repeat: repeatLike("repeat"),
  tile: repeatLike("tile"),
  repeat_interleave: {
    run: (c) => {
      const [repeats, dim, output_size] = params(c, ["repeats", "dim", "output_size"]);
      if (output_size !== undefined && output_size !== null) throw new Unsupported("keyword output_size=");
      return c.input.repeat_interleave(repeats, dim);
    },
  },
  flip: { run: (c) => c.input.flip(params(c, ["dims"])[0]) },
  fliplr: { run: (c) => { params(c, []); return c.input.fliplr(); } },
  flipud: { run: (c) => { params(c, []); return c.input.flipud(); } },
  roll: { run: (c) => { const [shifts, dims] = params(c, ["shifts", "dims"]); return c.input.roll(shifts, dims); } },
  select: { run: (c) => { const [dim, index] = params(c, ["dim", "index"]); return c.input.select(dim, index); } },
  outer: { run: (c) => { const [v] = params(c, ["vec2"]); if (!isT(v)) throw new Unsupported("non-tensor vec2"); return c.input.outer(v); } },
  diag: { run: (c) => c.input.diag(params(c, ["diagonal"])[0] ?? 0) },
  diagonal: { run: (c) => { const [o, d1, d2] = params(c, ["offset", "dim1", "dim2"]); return c.input.diagonal(o ?? 0, d1 ?? 0, d2 ?? 1); } },
  masked_select: { run: (c) => c.input.masked_select(params(c, ["mask"])[0]) },
  nonzero: { run: (c) => c.input.nonzero({ as_tuple: params(c, ["as_tuple"])[0] ?? false }) },
  scatter: {
    run: (c) => {
      const [dim, index, src, reduce] = params(c, ["dim", "index", "src", "reduce"], ["value"]);
      return c.input.scatter(dim, index, src ?? c.kwargs.value, reduce === undefined ? undefined : { reduce });
    },
  },
  "scatter_reduce.sum": scatterReduce,
  "scatter_reduce.prod": scatterReduce,
  "scatter_reduce.mean": scatterReduce,
  "scatter_reduce.amax": scatterReduce,
  "scatter_reduce.amin": scatterReduce,
  "round.decimals_0": round,
  "round.decimals_3": round,
  "round.decimals_neg_3": round,
  einsum: { run: (c) => { const [eq] = params(c, ["equation"]); if (!Array.isArray(c.input)) throw new Unsupported("einsum operands not a list"); return loom.einsum(eq, ...c.input); } },
  "nn.functional.pad.constant": pad,
  "nn.functional.pad.reflect": pad,
  "nn.functional.pad.replicate": pad,
  "nn.functional.pad.circular": pad,
};
