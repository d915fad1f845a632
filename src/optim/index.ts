/**
 * loom.optim: optimizers and learning-rate schedulers (torch.optim).
 * Optimizers: SGD, Adam, AdamW, RMSprop, Adagrad. Schedulers (also under `optim.lr_scheduler`):
 * LambdaLR, StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, SequentialLR,
 * OneCycleLR, ReduceLROnPlateau, and Hugging Face's warmup helpers.
 *
 * ```ts
 * const opt = new optim.AdamW(model.parameters(), { lr: 3e-4, weight_decay: 0.1 });
 * const sched = optim.get_cosine_schedule_with_warmup(opt, 100, 1000);
 * for (...) { opt.zero_grad(); loss.backward(); opt.step(); sched.step(); }
 * ```
 */
export {
  Optimizer, clone_tensor, type BaseHyperparams, type OptimizerStateDict, type ParamGroup, type ParamGroupInput,
  type ParamState, type ParamsInput,
} from "./optimizer.ts";
export { SGD, type SGDHyperparams } from "./sgd.ts";
export { Adam, AdamW, type AdamHyperparams } from "./adam.ts";
export { RMSprop, type RMSpropHyperparams } from "./rmsprop.ts";
export { Adagrad, type AdagradHyperparams } from "./adagrad.ts";
export * as lr_scheduler from "./lr_scheduler_all.ts";
export * from "./lr_scheduler_all.ts";
