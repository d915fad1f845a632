/**
 * Containers (torch.nn.Sequential, ModuleList, ModuleDict). Sequential and ModuleList keep their
 * children as numbered own properties "0", "1", ..., so `h[0]` works and state-dict keys are
 * `h.0.attn...` as in Hugging Face checkpoints. ModuleDict keeps insertion order in a Map (so
 * any key, even "train", is allowed).
 */
import type { TensorOps } from "../lazy/surface.ts";
import { LoomIndexError, LoomValueError } from "../tensor/errors.ts";
import { Module, TensorModule } from "./module.ts";

function checkModule(op: string, m: unknown): asserts m is Module {
  if (!(m instanceof Module)) throw new LoomValueError(`[${op}] ${(m as object)?.constructor?.name ?? typeof m} is not a Module subclass`);
}

/** Own numbered children "0".."n-1" of a module, in index order. */
function numbered(m: Module): Module[] {
  const self = m as unknown as Record<string, unknown>;
  const out: Module[] = [];
  for (let i = 0; self[String(i)] instanceof Module; i++) out.push(self[String(i)] as Module);
  return out;
}

function normIndex(op: string, i: number, n: number): number {
  const j = i < 0 ? i + n : i;
  if (!Number.isInteger(i) || j < 0 || j >= n) throw new LoomIndexError(`[${op}] index ${i} is out of range for a container of length ${n}`);
  return j;
}

/**
 * Modules applied in order, each to the previous one's output (torch.nn.Sequential).
 * `new Sequential(a, b, c)` names the children "0", "1", "2"; `new Sequential({fc: a, act: b})`
 * (or a Map) keeps the given names.
 */
export class Sequential extends TensorModule {
  [index: number]: Module;

  constructor(...args: Module[] | [Record<string, Module> | Map<string, Module>]) {
    super();
    const first = args[0];
    if (args.length === 1 && !(first instanceof Module) && first !== undefined) {
      const entries = first instanceof Map ? [...first] : Object.entries(first);
      for (const [name, m] of entries) {
        checkModule("Sequential", m);
        this.add_module(name, m);
      }
    } else {
      (args as Module[]).forEach((m, i) => {
        checkModule("Sequential", m);
        this.add_module(String(i), m);
      });
    }
  }

  /** Number of children. */
  get length(): number {
    return this._local_modules().length;
  }
  /** The child at index i (negative counts from the end). @throws LoomIndexError out of range */
  get(i: number): Module {
    const mods = this._local_modules();
    return mods[normIndex("Sequential", i, mods.length)]![1];
  }
  /** Add a module at the end, named by its index. Returns this. */
  append(m: Module): this {
    checkModule("Sequential.append", m);
    this.add_module(String(this.length), m);
    return this;
  }
  [Symbol.iterator](): Iterator<Module> {
    return this._local_modules().map(([, m]) => m)[Symbol.iterator]();
  }

  /** Feed x through every child in order. */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    let y: unknown = x;
    for (const [, m] of this._local_modules()) y = m.call(y); // call: a child written with a plain forward runs with its hooks
    return y as S;
  }
}

/**
 * A list of modules, registered so their parameters are visible (torch.nn.ModuleList). No
 * forward: the owner iterates it. Children are own properties "0", "1", ...: `list[0]` works.
 */
export class ModuleList<M extends Module = Module> extends Module {
  [index: number]: M;

  constructor(modules: Iterable<M> = []) {
    super();
    this.extend(modules);
  }
  get length(): number {
    return numbered(this).length;
  }
  /** The module at index i (negative counts from the end). @throws LoomIndexError out of range */
  get(i: number): M {
    const mods = numbered(this);
    return mods[normIndex("ModuleList", i, mods.length)] as M;
  }
  /** Replace the module at index i. */
  set(i: number, m: M): void {
    checkModule("ModuleList.set", m);
    const j = normIndex("ModuleList", i, this.length);
    this._set_local(String(j), m);
  }
  append(m: M): this {
    checkModule("ModuleList.append", m);
    this._set_local(String(this.length), m);
    return this;
  }
  extend(modules: Iterable<M>): this {
    for (const m of modules) this.append(m);
    return this;
  }
  /** Insert before index i (torch insert), shifting later modules up. */
  insert(i: number, m: M): void {
    checkModule("ModuleList.insert", m);
    const mods = numbered(this) as M[];
    const n = mods.length;
    const j = Math.min(Math.max(i < 0 ? i + n : i, 0), n);
    mods.splice(j, 0, m);
    mods.forEach((x, k) => this._set_local(String(k), x));
  }
  [Symbol.iterator](): Iterator<M> {
    return (numbered(this) as M[])[Symbol.iterator]();
  }
  /** Map over the modules (an array). */
  map<R>(fn: (m: M, i: number) => R): R[] {
    return (numbered(this) as M[]).map(fn);
  }
}

/**
 * The members of a ModuleDict: `ModuleDict<{ wte: Embedding; h: ModuleList<Block> }>` (inferred
 * from the constructor's object) has typed keys; `ModuleDict<Linear>` is any key to a Linear.
 */
export type ModuleDictMembers<T> = T extends Module ? Record<string, NoInfer<T>> : T;
/** The type of a member under a key not given at construction: the value type, else Module. */
export type ModuleDictValue<T> = T extends Module ? T : Module;

/**
 * Modules by name in insertion order (torch.nn.ModuleDict). Iterating yields the keys, as torch.
 * Typed by its members: `new ModuleDict({ wte: new Embedding(...), h: new ModuleList([...]) })`
 * gives `get("wte"): Embedding` (other keys, added later with `set`, give a Module).
 */
// the default (a field declared `nn.ModuleDict`) takes any dict: a typed one is assignable to it
// (key constraints make the type parameter invariant), and its members are unchecked
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export class ModuleDict<T extends Module | Record<string, Module> = any> extends Module {
  private readonly _dict = new Map<string, Module>();

  constructor(modules: ModuleDictMembers<T> | Map<string, Module> | Iterable<[string, Module]> = {} as ModuleDictMembers<T>) {
    super();
    this.update(modules);
  }
  protected override _local_entries(): [string, unknown][] {
    return [...super._local_entries(), ...this._dict];
  }
  protected override _set_local(name: string, value: unknown): void {
    if (value instanceof Module) this._dict.set(name, value);
    else super._set_local(name, value);
  }
  override add_module(name: string, module: Module | null): void {
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
  /** The module under key. @throws LoomValueError if absent */
  get<K extends keyof ModuleDictMembers<T> & string>(key: K): ModuleDictMembers<T>[K];
  get(key: string): ModuleDictValue<T>;
  get(key: string): Module {
    const m = this._dict.get(key);
    if (!m) throw new LoomValueError(`[ModuleDict] no module under key '${key}' (keys: ${[...this._dict.keys()].join(", ")})`);
    return m;
  }
  set<K extends keyof ModuleDictMembers<T> & string>(key: K, m: ModuleDictMembers<T>[K]): void;
  set(key: string, m: ModuleDictValue<T>): void;
  set(key: string, m: Module): void {
    this.add_module(key, m);
  }
  has(key: string): boolean {
    return this._dict.has(key);
  }
  /** Remove and return the module under key (torch pop). */
  pop<K extends keyof ModuleDictMembers<T> & string>(key: K): ModuleDictMembers<T>[K];
  pop(key: string): ModuleDictValue<T>;
  pop(key: string): Module {
    const m = this.get(key);
    this._dict.delete(key);
    return m;
  }
  clear(): void {
    this._dict.clear();
  }
  update(modules: Partial<ModuleDictMembers<T>> | Map<string, Module> | Iterable<[string, Module]>): void {
    const entries = modules instanceof Map || Symbol.iterator in modules ? [...(modules as Iterable<[string, Module]>)] : Object.entries(modules as Record<string, Module>);
    for (const [k, m] of entries) this.add_module(k, m);
  }
  keys(): string[] {
    return [...this._dict.keys()];
  }
  /** The modules (for keyed members, the union of their types). */
  values(): ModuleDictMembers<T>[keyof ModuleDictMembers<T>][] {
    return [...this._dict.values()] as ModuleDictMembers<T>[keyof ModuleDictMembers<T>][];
  }
  items(): [string, ModuleDictMembers<T>[keyof ModuleDictMembers<T>]][] {
    return [...this._dict] as [string, ModuleDictMembers<T>[keyof ModuleDictMembers<T>]][];
  }
  get length(): number {
    return this._dict.size;
  }
  [Symbol.iterator](): Iterator<string> {
    return this._dict.keys();
  }
}
