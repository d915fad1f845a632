/**
 * LoraLayer: PEFT's `lora.Linear` — wraps a Linear ([out, in] weight) or a Hugging Face Conv1D
 * ([in, out] weight, `fan_in_fan_out`), keeping it as `base_layer`, and adds per adapter name
 *   lora_A[name]: Linear(in, r, bias=false)   weight [r, in]
 *   lora_B[name]: Linear(r, out, bias=false)  weight [out, r]
 *   lora_dropout[name]: Dropout(p) or Identity
 * so in-memory keys read `c_attn.base_layer.weight`, `c_attn.lora_A.default.weight` as in PEFT.
 *
 * y = base_layer(x) + Σ_active scaling · lora_B(lora_A(dropout(x))), scaling = lora_alpha / r.
 * With one active adapter and no active dropout the whole sum is the fused registry op
 * `lora_linear(x, W, A, B, scaling, bias)` (for Conv1D, W is the transposed view of the weight).
 *
 * QLoRA (Dettmers et al. 2023): the base layer may instead be a frozen compressed layer
 * (`LoraCompressedBase`, which loom.weights' CompressedLinear satisfies: an NF4/Q8_0/Q4_0 weight
 * node), as PEFT's lora/bnb.py wraps bitsandbytes' Linear4bit. Forward is then
 * base_layer(x) + s·B(A(x)): the base runs its fused dequantize-matmul, whose gradient to x is the
 * fused transposed kernel, so the LoRA weights train without the dense base ever being built.
 * Source: https://github.com/huggingface/peft/blob/main/src/peft/tuners/lora/layer.py
 * (LoraLayer.update_layer, reset_lora_parameters, Linear.forward/merge/unmerge/get_delta_weight);
 * peft/tuners/lora/bnb.py (Linear4bit.merge/unmerge); Hu et al. 2021,
 * https://github.com/microsoft/LoRA (loralib/layers.py).
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { lora_linear } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { Dropout, Identity } from "../nn/activation.ts";
import { ModuleDict } from "../nn/container.ts";
import { Conv1D } from "../nn/conv1d.ts";
import { lift } from "../nn/execution.ts";
import { kaiming_uniform_, normal_, zeros_ } from "../nn/init.ts";
import { Linear } from "../nn/linear.ts";
import { type Module, TensorModule } from "../nn/module.ts";
import type { Parameter } from "../nn/parameter.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";

/**
 * A frozen linear layer whose weight is not a dense tensor but a weight graph (y = x Wᵀ + b with
 * W [out_features, in_features]): loom.weights' CompressedLinear (bitsandbytes' Linear4bit in
 * PEFT's lora/bnb.py). lora sits below weights in the layer ranks, so this is the contract such a
 * layer satisfies rather than an import.
 */
export interface LoraCompressedBase extends TensorModule {
  readonly in_features: number;
  readonly out_features: number;
  bias: Parameter | null;
  /** The weight graph (opaque here): its dense dtype and logical shape [out, in]. */
  weight: { readonly dtype: DType; readonly shape: readonly number[] };
  /** Device of the stored pieces (where adapters are created). */
  weight_device(): string;
  /** The dense weight [out, in] as an eager tensor without history (PEFT dequantize_module_weight). */
  dequantize(): Tensor;
  /**
   * Replace the weight by dense `w` [out, in] compressed the way the current one is
   * (bitsandbytes' Params4bit requantize on merge).
   * @throws LoomValueError when the weight's kind cannot be re-made from a dense weight
   */
  requantize(w: Tensor): void;
}

/** The layers LoRA can wrap. */
export type LoraBaseLayer = Linear | Conv1D | LoraCompressedBase;

/** True for a frozen compressed base layer (see LoraCompressedBase), checked by its methods. */
export function is_compressed_base(m: unknown): m is LoraCompressedBase {
  const c = m as Partial<LoraCompressedBase> | null;
  return m instanceof TensorModule && typeof c?.dequantize === "function" && typeof c.requantize === "function" &&
    typeof c.weight_device === "function" && Number.isInteger(c.in_features) && Number.isInteger(c.out_features);
}

/** True for a module LoRA can wrap (Linear, HF Conv1D, a compressed base such as CompressedLinear). */
export function is_lora_target_layer(m: Module): m is LoraBaseLayer {
  return m instanceof Linear || m instanceof Conv1D || is_compressed_base(m);
}

/** What update_layer needs for one adapter. */
export interface LoraAdapterSpec {
  r: number;
  lora_alpha: number;
  lora_dropout: number;
  init_lora_weights: boolean | "gaussian";
  use_rslora: boolean;
  /** Random source for the A (and, with init false, B) initialization. */
  generator?: Generator;
}

export class LoraLayer extends TensorModule {
  base_layer: LoraBaseLayer;
  lora_dropout: ModuleDict<TensorModule>;
  lora_A: ModuleDict<Linear>;
  lora_B: ModuleDict<Linear>;
  /** Per adapter: rank, alpha and the scaling lora_alpha / r (or / √r with rslora). */
  r: Record<string, number> = {};
  lora_alpha: Record<string, number> = {};
  scaling: Record<string, number> = {};
  /** Adapters whose update is currently added into base_layer.weight, in merge order. */
  merged_adapters: string[] = [];
  /** Adapters applied by forward (and trained). */
  active_adapters: string[];
  /** When true forward returns base_layer(x) (PEFT's disable_adapters). */
  disable_adapters = false;
  readonly in_features: number;
  readonly out_features: number;

  /**
   * Wrap `base_layer` and add adapter `adapter_name` (active).
   * @throws LoomValueError for a base layer that is not Linear/Conv1D, or a bad r
   */
  constructor(base_layer: Module, adapter_name: string, spec: LoraAdapterSpec) {
    super();
    if (!is_lora_target_layer(base_layer)) {
      throw new LoomValueError(`[LoraLayer] Target module ${base_layer._get_name()} is not supported. Currently, only Linear, Conv1D and compressed linear layers are supported.`);
    }
    this.base_layer = base_layer;
    this.lora_dropout = new ModuleDict();
    this.lora_A = new ModuleDict();
    this.lora_B = new ModuleDict();
    this.in_features = base_layer.in_features;
    this.out_features = base_layer.out_features;
    this.active_adapters = [adapter_name];
    this.update_layer(adapter_name, spec);
  }

  /** Adapter names present on this layer. */
  get adapters(): string[] {
    return this.lora_A.keys();
  }
  /** True while any adapter's update is merged into base_layer.weight. */
  get merged(): boolean {
    return this.merged_adapters.length > 0;
  }
  /** True when base_layer stores its weight [in, out] (Conv1D). */
  get fan_in_fan_out(): boolean {
    return this.base_layer instanceof Conv1D;
  }
  /** True when base_layer is a frozen compressed layer (QLoRA), not a dense Linear/Conv1D. */
  get compressed_base(): boolean {
    return is_compressed_base(this.base_layer);
  }
  /** The compressed weight before the first merge, restored exactly by unmerge. */
  private premerge_weight: LoraCompressedBase["weight"] | null = null;

  /**
   * Add (or re-create) adapter `name` with rank r: A [r, in], B [out, r] as PEFT initializes
   * them (init true: A kaiming-uniform a=√5 i.e. U(±1/√in), B zeros), on the base weight's dtype
   * and device. Adapters not active get requires_grad false.
   * @throws LoomValueError if r is not a positive integer
   */
  update_layer(name: string, spec: LoraAdapterSpec): void {
    const { r, lora_alpha } = spec;
    if (!Number.isInteger(r) || r <= 0) throw new LoomValueError(`[LoraLayer] \`r\` should be a positive integer value but the value passed is ${r}`);
    this.r[name] = r;
    this.lora_alpha[name] = lora_alpha;
    this.lora_dropout.set(name, spec.lora_dropout > 0 ? new Dropout(spec.lora_dropout) : new Identity());
    const dtype = this.base_layer.weight.dtype;
    const g = spec.generator;
    this.lora_A.set(name, new Linear(this.in_features, r, { bias: false, dtype, generator: g }));
    this.lora_B.set(name, new Linear(r, this.out_features, { bias: false, dtype, generator: g }));
    this.scaling[name] = spec.use_rslora ? lora_alpha / Math.sqrt(r) : lora_alpha / r;
    this.reset_lora_parameters(name, spec.init_lora_weights, g);
    const b = this.base_layer;
    const device = is_compressed_base(b) ? b.weight_device() : (b as Linear | Conv1D).weight.device; // PEFT _move_adapter_to_device_of_base_layer
    if (device !== "cpu") {
      this.lora_A.get(name).to(device);
      this.lora_B.get(name).to(device);
    }
    this.lora_dropout.get(name).train(this.training);
    this.set_adapter(this.active_adapters);
  }

  /** PEFT reset_lora_parameters: B zeros and A kaiming-uniform(a=√5) or N(0, 1/r²); false keeps both random. */
  reset_lora_parameters(name: string, init: boolean | "gaussian", generator?: Generator): void {
    if (init === false) return;
    const A = this.lora_A.get(name).weight;
    if (init === "gaussian") normal_(A, 0, 1 / this.r[name]!, { generator });
    else kaiming_uniform_(A, Math.sqrt(5), "fan_in", "leaky_relu", { generator });
    zeros_(this.lora_B.get(name).weight);
  }

  /**
   * Make `names` the active adapters; their A/B train (requires_grad true), all others are
   * frozen (PEFT BaseTunerLayer.set_adapter).
   * @throws LoomValueError for a name this layer does not have
   */
  set_adapter(names: string | readonly string[]): void {
    const list = typeof names === "string" ? [names] : [...names];
    for (const n of list) if (!this.lora_A.has(n)) throw new LoomValueError(`[LoraLayer] adapter "${n}" not found (adapters: ${this.adapters.join(", ")})`);
    for (const n of this.adapters) {
      const on = list.includes(n) && !this.disable_adapters;
      this.lora_A.get(n).requires_grad_(on);
      this.lora_B.get(n).requires_grad_(on);
    }
    this.active_adapters = list;
  }

  /** Turn the adapters on or off (PEFT enable_adapters); off also freezes their A/B. */
  enable_adapters(enabled: boolean): void {
    this.disable_adapters = !enabled;
    this.set_adapter(this.active_adapters);
  }

  /**
   * Remove adapter `name`. If it was active, the first remaining adapter becomes active.
   * @throws LoomValueError if it is absent, or merged into the base weight (unmerge first)
   */
  delete_adapter(name: string): void {
    if (!this.lora_A.has(name)) throw new LoomValueError(`[LoraLayer] adapter "${name}" not found (adapters: ${this.adapters.join(", ")})`);
    if (this.merged_adapters.includes(name)) throw new LoomValueError(`[LoraLayer] adapter "${name}" is merged into the base weight: unmerge() before deleting it`);
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

  /**
   * ΔW of adapter `name` in base_layer.weight's layout: scaling · B A ([out, in]), transposed to
   * [in, out] for Conv1D (PEFT get_delta_weight).
   * @returns a new eager tensor, no autograd history
   */
  get_delta_weight(name: string): Tensor {
    return no_grad(() => {
      const d = this.lora_B.get(name).weight.matmul(this.lora_A.get(name).weight).mul(this.scaling[name]!); // [out, in]
      return this.fan_in_fan_out ? d.t().contiguous() : d;
    });
  }

  /**
   * Add the active adapters' ΔW into base_layer.weight (PEFT Linear.merge); forward then runs
   * the base layer alone. Already merged adapters are skipped.
   * @param opts.safe_merge - compute the merged weight aside and refuse (throw) if it is not finite
   * @param opts.adapter_names - merge these instead of the active adapters
   * On a compressed base (QLoRA) the merge is PEFT's Linear4bit.merge: dequantize, add ΔW,
   * compress again the same way (base_layer.requantize), so the merged layer carries the rounding
   * error of one more quantization. Unlike PEFT (which dequantizes, subtracts and requantizes
   * again), unmerge restores the weight node held before the first merge, exactly.
   * @throws LoomValueError with safe_merge when the result has NaN/Inf, or for an unknown adapter;
   *   on a compressed base, LoomValueError from requantize for a weight kind it cannot re-make
   */
  merge(opts: { safe_merge?: boolean; adapter_names?: readonly string[] } = {}): void {
    const names = opts.adapter_names ?? this.active_adapters;
    if (is_compressed_base(this.base_layer)) return this.merge_compressed(this.base_layer, names, !!opts.safe_merge);
    const W = (this.base_layer as Linear | Conv1D).weight;
    no_grad(() => {
      for (const n of names) {
        if (!this.lora_A.has(n)) throw new LoomValueError(`[LoraLayer.merge] adapter "${n}" not found (adapters: ${this.adapters.join(", ")})`);
        if (this.merged_adapters.includes(n)) continue;
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

  /** merge() on a compressed base: dequantize, add every ΔW, requantize once. */
  private merge_compressed(base: LoraCompressedBase, names: readonly string[], safe: boolean): void {
    const todo: string[] = [];
    for (const n of names) {
      if (!this.lora_A.has(n)) throw new LoomValueError(`[LoraLayer.merge] adapter "${n}" not found (adapters: ${this.adapters.join(", ")})`);
      if (!this.merged_adapters.includes(n) && !todo.includes(n)) todo.push(n);
    }
    if (todo.length === 0) return;
    no_grad(() => {
      let W = base.dequantize();
      for (const n of todo) W = W.add(this.get_delta_weight(n));
      if (safe && !W.dataSync().every(Number.isFinite)) {
        throw new LoomValueError(`[LoraLayer.merge] NaNs detected in the merged weights. The adapter ${todo.join(", ")} seems to be broken`);
      }
      const before = base.weight;
      base.requantize(W);
      this.premerge_weight ??= before;
    });
    this.merged_adapters.push(...todo);
  }

  /**
   * Subtract every merged adapter's ΔW from base_layer.weight, last merged first (PEFT
   * Linear.unmerge); on a compressed base, put back the weight node held before the first merge.
   */
  unmerge(): void {
    if (is_compressed_base(this.base_layer)) {
      if (this.premerge_weight) this.base_layer.weight = this.premerge_weight;
      this.premerge_weight = null;
      this.merged_adapters = [];
      return;
    }
    const W = (this.base_layer as Linear | Conv1D).weight;
    no_grad(() => {
      while (this.merged_adapters.length > 0) {
        const n = this.merged_adapters.pop()!;
        W.sub_(this.get_delta_weight(n));
      }
    });
  }

  /**
   * @param x - [*, in_features], the base weight's dtype
   * @returns [*, out_features]
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    if (this.disable_adapters) {
      if (this.merged) this.unmerge();
      return this.base_layer.forward(x);
    }
    if (this.merged) return this.base_layer.forward(x);
    let result: S | null = null;
    for (const n of this.active_adapters) {
      if (!this.lora_A.has(n)) continue;
      const A = this.lora_A.get(n), B = this.lora_B.get(n), drop = this.lora_dropout.get(n);
      const s = this.scaling[n]!;
      const dropping = drop instanceof Dropout && drop.training && drop.p > 0;
      const base = this.base_layer;
      if (result === null && !dropping && !is_compressed_base(base) && x.dtype === A.weight.dtype && x.dtype === base.weight.dtype) {
        // the whole layer as one fused op: x Wᵀ + b + s·(x Aᵀ)Bᵀ (a compressed base runs its own fused kernel instead)
        const W = lift(base.weight, x);
        result = lora_linear(x, this.fan_in_fan_out ? W.t() : W, lift(A.weight, x), lift(B.weight, x), s, lift(this.base_layer.bias, x));
        continue;
      }
      result ??= this.base_layer.forward(x);
      const xa = x.dtype === A.weight.dtype ? x : x.to(A.weight.dtype); // PEFT casts x to lora_A's dtype
      const delta = B.forward(A.forward(drop.forward(xa))).mul(s);
      result = result.add(delta.dtype === result.dtype ? delta : delta.to(result.dtype));
    }
    return result ?? this.base_layer.forward(x);
  }

  override extra_repr(): string {
    const rs = this.adapters.map((n) => `${n}: r=${this.r[n]}, lora_alpha=${this.lora_alpha[n]}`).join("; ");
    return `fan_in_fan_out=${this.fan_in_fan_out ? "True" : "False"}${this.compressed_base ? ", compressed_base=True" : ""}${rs ? `, ${rs}` : ""}`;
  }
}
