/**
 * loom.optim: optimizers and learning-rate schedulers (torch.optim).
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
export * as lr_scheduler from "./lr_scheduler.ts";
export {
  LRScheduler, LambdaLR, StepLR, CosineAnnealingLR, LinearLR, SequentialLR, type SchedulerStateDict,
  get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup,
} from "./lr_scheduler.ts";
