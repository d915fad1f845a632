/**
 * Module API: registration and dotted names (against torch's names for a nanoGPT-layout model),
 * state_dict / load_state_dict (round trip, in-place copy, strict and non-strict errors), buffers,
 * train/eval, zero_grad, apply, requires_grad_, to(dtype), containers, Parameter, execution modes.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import type { TensorOps } from "../../src/lazy/surface.ts";
import { expectSame, readGolden } from "./helpers.ts";

const golden = readGolden<{ state_dict_keys: string[]; named_parameters: string[]; named_modules: string[] }>(
  new URL("./nn_goldens.json", import.meta.url),
);

// ---- a nanoGPT-layout model, as built by gen_nn_goldens.py ------------------------------------
class MLP extends nn.TensorModule {
  c_fc: nn.Linear;
  gelu = new nn.GELU("tanh");
  c_proj: nn.Linear;
  dropout = new nn.Dropout(0);
  constructor(n: number) {
    super();
    this.c_fc = new nn.Linear(n, 4 * n);
    this.c_proj = new nn.Linear(4 * n, n);
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return this.dropout.call(this.c_proj.call(this.gelu.call(this.c_fc.call(x))));
  }
}
class Block extends nn.TensorModule {
  ln_1: nn.LayerNorm;
  attn: nn.CausalSelfAttention;
  ln_2: nn.LayerNorm;
  mlp: MLP;
  constructor(n: number, h: number) {
    super();
    this.ln_1 = new nn.LayerNorm(n);
    this.attn = new nn.CausalSelfAttention(n, h);
    this.ln_2 = new nn.LayerNorm(n);
    this.mlp = new MLP(n);
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    const y = x.add(this.attn.call(this.ln_1.call(x)));
    return y.add(this.mlp.call(this.ln_2.call(y)));
  }
}
class GPT extends nn.Module {
  transformer: nn.ModuleDict;
  lm_head: nn.Linear;
  constructor(vocab = 11, block = 7, n = 8, h = 2, layers = 2) {
    super();
    this.transformer = new nn.ModuleDict({
      wte: new nn.Embedding(vocab, n),
      wpe: new nn.Embedding(block, n),
      drop: new nn.Dropout(0),
      h: new nn.ModuleList(Array.from({ length: layers }, () => new Block(n, h))),
      ln_f: new nn.LayerNorm(n),
    });
    this.lm_head = new nn.Linear(n, vocab, { bias: false });
    (this.transformer.get("wte") as nn.Embedding).weight = this.lm_head.weight; // weight tying
  }
}

describe("names follow attribute paths (torch / Hugging Face keys)", () => {
  const gpt = new GPT();
  test("state_dict keys equal torch's, tied weight under both names", () => {
    expect(Object.keys(gpt.state_dict())).toEqual(golden.state_dict_keys);
  });
  test("named_parameters equal torch's (a tied parameter once, under its first name)", () => {
    expect(gpt.named_parameters().map(([n]) => n)).toEqual(golden.named_parameters);
    expect(gpt.parameters().length).toBe(golden.named_parameters.length);
  });
  test("named_modules equal torch's", () => {
    expect(gpt.named_modules().map(([n]) => n)).toEqual(golden.named_modules);
    expect(gpt.modules().length).toBe(golden.named_modules.length);
  });
  test("children, named_children, get_submodule, get_parameter", () => {
    expect(gpt.named_children().map(([n]) => n)).toEqual(["transformer", "lm_head"]);
    expect(gpt.children()[1]).toBe(gpt.lm_head);
    const blk = gpt.get_submodule("transformer.h.1") as Block;
    expect(blk).toBeInstanceOf(Block);
    expect(gpt.get_parameter("transformer.h.1.attn.c_attn.bias")).toBe(blk.attn.c_attn.bias!);
    expect(() => gpt.get_submodule("transformer.h.5")).toThrow("[get_submodule] ModuleList has no submodule `5` (looking up \"transformer.h.5\")");
    expect(() => gpt.get_parameter("lm_head.bias")).toThrow("[get_parameter] Linear has no parameter `bias`");
  });
  test("reassigning an attribute replaces the registered child (LoRA-style injection)", () => {
    const m = new MLP(2);
    m.c_fc = new nn.Linear(2, 8, { bias: false });
    expect(m.named_parameters().map(([n]) => n)).toEqual(["c_fc.weight", "c_proj.weight", "c_proj.bias"]);
  });
});

describe("state_dict / load_state_dict", () => {
  test("round trip copies values in place into the existing parameters", () => {
    loom.manual_seed(1);
    const a = new GPT();
    loom.manual_seed(2);
    const b = new GPT();
    const wBefore = b.lm_head.weight;
    const res = b.load_state_dict(a.state_dict());
    expect(res).toEqual({ missing_keys: [], unexpected_keys: [] });
    expect(b.lm_head.weight).toBe(wBefore); // same Parameter object, new values
    for (const [k, v] of Object.entries(a.state_dict())) expectSame(b.state_dict()[k]!, v);
  });
  test("state_dict values are detached views of the parameters (torch keep_vars=False)", () => {
    const lin = new nn.Linear(2, 2);
    const sd = lin.state_dict();
    expect(sd.weight!.requires_grad).toBe(false);
    loom.no_grad(() => lin.weight.fill_(3));
    expect(sd.weight!.tolist()).toEqual([[3, 3], [3, 3]]);
    expect(lin.state_dict({ keep_vars: true }).weight).toBe(lin.weight);
    expect(Object.keys(lin.state_dict({ prefix: "fc." }))).toEqual(["fc.weight", "fc.bias"]);
  });
  test("strict: missing and unexpected keys are listed (torch's message)", () => {
    const lin = new nn.Linear(2, 3);
    const sd = { weight: loom.zeros(3, 2), extra: loom.zeros(1), "other.bias": loom.zeros(2) };
    expect(() => lin.load_state_dict(sd)).toThrow(
      '[load_state_dict] Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias".\n\tUnexpected key(s) in state_dict: "extra", "other.bias".',
    );
  });
  test("shape mismatches name the key and both shapes, strict or not; nothing is copied", () => {
    const lin = new nn.Linear(2, 3);
    const before = lin.weight.dataSync();
    const sd = { weight: loom.zeros(2, 3), bias: loom.ones(3) };
    const msg = "[load_state_dict] Error(s) in loading state_dict for Linear:\n\tsize mismatch for weight: copying a param with shape [2, 3] from checkpoint, the shape in current model is [3, 2].";
    expect(() => lin.load_state_dict(sd)).toThrow(msg);
    expect(() => lin.load_state_dict(sd, false)).toThrow(msg);
    expect(Array.from(lin.weight.dataSync())).toEqual(Array.from(before));
    expect(lin.bias!.tolist()).not.toEqual([1, 1, 1]);
  });
  test("non-strict returns missing/unexpected keys and loads the rest", () => {
    const lin = new nn.Linear(2, 1);
    const res = lin.load_state_dict({ bias: loom.tensor([7]), junk: loom.zeros(1) }, false);
    expect(res).toEqual({ missing_keys: ["weight"], unexpected_keys: ["junk"] });
    expect(lin.bias!.tolist()).toEqual([7]);
    expect(lin.bias!.dtype).toBe("float32"); // int64 source converted to the parameter's dtype
  });
  test("keys named like Object.prototype members (__proto__, toString, constructor) are unexpected keys", () => {
    // torch: any key that is not a parameter or persistent buffer name is unexpected
    const lin = new nn.Linear(1, 1);
    const w = loom.tensor([[2]]), b = loom.tensor([0.5]);
    const odd = [["__proto__", loom.zeros(1)], ["toString", loom.zeros(1)], ["constructor", loom.zeros(1)]] as const;
    const asMap = new Map<string, loom.Tensor>([["weight", w], ["bias", b], ...odd]);
    const asObject = Object.fromEntries(asMap); // fromEntries defines "__proto__" as an own key
    expect(Object.keys(asObject)).toEqual(["weight", "bias", "__proto__", "toString", "constructor"]);
    for (const sd of [asMap, asObject]) {
      expect(() => lin.load_state_dict(sd)).toThrow(
        '[load_state_dict] Error(s) in loading state_dict for Linear:\n\tUnexpected key(s) in state_dict: "__proto__", "toString", "constructor".',
      );
      expect(lin.load_state_dict(sd, false)).toEqual({ missing_keys: [], unexpected_keys: ["__proto__", "toString", "constructor"] });
      expect(lin.weight.tolist()).toEqual([[2]]);
    }
  });
  test("a Map state dict and LazyTensor values are accepted", () => {
    const lin = new nn.Linear(1, 1);
    lin.load_state_dict(new Map<string, loom.Tensor | loom.LazyTensor>([["weight", loom.tensor([[2]]).float().lazy().mul(3)], ["bias", loom.tensor([0.5])]]));
    expect(lin.weight.tolist()).toEqual([[6]]);
    expect(lin.bias!.tolist()).toEqual([0.5]);
  });
  test("load_state_dict works while grad mode is on (copies under no_grad)", () => {
    const lin = new nn.Linear(1, 1);
    expect(loom.is_grad_enabled()).toBe(true);
    lin.load_state_dict({ weight: loom.tensor([[1.5]]), bias: loom.tensor([0]) });
    expect(lin.weight.requires_grad).toBe(true);
    expect(lin.weight.is_leaf).toBe(true);
  });
});

class WithBuffers extends nn.Module {
  lin = new nn.Linear(2, 2);
  constructor() {
    super();
    this.register_buffer("running", loom.tensor([1, 2]).float());
    this.register_buffer("mask", loom.tensor([true, false]), false);
    this.register_buffer("nothing", null);
  }
}

describe("buffers", () => {
  test("persistent buffers are in state_dict, non-persistent ones only in named_buffers", () => {
    const m = new WithBuffers();
    expect(m.named_buffers().map(([n]) => n)).toEqual(["running", "mask"]);
    // torch's order: own parameters, own buffers, then each child
    expect(Object.keys(m.state_dict())).toEqual(["running", "lin.weight", "lin.bias"]);
    expect(m.named_parameters().map(([n]) => n)).toEqual(["lin.weight", "lin.bias"]);
    expect(m.buffers().length).toBe(2);
  });
  test("load_state_dict loads buffers; to(dtype) converts floating buffers only", () => {
    const m = new WithBuffers();
    m.load_state_dict({ ...m.state_dict(), running: loom.tensor([5, 6]).float() });
    expect(m.get_buffer("running").tolist()).toEqual([5, 6]);
    m.to("float64");
    expect(m.get_buffer("running").dtype).toBe("float64");
    expect(m.get_buffer("mask").dtype).toBe("bool");
  });
  test("registration errors name the problem", () => {
    const m = new nn.Module();
    expect(() => m.register_buffer("a.b", null)).toThrow('[register_buffer] name can\'t contain ".", got "a.b"');
    expect(() => m.register_parameter("train", null)).toThrow("[register_parameter] attribute 'train' already exists on Module");
    expect(() => m.register_parameter("w", loom.zeros(1) as never)).toThrow("[register_parameter] cannot assign a Tensor as parameter 'w' (nn.Parameter or null expected)");
    expect(() => m.add_module("", new nn.ReLU())).toThrow('[add_module] name can\'t be empty string ""');
    m.register_parameter("w", new nn.Parameter(loom.zeros(2)));
    m.add_module("act", new nn.ReLU());
    expect(m.named_parameters().map(([n]) => n)).toEqual(["w"]);
    expect(m.named_children().map(([n]) => n)).toEqual(["act"]);
  });
});

describe("modes and bulk updates", () => {
  test("train()/eval() propagate to every submodule and drive Dropout", () => {
    const gpt = new GPT();
    gpt.eval();
    expect(gpt.modules().every((m) => m.training === false)).toBe(true);
    gpt.train();
    expect(gpt.modules().every((m) => m.training === true)).toBe(true);
    const d = new nn.Dropout(0.5);
    const x = loom.ones(1000);
    const y = d.call(x); // training: zeros and 2s
    const vals = new Set(Array.from(y.dataSync()));
    expect([...vals].sort()).toEqual([0, 2]);
    expectSame(d.eval().call(x), x);
  });
  test("zero_grad: null by default, zeros in place with set_to_none false", () => {
    const lin = new nn.Linear(3, 2);
    lin.call(loom.ones(1, 3)).sum().backward();
    expect(lin.weight.grad!.tolist()).toEqual([[1, 1, 1], [1, 1, 1]]);
    lin.zero_grad(false);
    expect(lin.weight.grad!.tolist()).toEqual([[0, 0, 0], [0, 0, 0]]);
    lin.zero_grad();
    expect(lin.weight.grad).toBeNull();
    expect(lin.bias!.grad).toBeNull();
  });
  test("gradients accumulate across backward calls until zero_grad", () => {
    const lin = new nn.Linear(1, 1);
    for (let i = 0; i < 3; i++) lin.call(loom.tensor([[2]]).float()).sum().backward();
    expect(lin.weight.grad!.tolist()).toEqual([[6]]); // 3 × d(2w)/dw
  });
  test("apply visits children before the parent", () => {
    const seq = new nn.Sequential(new nn.Linear(1, 1), new nn.Sequential(new nn.ReLU(), new nn.Tanh()));
    const seen: string[] = [];
    seq.apply((m) => seen.push(m._get_name()));
    expect(seen).toEqual(["Linear", "ReLU", "Tanh", "Sequential", "Sequential"]);
    seq.apply((m) => { if (m instanceof nn.Linear) nn.init.constant_(m.weight, 0.25); });
    expect((seq.get(0) as nn.Linear).weight.tolist()).toEqual([[0.25]]);
  });
  test("requires_grad_(false) freezes every parameter", () => {
    const gpt = new GPT();
    gpt.requires_grad_(false);
    expect(gpt.parameters().some((p) => p.requires_grad)).toBe(false);
    gpt.lm_head.requires_grad_();
    expect(gpt.parameters().filter((p) => p.requires_grad).length).toBe(1); // lm_head.weight (= wte)
  });
  test("to(dtype) converts parameters, keeps requires_grad and weight ties", () => {
    const gpt = new GPT();
    const before = gpt.lm_head.weight.dataSync();
    gpt.to("float64");
    expect(gpt.parameters().every((p) => p.dtype === "float64" && p.requires_grad)).toBe(true);
    expect((gpt.transformer.get("wte") as nn.Embedding).weight).toBe(gpt.lm_head.weight);
    expect(Array.from(gpt.lm_head.weight.dataSync())).toEqual(Array.from(before));
    expect(() => gpt.to("int32")).toThrow("[to] nn.Module.to only accepts floating point dtypes, but got desired dtype=int32");
  });
});

describe("containers", () => {
  test("ModuleList: index access, negative get, insert, iteration", () => {
    const a = new nn.ReLU(), b = new nn.Tanh(), c = new nn.Sigmoid();
    const l = new nn.ModuleList([a, c]);
    l.insert(1, b);
    expect([...l]).toEqual([a, b, c]);
    expect(l[1]).toBe(b);
    expect(l.get(-1)).toBe(c);
    expect(l.length).toBe(3);
    expect(() => l.get(3)).toThrow("[ModuleList] index 3 is out of range for a container of length 3");
    expect(l.named_children().map(([n]) => n)).toEqual(["0", "1", "2"]);
  });
  test("ModuleDict keeps insertion order, even for numeric-looking keys", () => {
    const d = new nn.ModuleDict({ b: new nn.ReLU() });
    d.set("10", new nn.Tanh());
    d.set("2", new nn.Sigmoid());
    d.set("train", new nn.Identity());
    expect(d.keys()).toEqual(["b", "10", "2", "train"]);
    expect(d.named_children().map(([n]) => n)).toEqual(["b", "10", "2", "train"]);
    expect([...d]).toEqual(["b", "10", "2", "train"]);
    expect(d.pop("10")).toBeInstanceOf(nn.Tanh);
    expect(() => d.get("zz")).toThrow("[ModuleDict] no module under key 'zz' (keys: b, 2, train)");
  });
  test("Sequential with names; forward chains; a module used twice runs twice", () => {
    const lin = new nn.Linear(2, 2, { bias: false });
    lin.load_state_dict({ weight: loom.tensor([[0, 1], [1, 0]]) }); // swaps the two features
    const seq = new nn.Sequential({ swap: lin, again: lin });
    expect(seq.named_children().map(([n]) => n)).toEqual(["swap"]); // deduplicated, as torch
    expect(Object.keys(seq.state_dict())).toEqual(["swap.weight", "again.weight"]);
    expect(seq.call(loom.tensor([[1, 2]]).float()).tolist()).toEqual([[1, 2]]); // swapped twice
    expect(seq.append(new nn.ReLU()).length).toBe(3);
  });
});

describe("Parameter", () => {
  test("shares the given tensor's buffer and requires grad", () => {
    const t = loom.zeros(2);
    const p = new nn.Parameter(t);
    expect(p.requires_grad).toBe(true);
    expect(p.is_leaf).toBe(true);
    loom.no_grad(() => p.fill_(4));
    expect(t.tolist()).toEqual([4, 4]);
    expect(new nn.Parameter(t, false).requires_grad).toBe(false);
    expect(nn.is_parameter(p)).toBe(true);
    expect(nn.is_parameter(t)).toBe(false);
    expect(p.toString().startsWith("Parameter containing:\ntensor([4., 4.]")).toBe(true);
  });
  test("integer tensors cannot require grad", () => {
    expect(() => new nn.Parameter(loom.tensor([1, 2]))).toThrow("only Tensors of floating point dtype can require gradients, got int64");
  });
  test("ops on a Parameter give plain Tensors", () => {
    const p = new nn.Parameter(loom.ones(2));
    expect(p.mul(2)).not.toBeInstanceOf(nn.Parameter);
  });
});

describe("execution modes", () => {
  test("lazy mode defers the forward and realizes it once at the first read; eager mode never realizes", () => {
    const mlp = new MLP(4);
    const x = loom.randn(3, 4);
    const r0 = loom.realizeStats.realizes;
    const y = mlp.call(x) as loom.Tensor;
    expect(loom.realizeStats.realizes - r0).toBe(0); // pending: nothing ran yet
    expect(y.is_pending).toBe(true);
    y.dataSync();
    expect(loom.realizeStats.realizes - r0).toBe(1);
    const r1 = loom.realizeStats.realizes;
    nn.set_execution_mode("eager");
    try {
      expect(nn.get_execution_mode()).toBe("eager");
      mlp.call(x);
    } finally {
      nn.set_execution_mode("lazy");
    }
    expect(loom.realizeStats.realizes - r1).toBe(0);
  });
  test("forward_eager and with_execution_mode restore the mode", () => {
    const mlp = new MLP(2);
    const x = loom.randn(1, 2);
    expectSame(mlp.forward_eager(x), mlp.call(x));
    expect(nn.get_execution_mode()).toBe("lazy");
    expect(() => nn.with_execution_mode("eager", () => { throw new Error("boom"); })).toThrow("boom");
    expect(nn.get_execution_mode()).toBe("lazy");
    expect(() => nn.set_execution_mode("fast" as never)).toThrow('[set_execution_mode] expected "lazy" or "eager", got fast');
  });
  test("a parameter used twice in one lazy forward is lifted once and gets the summed gradient", () => {
    class Twice extends nn.TensorModule {
      lin = new nn.Linear(2, 2, { bias: false });
      forward_lazy<S extends TensorOps<S>>(x: S): S {
        return this.lin.call(this.lin.call(x));
      }
    }
    const m = new Twice();
    m.load_state_dict({ "lin.weight": loom.tensor([[1, 2], [3, 4]]) });
    const x = loom.tensor([[1, -1]]).float();
    m.call(x).sum().backward();
    // y = x W^T W^T, L = sum(y). dL/dW = W^T 1 x^T... computed by hand:
    // h = x W^T = [-1, -1]; y = h W^T = [-3, -7]; dL/dh = 1 W = [4, 6];
    // dL/dW = 1ᵀ h (second use) + (dL/dh)ᵀ x (first use) = [[-1,-1],[-1,-1]] + [[4,-4],[6,-6]]
    expect(m.lin.weight.grad!.tolist()).toEqual([[3, -5], [5, -7]]);
    const lazyGrad = m.lin.weight.grad!;
    m.zero_grad();
    m.forward_eager(x).sum().backward();
    expectSame(m.lin.weight.grad!, lazyGrad);
  });
  test("forward outputs may be objects and arrays of tensors; all are realized", () => {
    class Two extends nn.Module {
      override forward_lazy<S extends TensorOps<S>>(x: S): { a: S; b: S[] } {
        return { a: x.mul(2), b: [x.add(1), x.neg()] };
      }
    }
    const out = new Two().call(loom.tensor([1, 2]).float()) as { a: loom.Tensor; b: loom.Tensor[] };
    expect(out.a.isLazy).toBe(false);
    expect(out.a.tolist()).toEqual([2, 4]);
    expect(out.b.map((t) => t.tolist())).toEqual([[2, 3], [-1, -2]]);
  });
  test("a module without forward_lazy says so", () => {
    expect(() => new nn.Module().call(loom.ones(1))).toThrow('[forward] Module [Module] is missing the required "forward" function');
  });
});
