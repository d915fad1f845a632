import { lora, models, optim, tensor } from "../../src/index.ts";
const model = models.GPT2LMHeadModel.from_pretrained("checkpoints/char-gpt");   // `npm start` makes it
const peft = lora.get_peft_model(model, new lora.LoraConfig({
  r: 8, lora_alpha: 16, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, task_type: "CAUSAL_LM",
}));
const opt = new optim.AdamW(model.parameters().filter((p) => p.requires_grad), { lr: 5e-3 });
const ids = models.CharTokenizer.from_pretrained("checkpoints/char-gpt").encode("Emma\nOlivia\nAva\nMia\n".repeat(20));
const T = model.config.n_positions;
for (let step = 0; step < 20; step++) {
  const s = (step * 7) % (ids.length - T - 1);  // a window of T characters, and its next characters
  const x = tensor([ids.slice(s, s + T)], { dtype: "int64" }), y = tensor([ids.slice(s + 1, s + T + 1)], { dtype: "int64" });
  const { loss } = model.call(x, { targets: y }); opt.zero_grad(); loss!.backward(); opt.step();
}
lora.save_adapter(peft, "out/adapter");          // PEFT: PeftModel.from_pretrained(model, "out/adapter")
const merged = peft.merge_and_unload();          // a plain GPT2LMHeadModel with W + s·B·A
