/**
 * The browser demo's model code, runtime-neutral (a browser tab, Deno, Bun): fetch a GPT-2
 * checkpoint (config.json, model.safetensors, vocab.json) and a PEFT LoRA adapter
 * (adapter_config.json, adapter_model.safetensors) over HTTP — the folders the main job writes
 * (examples/lora_finetune.ts: checkpoints/char-gpt and checkpoints/char-gpt-lora-names) — and
 * generate greedily with asynchronous reads (`await t.data()`), the only way a browser can wait
 * for WebGPU.
 */
import * as loom from "../../src/index.ts";

type Tensor = loom.Tensor;

/** A loaded model with its adapter and tokenizer. */
export interface LoadedModel {
  model: loom.models.GPT2LMHeadModel;
  tokenizer: loom.models.CharTokenizer | null;
  device: string;
  /** What ran it ("webgpu: <adapter>" or "cpu (js)"), and why not WebGPU when it is not. */
  description: string;
}

async function fetchBytes(url: string): Promise<Uint8Array> {
  const r = await fetch(url);
  if (!r.ok) throw new loom.LoomValueError(`[demo] GET ${url}: ${r.status} ${r.statusText}`);
  return new Uint8Array(await r.arrayBuffer());
}
async function fetchJson(url: string): Promise<Record<string, unknown>> {
  return JSON.parse(new TextDecoder().decode(await fetchBytes(url))) as Record<string, unknown>;
}
async function fetchOptionalJson(url: string): Promise<Record<string, unknown> | null> {
  const r = await fetch(url);
  return r.ok ? ((await r.json()) as Record<string, unknown>) : null;
}
/** safetensors bytes -> name -> Tensor (loom.io parses; tensor_from_io wraps without copying). */
function tensorsOf(bytes: Uint8Array): Map<string, Tensor> {
  return new Map([...loom.io.load(bytes).tensors].map(([k, t]) => [k, loom.lora.tensor_from_io(t)]));
}

/**
 * Fetch the checkpoint at `modelUrl` and the adapter at `adapterUrl` (null: none), and put the
 * model on "webgpu" when `wantGpu` and an adapter opens, else on "cpu".
 * @throws LoomValueError for a failed request or files that do not fit the model
 */
export async function loadModel(modelUrl: string, adapterUrl: string | null, wantGpu = true): Promise<LoadedModel> {
  const base = modelUrl.endsWith("/") ? modelUrl : `${modelUrl}/`;
  const config = loom.models.GPT2Config.from_dict(await fetchJson(`${base}config.json`));
  const model = new loom.models.GPT2LMHeadModel(config, { init: false });
  model.load_state_dict(tensorsOf(await fetchBytes(`${base}model.safetensors`)), false);
  if (config.tie_word_embeddings) model.tie_weights();
  const vocab = await fetchOptionalJson(`${base}vocab.json`);
  let tokenizer: loom.models.CharTokenizer | null = null;
  if (vocab) {
    const chars: string[] = [];
    for (const [c, id] of Object.entries(vocab)) chars[id as number] = c;
    tokenizer = new loom.models.CharTokenizer(chars);
  }
  if (adapterUrl) {
    const a = adapterUrl.endsWith("/") ? adapterUrl : `${adapterUrl}/`;
    const cfg = loom.lora.LoraConfig.from_dict(await fetchJson(`${a}adapter_config.json`)).replace({ inference_mode: true });
    loom.lora.inject_adapter_in_model(cfg, model);
    loom.lora.set_peft_model_state_dict(model, tensorsOf(await fetchBytes(`${a}adapter_model.safetensors`)));
  }
  model.eval();
  let device = "cpu", description = `cpu (${loom.runtime_info().cpu_backend})`;
  if (wantGpu) {
    const s = await loom.init_webgpu();
    if (s.available) {
      model.to("webgpu");
      device = "webgpu";
      description = `webgpu: ${s.device}`;
    } else description += `; no WebGPU: ${s.reason}`;
  }
  return { model, tokenizer, device, description };
}

/** The logits [T, vocab] of `ids` (one sequence), read back asynchronously, as a Float64Array. */
export async function logitsOf(m: LoadedModel, ids: readonly number[]): Promise<Float64Array> {
  const x = loom.tensor([ids as number[]], { dtype: "int64" }).to(m.device);
  const out = loom.no_grad(() => m.model.forward(x).logits);
  return out.data();
}

/** Greedy decoding of `n` tokens after `prompt`; returns the new ids and tokens per second. */
export async function generate(m: LoadedModel, prompt: readonly number[], n: number, onToken?: (id: number) => void): Promise<{ ids: number[]; tokensPerSecond: number; seconds: number }> {
  const ctx = m.model.config.n_positions;
  const ids = [...prompt];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const window = ids.slice(-ctx);
    const logits = await logitsOf(m, window);
    const V = m.model.config.vocab_size, last = logits.subarray((window.length - 1) * V, window.length * V);
    let best = 0;
    for (let v = 1; v < V; v++) if (last[v]! > last[best]!) best = v;
    ids.push(best);
    onToken?.(best);
  }
  const seconds = (performance.now() - t0) / 1000;
  return { ids: ids.slice(prompt.length), tokensPerSecond: n / seconds, seconds };
}
