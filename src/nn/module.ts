/**
 * Module: the base class of every layer and model (torch.nn.Module semantics).
 *
 * Registration: a module's parameters and submodules are its own enumerable properties holding a
 * `Parameter` or a `Module`, in property order (the order class fields are declared, or first
 * assigned) — so `this.c_attn = new Linear(...)` registers `c_attn`, and reassigning the property
 * (LoRA injection) replaces it. Buffers are tensors registered with `register_buffer` (a plain
 * tensor attribute is not state, as in PyTorch). Dotted names follow the attribute path, giving
 * Hugging Face keys such as `transformer.h.0.attn.c_attn.weight`.
 *
 * Execution: the computation is written once, either as a plain `forward(x: Tensor): Tensor`
 * (PyTorch's style: parameters used directly) or as the generic `forward_lazy<S>` (the built-in
 * layers). `call(x)` is the user entry point, typed as the module's forward: on eager inputs it
 * records the computation lazily and returns pending eager results (or runs op by op in "eager"
 * execution mode, see execution.ts); on LazyTensor inputs it returns the lazy result.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { LazyTensor } from "../lazy/lazy_tensor.ts";
import { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { DTYPES, isFloating, type DType } from "../tensor/dtype.ts";
import { LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { RemovableHandle } from "../autograd/engine.ts";
import { run_forward, with_execution_mode } from "./execution.ts";
import { ModuleHooks, type BackwardHook, type BackwardPreHook, type ForwardHook, type ForwardPreHook } from "./hooks.ts";
import { Parameter } from "./parameter.ts";

/** Tensors keyed by dotted attribute path (torch's OrderedDict state dict). */
export type StateDict = Record<string, Tensor>;

/** What `load_state_dict` did not match (torch's `_IncompatibleKeys`). */
export interface IncompatibleKeys {
  missing_keys: string[];
  unexpected_keys: string[];
}

type AnyTensor = TensorOps<any>;

function checkName(kind: string, name: string): void {
  if (typeof name !== "string") throw new LoomValueError(`[${kind}] name should be a string, got ${typeof name}`);
  if (name === "") throw new LoomValueError(`[${kind}] name can't be empty string ""`);
  if (name.includes(".")) throw new LoomValueError(`[${kind}] name can't contain ".", got "${name}"`);
}

export class Module {
  /** Train/eval flag read by Dropout and friends; set with train()/eval(). */
  training = true;
  /** Registered buffer names -> persistent (included in state_dict). */
  private readonly _buffer_persistence = new Map<string, boolean>();

  // ---- registration -----------------------------------------------------------------------
  /** [name, value] pairs owned directly by this module, in registration order. */
  protected _local_entries(): [string, unknown][] {
    const self = this as unknown as Record<string, unknown>;
    return Object.keys(this).map((k) => [k, self[k]]);
  }
  /** Set an own attribute; containers that keep their own table override this for modules. */
  protected _set_local(name: string, value: unknown): void {
    (this as unknown as Record<string, unknown>)[name] = value;
  }
  private _checkFree(kind: string, name: string, ok: (v: unknown) => boolean): void {
    checkName(kind, name);
    if (name in this && !ok((this as unknown as Record<string, unknown>)[name])) {
      throw new LoomValueError(`[${kind}] attribute '${name}' already exists on ${this._get_name()}`);
    }
  }

  /**
   * Register a parameter (or null, which registers nothing) under `name` (torch register_parameter).
   * Assigning `this.name = new Parameter(t)` does the same.
   * @throws LoomValueError for an empty or dotted name, or a name taken by another attribute
   */
  register_parameter(name: string, param: Parameter | null): void {
    this._checkFree("register_parameter", name, (v) => v === undefined || v === null || v instanceof Parameter);
    if (param !== null && !(param instanceof Parameter)) {
      throw new LoomValueError(`[register_parameter] cannot assign a ${(param as unknown as object)?.constructor?.name ?? typeof param} as parameter '${name}' (nn.Parameter or null expected)`);
    }
    if (this._buffer_persistence.has(name)) throw new LoomValueError(`[register_parameter] attribute '${name}' already exists as a buffer`);
    this._set_local(name, param);
  }

  /**
   * Register a tensor that is state but not a parameter, e.g. a causal mask or running stats
   * (torch register_buffer). Non-persistent buffers are left out of state_dict.
   * @param tensor - an eager Tensor (a LazyTensor is realized) or null
   * @throws LoomValueError for an empty or dotted name, or a name taken by another attribute
   */
  register_buffer(name: string, tensor: AnyTensor | null, persistent = true): void {
    this._checkFree("register_buffer", name, (v) => v === undefined || v === null || (v instanceof TensorOps && !(v instanceof Parameter)));
    if (tensor !== null && !(tensor instanceof TensorOps)) {
      throw new LoomValueError(`[register_buffer] cannot assign a ${(tensor as object)?.constructor?.name ?? typeof tensor} as buffer '${name}' (Tensor or null expected)`);
    }
    this._buffer_persistence.set(name, persistent);
    this._set_local(name, tensor instanceof LazyTensor ? tensor.eval() : tensor);
  }

  /**
   * Register a child module (torch add_module / register_module). Assigning `this.name = m`
   * does the same.
   * @throws LoomValueError for an empty or dotted name, or a name taken by another attribute
   */
  add_module(name: string, module: Module | null): void {
    this._checkFree("add_module", name, (v) => v === undefined || v === null || v instanceof Module);
    if (module !== null && !(module instanceof Module)) {
      throw new LoomValueError(`[add_module] ${(module as object)?.constructor?.name ?? typeof module} is not a Module subclass`);
    }
    this._set_local(name, module);
  }
  register_module(name: string, module: Module | null): void {
    this.add_module(name, module);
  }

  /** Own submodules as [name, module], registration order (no recursion, no deduplication). */
  protected _local_modules(): [string, Module][] {
    return this._local_entries().filter((e): e is [string, Module] => e[1] instanceof Module);
  }
  /** Own parameters as [name, parameter]. */
  protected _local_parameters(): [string, Parameter][] {
    return this._local_entries().filter((e): e is [string, Parameter] => e[1] instanceof Parameter && !this._buffer_persistence.has(e[0]));
  }
  /** Own non-null buffers as [name, tensor, persistent]. */
  protected _local_buffers(): [string, Tensor, boolean][] {
    const out: [string, Tensor, boolean][] = [];
    for (const [k, v] of this._local_entries()) {
      const p = this._buffer_persistence.get(k);
      if (p !== undefined && v instanceof TensorOps) out.push([k, v as Tensor, p]);
    }
    return out;
  }

  // ---- traversal --------------------------------------------------------------------------
  /** Direct children as [name, module], each module once (torch named_children). */
  named_children(): [string, Module][] {
    const seen = new Set<Module>();
    return this._local_modules().filter(([, m]) => (seen.has(m) ? false : (seen.add(m), true)));
  }
  children(): Module[] {
    return this.named_children().map(([, m]) => m);
  }
  /**
   * This module and all below it, depth first, as [dotted name, module]; "" names this module.
   * Shared modules appear once unless `remove_duplicate` is false (torch named_modules).
   */
  named_modules(prefix = "", remove_duplicate = true): [string, Module][] {
    const out: [string, Module][] = [];
    const memo = new Set<Module>();
    const onPath = new Set<Module>();
    const walk = (m: Module, p: string): void => {
      if (onPath.has(m)) return; // a cycle (a module stored below itself): stop
      if (remove_duplicate) {
        if (memo.has(m)) return;
        memo.add(m);
      }
      out.push([p, m]);
      onPath.add(m);
      for (const [n, c] of m._local_modules()) walk(c, p ? `${p}.${n}` : n);
      onPath.delete(m);
    };
    walk(this, prefix);
    return out;
  }
  modules(): Module[] {
    return this.named_modules().map(([, m]) => m);
  }
  /**
   * Parameters as [dotted name, parameter], in registration order; a parameter shared by several
   * modules (tied weights) appears once under its first name (torch named_parameters).
   * @param recurse - false: this module's own parameters only
   */
  named_parameters(prefix = "", recurse = true, remove_duplicate = true): [string, Parameter][] {
    const mods: [string, Module][] = recurse ? this.named_modules(prefix, remove_duplicate) : [[prefix, this]];
    const seen = new Set<Parameter>();
    const out: [string, Parameter][] = [];
    for (const [mp, m] of mods) {
      for (const [n, p] of m._local_parameters()) {
        if (remove_duplicate && seen.has(p)) continue;
        seen.add(p);
        out.push([mp ? `${mp}.${n}` : n, p]);
      }
    }
    return out;
  }
  /** All parameters (an array; torch returns a generator), e.g. for an optimizer. */
  parameters(recurse = true): Parameter[] {
    return this.named_parameters("", recurse).map(([, p]) => p);
  }
  /** Buffers as [dotted name, tensor], persistent or not (torch named_buffers). */
  named_buffers(prefix = "", recurse = true, remove_duplicate = true): [string, Tensor][] {
    const mods: [string, Module][] = recurse ? this.named_modules(prefix, remove_duplicate) : [[prefix, this]];
    const seen = new Set<Tensor>();
    const out: [string, Tensor][] = [];
    for (const [mp, m] of mods) {
      for (const [n, b] of m._local_buffers()) {
        if (remove_duplicate && seen.has(b)) continue;
        seen.add(b);
        out.push([mp ? `${mp}.${n}` : n, b]);
      }
    }
    return out;
  }
  buffers(recurse = true): Tensor[] {
    return this.named_buffers("", recurse).map(([, b]) => b);
  }

  /**
   * The submodule at a dotted path ("" is this module) (torch get_submodule).
   * @throws LoomValueError naming the first missing component
   */
  get_submodule(target: string): Module {
    if (target === "") return this;
    let m: Module = this;
    for (const part of target.split(".")) {
      const next = m._local_modules().find(([n]) => n === part)?.[1];
      if (!next) throw new LoomValueError(`[get_submodule] ${m._get_name()} has no submodule \`${part}\` (looking up "${target}")`);
      m = next;
    }
    return m;
  }
  /** The parameter at a dotted path (torch get_parameter). @throws LoomValueError if absent */
  get_parameter(target: string): Parameter {
    const i = target.lastIndexOf(".");
    const m = this.get_submodule(i < 0 ? "" : target.slice(0, i));
    const name = target.slice(i + 1);
    const p = m._local_parameters().find(([n]) => n === name)?.[1];
    if (!p) throw new LoomValueError(`[get_parameter] ${m._get_name()} has no parameter \`${name}\` (looking up "${target}")`);
    return p;
  }
  /** The buffer at a dotted path (torch get_buffer). @throws LoomValueError if absent */
  get_buffer(target: string): Tensor {
    const i = target.lastIndexOf(".");
    const m = this.get_submodule(i < 0 ? "" : target.slice(0, i));
    const name = target.slice(i + 1);
    const b = m._local_buffers().find(([n]) => n === name)?.[1];
    if (!b) throw new LoomValueError(`[get_buffer] ${m._get_name()} has no buffer \`${name}\` (looking up "${target}")`);
    return b;
  }

  // ---- state dict -------------------------------------------------------------------------
  /**
   * Parameters and persistent buffers keyed by dotted path, in registration order. Tied
   * parameters appear under every name (as torch). Values are detached tensors sharing the
   * parameters' buffers, or the Parameters themselves with `keep_vars`.
   */
  state_dict(opts: { prefix?: string; keep_vars?: boolean } = {}): StateDict {
    const out: StateDict = {};
    const onPath = new Set<Module>();
    const walk = (m: Module, prefix: string): void => {
      if (onPath.has(m)) return;
      onPath.add(m);
      for (const [n, p] of m._local_parameters()) out[prefix + n] = opts.keep_vars ? p : p.detach();
      for (const [n, b, persistent] of m._local_buffers()) if (persistent) out[prefix + n] = opts.keep_vars ? b : b.detach();
      for (const [n, c] of m._local_modules()) walk(c, `${prefix}${n}.`);
      onPath.delete(m);
    };
    walk(this, opts.prefix ?? "");
    return out;
  }

  /**
   * Copy `state_dict`'s values into this module's parameters and persistent buffers, in place
   * under no_grad (dtype converted to the parameter's), as torch load_state_dict.
   * Nothing is copied when an error is raised.
   * @param state_dict - dotted key -> Tensor or LazyTensor (realized), a plain object or a Map
   * @param strict - keys must match exactly (missing and unexpected keys throw)
   * @returns the missing and unexpected keys
   * @throws LoomValueError listing missing keys, unexpected keys (strict) and every shape
   *   mismatch ("size mismatch for fc.weight: copying a param with shape [3, 4] from checkpoint,
   *   the shape in current model is [4, 3].", raised even when not strict, as torch)
   */
  load_state_dict(state_dict: Record<string, AnyTensor> | Map<string, AnyTensor>, strict = true): IncompatibleKeys {
    const given = state_dict instanceof Map ? state_dict : new Map(Object.entries(state_dict));
    const own = this.state_dict({ keep_vars: true });
    const missing_keys = Object.keys(own).filter((k) => !given.has(k));
    // hasOwn, not `in`: "__proto__", "toString"... are inherited by every object, not keys of this module
    const unexpected_keys = [...given.keys()].filter((k) => !Object.hasOwn(own, k));
    const errors: string[] = [];
    if (strict) {
      if (missing_keys.length) errors.push(`Missing key(s) in state_dict: ${missing_keys.map((k) => `"${k}"`).join(", ")}.`);
      if (unexpected_keys.length) errors.push(`Unexpected key(s) in state_dict: ${unexpected_keys.map((k) => `"${k}"`).join(", ")}.`);
    }
    const copies: [Tensor, AnyTensor][] = [];
    for (const [k, dst] of Object.entries(own)) {
      const src = given.get(k);
      if (src === undefined) continue;
      if (!(src instanceof TensorOps)) {
        errors.push(`While copying the parameter named "${k}", expected a Tensor from checkpoint but received ${(src as object)?.constructor?.name ?? typeof src}.`);
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
      throw new LoomValueError(`[load_state_dict] Error(s) in loading state_dict for ${this._get_name()}:\n\t${errors.join("\n\t")}`);
    }
    no_grad(() => {
      for (const [dst, src] of copies) dst.copy_(src instanceof LazyTensor ? src.eval() : (src as Tensor));
    });
    return { missing_keys, unexpected_keys };
  }

  // ---- modes and bulk updates -------------------------------------------------------------
  /** Set training mode here and in every submodule (torch train). Returns this. */
  train(mode = true): this {
    if (typeof mode !== "boolean") throw new LoomValueError(`[train] training mode is expected to be boolean, got ${typeof mode}`);
    for (const m of this.modules()) m.training = mode;
    return this;
  }
  /** train(false): Dropout becomes the identity (torch eval). Returns this. */
  eval(): this {
    return this.train(false);
  }
  /** Set requires_grad on every parameter (torch requires_grad_), e.g. to freeze a base model. */
  requires_grad_(requires_grad = true): this {
    for (const p of this.parameters()) p.requires_grad_(requires_grad);
    return this;
  }
  /**
   * Reset the gradients of all parameters (torch zero_grad): to null (default), or zeroed in
   * place with `set_to_none = false`.
   */
  zero_grad(set_to_none = true): void {
    for (const p of this.parameters()) {
      if (!p.grad) continue;
      if (set_to_none) {
        p.grad = null;
        continue;
      }
      const g = p.grad.detach();
      no_grad(() => g.zero_());
      p.grad = g;
    }
  }
  /** Call `fn` on every submodule (children first) and then this one (torch apply). */
  apply(fn: (m: Module) => void): this {
    for (const c of this.children()) c.apply(fn);
    fn(this);
    return this;
  }
  /**
   * Convert floating-point parameters, their gradients and buffers to `dtype` (torch to(dtype));
   * integer tensors are kept. Parameters are replaced by converted Parameters (Loom tensors
   * cannot change dtype in place), keeping requires_grad and ties: build optimizers after to().
   */
  to(dtype: DType | string): this {
    if (!(DTYPES as readonly string[]).includes(dtype)) return this._to_device(dtype);
    if (!isFloating(dtype as DType)) throw new LoomValueError(`[to] nn.Module.to only accepts floating point dtypes, but got desired dtype=${dtype}`);
    const done = new Map<TensorOps<any>, TensorOps<any>>();
    no_grad(() => {
      for (const m of this.modules()) {
        for (const [n, p] of m._local_parameters()) {
          if (!isFloating(p.dtype) || p.dtype === dtype) continue;
          let q = done.get(p) as Parameter | undefined;
          if (!q) {
            q = new Parameter(p.detach().to(dtype), p.requires_grad);
            if (p.grad) q.grad = p.grad.detach().to(dtype);
            done.set(p, q);
          }
          m._set_local_param(n, q);
        }
        for (const [n, b] of m._local_buffers()) {
          if (!isFloating(b.dtype) || b.dtype === dtype) continue;
          let c = done.get(b) as Tensor | undefined;
          if (!c) {
            c = b.to(dtype);
            done.set(b, c);
          }
          (m as unknown as Record<string, unknown>)[n] = c;
        }
      }
    });
    return this;
  }
  /**
   * Move parameters (with their gradients) and buffers to `device` ("cpu", "webgpu"), as torch
   * Module.to(device). Parameters are replaced by moved Parameters, keeping requires_grad and
   * ties: build optimizers after to().
   */
  private _to_device(device: string): this {
    const done = new Map<TensorOps<any>, TensorOps<any>>();
    no_grad(() => {
      for (const m of this.modules()) {
        for (const [n, p] of m._local_parameters()) {
          if (p.device === device) continue;
          let q = done.get(p) as Parameter | undefined;
          if (!q) {
            q = new Parameter(p.detach().to(device), p.requires_grad);
            if (p.grad) q.grad = p.grad.detach().to(device);
            done.set(p, q);
          }
          m._set_local_param(n, q);
        }
        for (const [n, b] of m._local_buffers()) {
          if (b.device === device) continue;
          let c = done.get(b) as Tensor | undefined;
          if (!c) {
            c = b.to(device);
            done.set(b, c);
          }
          (m as unknown as Record<string, unknown>)[n] = c;
        }
      }
    });
    return this;
  }
  private _set_local_param(name: string, p: Parameter): void {
    (this as unknown as Record<string, unknown>)[name] = p;
  }
  float(): this { return this.to("float32"); }
  double(): this { return this.to("float64"); }
  half(): this { return this.to("float16"); }
  bfloat16(): this { return this.to("bfloat16"); }

  // ---- execution --------------------------------------------------------------------------
  /**
   * The generic style of writing a module (every built-in layer): the computation written with
   * the generic tensor surface, `forward_lazy<S extends TensorOps<S>>(x: S): S`, with
   * `lift(param, x)` giving eager parameters the input's kind. New modules can instead override
   * `forward` itself (see `forward`). Subclasses override one of the two.
   * @throws LoomValueError when the subclass implemented neither
   */
  forward_lazy(..._args: any[]): any {
    throw new LoomValueError(`[forward] Module [${this._get_name()}] is missing the required "forward" function (override forward, or the generic forward_lazy)`);
  }
  /**
   * The computation, as torch's `forward`. Two ways to write a module:
   * - override `forward` with plain tensors, as in PyTorch:
   *   `forward(x: Tensor): Tensor { return this.fc2.call(this.fc1.call(x).relu()); }`, using
   *   `this.weight` and tensors made inside (`loom.arange`) directly. `call(x)` runs it with the
   *   hooks, in the execution mode (execution.ts): in "lazy" mode the inputs it receives are
   *   LazyTensors (same methods as Tensor), and parameters, buffers and other eager tensors
   *   combined with them are lifted automatically, so the whole forward is recorded as one graph.
   * - or override the generic `forward_lazy` (the built-in layers); then this base `forward` is
   *   the entry that runs it with the hooks, and `call` is the same as `forward`.
   * Tensors may be passed inside arrays and plain objects; outputs may be tensors, arrays or plain
   * objects of them.
   */
  forward(...args: any[]): any {
    return this._run(this.forward_lazy, args);
  }
  /** @internal Run `fn` (forward_lazy, or an overriding forward) with the hooks, under execution.ts's rules. */
  _run(fn: (...args: any[]) => unknown, args: unknown[]): unknown {
    const h = this._module_hooks;
    if (!h || h.empty) return run_forward(fn.bind(this), args);
    return h.call(this, this._get_name(), args, (a, prepare) => run_forward((...xs: unknown[]) => fn.apply(this, prepare(xs)), a));
  }
  /** @internal Whether this module's computation is an overriding `forward` (not the generic `forward_lazy`). */
  get _plain_forward(): boolean {
    return this.forward_lazy === Module.prototype.forward_lazy && this.forward !== Module.prototype.forward;
  }

  // ---- hooks (hooks.ts) ---------------------------------------------------------------------
  private _module_hooks: ModuleHooks<Module> | null = null;
  private get _hooks_(): ModuleHooks<Module> {
    return (this._module_hooks ??= new ModuleHooks<Module>());
  }
  /**
   * `hook(module, args)` before each forward; a returned value replaces the arguments (an array,
   * or one value). torch.nn.Module.register_forward_pre_hook.
   */
  register_forward_pre_hook(hook: ForwardPreHook<this>): RemovableHandle {
    return this._hooks_.forwardPre.add(hook as ForwardPreHook<Module>);
  }
  /** `hook(module, args, output)` after each forward; a returned value replaces the output (torch's register_forward_hook). */
  register_forward_hook(hook: ForwardHook<this>): RemovableHandle {
    return this._hooks_.forward.add(hook as ForwardHook<Module>);
  }
  /**
   * `hook(module, grad_output)` when the gradient of the output is computed; a returned array
   * replaces grad_output. torch's register_full_backward_pre_hook; one tensor in and out (hooks.ts).
   */
  register_full_backward_pre_hook(hook: BackwardPreHook<this>): RemovableHandle {
    return this._hooks_.backwardPre.add(hook as BackwardPreHook<Module>);
  }
  /**
   * `hook(module, grad_input, grad_output)` when the gradient of the input from this module is
   * computed; a returned array replaces grad_input (torch's register_full_backward_hook; one
   * tensor in and out, hooks.ts). grad_input is empty when the input does not require grad.
   */
  register_full_backward_hook(hook: BackwardHook<this>): RemovableHandle {
    return this._hooks_.backward.add(hook as BackwardHook<Module>);
  }
  /**
   * The user entry point, torch's `module(x)`: runs the computation with the hooks, in the
   * execution mode. Typed as this module's `forward` (its parameters and return type, generic
   * when forward is), so `mlp.call(x)` is a `Tensor` when `forward(x: Tensor): Tensor`.
   * (A property typed from `forward`: subclasses override `forward`, never `call`.)
   */
  declare call: this["forward"];
  /** `call` with execution mode "eager" for this call: the op-by-op reference to compare against. */
  declare forward_eager: this["forward"];

  // ---- printing ---------------------------------------------------------------------------
  /** The class name (torch _get_name). */
  _get_name(): string {
    return this.constructor.name;
  }
  /** The text inside this module's parentheses in toString, e.g. "in_features=4, out_features=2, bias=True". */
  extra_repr(): string {
    return "";
  }
  /** torch's module repr: `Name(extra)` or a tree of `(name): Child(...)` lines. */
  toString(): string {
    const kids = this._local_modules();
    const extra = this.extra_repr();
    if (kids.length === 0) return `${this._get_name()}(${extra})`;
    const lines = extra ? extra.split("\n") : [];
    for (const [n, c] of kids) lines.push(`(${n}): ${c.toString().split("\n").join("\n  ")}`);
    return `${this._get_name()}(\n  ${lines.join("\n  ")}\n)`;
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}

/**
 * A Module mapping one tensor to one tensor of the same kind (Linear, LayerNorm, activations,
 * Sequential...): the same execution as Module, with precise types for `forward`/`call`.
 */
export abstract class TensorModule extends Module {
  abstract override forward_lazy<S extends TensorOps<S>>(x: S): S;
  override forward<S extends TensorOps<S>>(x: S): S {
    return super.forward(x) as S;
  }
}

// call and forward_eager are prototype properties (typed from forward above), not methods, so
// that each subclass's `call` has its own forward's (possibly generic) signature
Object.defineProperties(Module.prototype, {
  call: {
    value: function call(this: Module, ...args: unknown[]): unknown {
      if (this._plain_forward) return this._run(this.forward, args);
      return this.forward(...args);
    },
    writable: true,
    configurable: true,
  },
  forward_eager: {
    value: function forward_eager(this: Module, ...args: unknown[]): unknown {
      return with_execution_mode("eager", () => (this.call as (...a: unknown[]) => unknown)(...args));
    },
    writable: true,
    configurable: true,
  },
});

/** A number as Python prints it (1e-05, 0.1, 1.0), for torch-identical extra_repr text. */
export function py_float(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return `${x}.0`;
  if (x !== 0 && (Math.abs(x) < 1e-4 || Math.abs(x) >= 1e16)) {
    const [m, e] = x.toExponential().split("e") as [string, string];
    const sign = e.startsWith("-") ? "-" : "+";
    return `${m}e${sign}${e.replace(/^[+-]/, "").padStart(2, "0")}`;
  }
  return String(x);
}

/** A boolean as Python prints it. */
export function py_bool(b: boolean): string {
  return b ? "True" : "False";
}
