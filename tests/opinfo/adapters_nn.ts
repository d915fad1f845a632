/**
 * OpInfo adapters for the nn.functional ops of issue 16: losses (src/lazy/losses.ts), convolution,
 * pooling and normalization (src/lazy/conv.ts, pooling.ts, batch_norm.ts) and leaky_relu, spread
 * into ADAPTERS (adapters.ts) so that table stays one list. Parameter names and order are
 * torch.nn.functional's (torch 1.13).
 */
import * as loom from "../../src/index.ts";
import { params, Unsupported, type Adapter, type Call } from "./adapters.ts";

const F = loom.nn.F;

/** Reads a loss's parameters; the deprecated size_average/reduce pair is refused. */
function lossParams(c: Call, names: string[]): any[] {
  const v = params(c, names, ["size_average", "reduce"]);
  for (const k of ["size_average", "reduce"]) {
    if (c.kwargs[k] !== undefined && c.kwargs[k] !== null) throw new Unsupported("deprecated size_average/reduce");
  }
  return v;
}

const pointLoss = (m: "l1_loss" | "mse_loss"): Adapter => ({
  run: (c) => { const [target, reduction] = lossParams(c, ["target", "reduction"]); return F[m](c.input, target, { reduction: reduction ?? "mean" }); },
});

const maxPool = (m: "max_pool1d" | "max_pool2d"): Adapter => ({
  run: (c): any => {
    const [kernel_size, stride, padding, dilation, ceil_mode, return_indices] = params(c, ["kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"]);
    const o = { stride: stride ?? null, padding: padding ?? 0, dilation: dilation ?? 1, ceil_mode: ceil_mode ?? false };
    return return_indices ? [...(F[m] as any)(c.input, kernel_size, { ...o, return_indices: true })] : (F[m] as any)(c.input, kernel_size, o);
  },
});
const adaptiveMax = (m: "adaptive_max_pool1d" | "adaptive_max_pool2d"): Adapter => ({
  run: (c): any => {
    const [output_size, return_indices] = params(c, ["output_size", "return_indices"]);
    return return_indices ? [...(F[m] as any)(c.input, output_size, true)] : (F[m] as any)(c.input, output_size, false);
  },
});
const conv = (m: "conv1d" | "conv2d"): Adapter => ({
  run: (c) => {
    const [weight, bias, stride, padding, dilation, groups] = params(c, ["weight", "bias", "stride", "padding", "dilation", "groups"]);
    return F[m](c.input, weight, bias ?? null, { stride: stride ?? 1, padding: padding ?? 0, dilation: dilation ?? 1, groups: groups ?? 1 });
  },
});

export const NN_ADAPTERS: Record<string, Adapter> = {
  "nn.functional.leaky_relu": {
    run: (c) => {
      const [slope, inplace] = params(c, ["negative_slope", "inplace"]);
      if (inplace) throw new Unsupported("inplace=True");
      return F.leaky_relu(c.input, slope ?? 0.01);
    },
  },
  "nn.functional.conv1d": conv("conv1d"),
  "nn.functional.conv2d": conv("conv2d"),
  "nn.functional.unfold": {
    run: (c) => {
      const [kernel_size, dilation, padding, stride] = params(c, ["kernel_size", "dilation", "padding", "stride"]);
      return F.unfold(c.input, kernel_size, { dilation: dilation ?? 1, padding: padding ?? 0, stride: stride ?? 1 });
    },
  },
  "nn.functional.max_pool1d": maxPool("max_pool1d"),
  "nn.functional.max_pool2d": maxPool("max_pool2d"),
  "nn.functional.avg_pool1d": {
    run: (c) => {
      const [kernel_size, stride, padding, ceil_mode, count_include_pad] = params(c, ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]);
      return F.avg_pool1d(c.input, kernel_size, { stride: stride ?? null, padding: padding ?? 0, ceil_mode: ceil_mode ?? false, count_include_pad: count_include_pad ?? true });
    },
  },
  "nn.functional.avg_pool2d": {
    run: (c) => {
      const [kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override] = params(c, ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"]);
      return F.avg_pool2d(c.input, kernel_size, { stride: stride ?? null, padding: padding ?? 0, ceil_mode: ceil_mode ?? false, count_include_pad: count_include_pad ?? true, divisor_override: divisor_override ?? null });
    },
  },
  "nn.functional.adaptive_avg_pool1d": { run: (c) => F.adaptive_avg_pool1d(c.input, params(c, ["output_size"])[0]) },
  "nn.functional.adaptive_avg_pool2d": { run: (c) => F.adaptive_avg_pool2d(c.input, params(c, ["output_size"])[0]) },
  "nn.functional.adaptive_max_pool1d": adaptiveMax("adaptive_max_pool1d"),
  "nn.functional.adaptive_max_pool2d": adaptiveMax("adaptive_max_pool2d"),
  "nn.functional.batch_norm": {
    run: (c) => {
      const [rm, rv, w, b, training, momentum, eps] = params(c, ["running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"]);
      return F.batch_norm(c.input, rm ?? null, rv ?? null, w ?? null, b ?? null, training ?? false, momentum ?? 0.1, eps ?? 1e-5);
    },
  },
  "nn.functional.group_norm": {
    run: (c) => {
      const [g, w, b, eps] = params(c, ["num_groups", "weight", "bias", "eps"]);
      return F.group_norm(c.input, g, w ?? null, b ?? null, eps ?? 1e-5);
    },
  },
  "nn.functional.nll_loss": {
    run: (c) => {
      const [target, weight, , ignore_index, , reduction] = lossParams(c, ["target", "weight", "size_average", "ignore_index", "reduce", "reduction"]);
      return F.nll_loss(c.input, target, { weight: weight ?? null, ignore_index: ignore_index ?? -100, reduction: reduction ?? "mean" });
    },
  },
  "nn.functional.l1_loss": pointLoss("l1_loss"),
  "nn.functional.huber_loss": {
    run: (c) => { const [target, reduction, delta] = params(c, ["target", "reduction", "delta"]); return F.huber_loss(c.input, target, { reduction: reduction ?? "mean", delta: delta ?? 1 }); },
  },
  "nn.functional.smooth_l1_loss": {
    run: (c) => {
      const [target, , , reduction, beta] = lossParams(c, ["target", "size_average", "reduce", "reduction", "beta"]);
      return F.smooth_l1_loss(c.input, target, { reduction: reduction ?? "mean", beta: beta ?? 1 });
    },
  },
  "nn.functional.kl_div": {
    run: (c) => {
      const [target, , , reduction, log_target] = lossParams(c, ["target", "size_average", "reduce", "reduction", "log_target"]);
      return F.kl_div(c.input, target, { reduction: reduction ?? "mean", log_target: log_target ?? false });
    },
  },
  "nn.functional.binary_cross_entropy": {
    run: (c) => {
      const [target, weight, , , reduction] = lossParams(c, ["target", "weight", "size_average", "reduce", "reduction"]);
      return F.binary_cross_entropy(c.input, target, { weight: weight ?? null, reduction: reduction ?? "mean" });
    },
  },
  "nn.functional.binary_cross_entropy_with_logits": {
    run: (c) => {
      const [target, weight, , , reduction, pos_weight] = lossParams(c, ["target", "weight", "size_average", "reduce", "reduction", "pos_weight"]);
      return F.binary_cross_entropy_with_logits(c.input, target, { weight: weight ?? null, reduction: reduction ?? "mean", pos_weight: pos_weight ?? null });
    },
  },
};
